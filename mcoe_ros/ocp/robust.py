"""Robust losses on groups of whitened residuals, for iteratively reweighted Gauss–Newton (IRLS).

A residual group g (one measurement model's whitened residual r_g (m,), or one interval's process noise with
s = wᵀ W w) costs ½ ρ(s), s = ‖r_g‖², instead of ½ s. With k² = c² m (c = ``threshold``: the RMS whitened
component at which a group starts to count as an outlier, so the threshold does not depend on the group size):

    quadratic  ρ(s) = s                                   ρ'(s) = 1
    huber      ρ(s) = s (s ≤ k²),  2 k √s − k² (s > k²)    ρ'(s) = min(1, k / √s)
    cauchy     ρ(s) = k² log(1 + s / k²)                  ρ'(s) = 1 / (1 + s / k²)

IRLS: at each linearisation the group's weight ω = ρ'(s) scales its residual and Jacobian by √ω (or its noise
information W by ω). Then the Gauss–Newton gradient (√ω J)ᵀ(√ω r) = ρ'(s) Jᵀ r is the exact gradient of ½ ρ(s),
and the curvature ω JᵀJ is the IRLS one (the ρ'' term is dropped; it is ≤ 0 for both losses, so the model stays
convex). The solver's merit evaluates ½ ρ(s) at trial points (:meth:`EstimationProblem.measurement_cost`,
:meth:`EstimationProblem.noise_cost`), so the line search's model decrease d1 and the evaluated costs are those
of one function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

LOSSES = ("quadratic", "huber", "cauchy")


@dataclass(frozen=True)
class RobustLoss:
    """ρ of one of :data:`LOSSES` with threshold c (whitened units per residual component)."""

    kind: str = "huber"
    threshold: float = 2.0

    def __post_init__(self):
        if self.kind not in LOSSES:
            raise ValueError(f"robust loss must be one of {LOSSES}, got {self.kind!r}")
        if not self.threshold > 0.0:
            raise ValueError("robust loss threshold must be > 0")

    def rho(self, s: float, m: int) -> float:
        """ρ(s) of a group of m residual components with squared whitened norm s."""
        if self.kind == "quadratic":
            return s
        k2 = self.threshold**2 * m
        if self.kind == "huber":
            return s if s <= k2 else 2.0 * np.sqrt(k2 * s) - k2
        return k2 * np.log1p(s / k2)

    def weight(self, s: float, m: int) -> float:
        """IRLS weight ρ'(s) ∈ (0, 1]."""
        if self.kind == "quadratic":
            return 1.0
        k2 = self.threshold**2 * m
        if self.kind == "huber":
            return 1.0 if s <= k2 else float(np.sqrt(k2 / s))
        return 1.0 / (1.0 + s / k2)


#: a residual group of an interval model: the slice of its whitened residual r and the loss on it
Group = tuple[slice, RobustLoss]


@dataclass
class RobustCost:
    """Which residuals of an :class:`~mcoe_ros.ocp.problem.EstimationProblem` get a robust loss.

    ``process``: the loss on each interval's process noise (None: quadratic). ``groups(model)``: the robust groups of
    an interval model's residual (slices of r with their loss; residual entries in no group stay quadratic).
    """

    process: RobustLoss | None
    groups: Callable[[object], Sequence[Group]]

    def __post_init__(self):
        self._cache: dict[int, tuple[object, list[tuple[slice, RobustLoss, int]]]] = {}

    def model_groups(self, model) -> list[tuple[slice, RobustLoss, int]]:
        """(slice, loss, size) of each robust group of ``model`` (cached per model object)."""
        entry = self._cache.get(id(model))
        if entry is None or entry[0] is not model:
            groups = [(sl, loss, sl.stop - sl.start) for sl, loss in self.groups(model) if loss.kind != "quadratic"]
            entry = (model, groups)
            self._cache[id(model)] = entry
        return entry[1]

    def measurement_cost(self, model, r: np.ndarray) -> float:
        """½ Σ ρ over the groups + ½ ‖r‖² over the rest, of a whitened residual r (nr,) of ``model``."""
        total = float(r @ r)
        for sl, loss, m in self.model_groups(model):
            s = float(r[sl] @ r[sl])
            total += loss.rho(s, m) - s
        return 0.5 * total

    def reweight(self, model, r: np.ndarray, *jacobians: np.ndarray) -> tuple[float, np.ndarray]:
        """IRLS at a linearisation: scale r and the rows of every Jacobian of each group by √ρ'(s), in place.

        Returns (½ Σ ρ (the robust cost of r before scaling), the weights (one per group))."""
        total = float(r @ r)
        groups = self.model_groups(model)
        weights = np.ones(len(groups))
        for i, (sl, loss, m) in enumerate(groups):
            s = float(r[sl] @ r[sl])
            total += loss.rho(s, m) - s
            weights[i] = wgt = loss.weight(s, m)
            if wgt != 1.0:
                root = np.sqrt(wgt)
                r[sl] *= root
                for jac in jacobians:
                    jac[sl] *= root
        return 0.5 * total, weights

    def noise_cost(self, info: np.ndarray, w: np.ndarray) -> float:
        """½ ρ(wᵀ W w) of a process noise w (nw,) with quadratic information W (nw, nw)."""
        s = float(w @ info @ w)
        return 0.5 * (s if self.process is None else self.process.rho(s, w.size))

    def noise_weight(self, info: np.ndarray, w: np.ndarray) -> float:
        """ρ'(wᵀ W w) (1 without a process loss)."""
        return 1.0 if self.process is None else self.process.weight(float(w @ info @ w), w.size)
