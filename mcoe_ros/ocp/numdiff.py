"""Central finite differences on manifolds: the one reference every derivative test compares against.

For a map y = fun(x) between manifolds (each a :mod:`mcoe_ros.ocp.state`-like object, or Euclidean when omitted),
the tangent Jacobian is estimated column by column as

    J[:, i] = (fun(x ⊕ h e_i) ⊖ y0 − fun(x ⊕ (−h e_i)) ⊖ y0) / 2h,     y0 = fun(x),

which is second-order accurate (error O(h²) plus round-off O(ε/h); h = 1e-6 balances them for O(1) quantities).
``fun`` may return one array or a tuple of arrays (then one Jacobian per output, each with its own ⊖).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def _minus(y0: np.ndarray, y1: np.ndarray) -> np.ndarray:
    return y1 - y0


def jacobian(
    fun: Callable[[np.ndarray], np.ndarray | tuple],
    x: np.ndarray,
    step: float = 1e-6,
    state=None,
    output_states: Sequence | object | None = None,
) -> np.ndarray | list[np.ndarray]:
    """Central-difference Jacobian(s) of ``fun`` at ``x`` (see module docstring).

    state: manifold of x (``integrate``, ``ndx``), None = Euclidean. output_states: manifold of the output (or a
    sequence, one per output of a tuple-valued ``fun``; entries None = Euclidean), used through ``difference``.
    Returns (m, ndx) or a list of them.
    """
    x = np.asarray(x, dtype=float)
    ndx = x.size if state is None else state.ndx
    y0 = fun(x)
    single = not isinstance(y0, tuple)
    y0s = (y0,) if single else y0
    y0s = tuple(np.array(y, dtype=float, copy=True) for y in y0s)
    outs = output_states if isinstance(output_states, (list, tuple)) else [output_states] * len(y0s)
    diffs = [_minus if o is None else o.difference for o in outs]
    cols: list[list[np.ndarray]] = [[] for _ in y0s]
    for i in range(ndx):
        e = np.zeros(ndx)
        e[i] = step
        xp = x + e if state is None else state.integrate(x, e)
        xm = x - e if state is None else state.integrate(x, -e)
        yp, ym = fun(xp), fun(xm)
        yp, ym = ((yp,), (ym,)) if single else (yp, ym)
        for j, (diff, y_ref) in enumerate(zip(diffs, y0s, strict=True)):
            cols[j].append((diff(y_ref, np.asarray(yp[j], float)) - diff(y_ref, np.asarray(ym[j], float))) / (2 * step))
    jacs = [np.array(c).T.reshape(-1, ndx) for c in cols]
    return jacs[0] if single else jacs


def relative_error(analytic: np.ndarray, reference: np.ndarray) -> float:
    """max |analytic − reference| / max(1, max |reference|): absolute for small entries, relative for large ones."""
    reference = np.asarray(reference, dtype=float)
    return float(np.abs(np.asarray(analytic) - reference).max() / max(1.0, np.abs(reference).max()))


class WorstErrors:
    """Keeps the worst relative error per key across checks (for the report a test prints) and asserts a tolerance."""

    def __init__(self, tolerance: float):
        self.tolerance = tolerance
        self.worst: dict[str, float] = {}

    def record(self, key: str, analytic: np.ndarray, reference: np.ndarray) -> float:
        err = relative_error(analytic, reference)
        self.worst[key] = max(self.worst.get(key, 0.0), err)
        assert err <= self.tolerance, f"{key}: finite-difference relative error {err:.2e} > {self.tolerance:.0e}"
        return err

    def report(self, title: str) -> str:
        lines = [f"{title} (worst relative error vs central differences):"]
        lines += [f"  {k:<40s} {v:.2e}" for k, v in sorted(self.worst.items())]
        return "\n".join(lines)
