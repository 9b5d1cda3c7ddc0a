"""Covariance calibration of the published payload and pose (issue 14 item 5).

The Gauss–Newton covariance is exact only if the models are: measurement and process residuals white with the
configured standard deviations. Two stated corrections, selected by ``robust.covariance_scaling``:

* ``residual`` -- the window's reduced chi-square σ̂² = 2 J_window / Σ n_r (:meth:`Estimator.reduced_chi2`): the
  covariance is multiplied by max(σ̂², floor). It corrects a mis-scaled *white* noise model only.
* ``consistency`` -- nested-estimate consistency (:class:`ConsistencyScale`): information only accumulates, so for
  a consistent estimator the payload estimate θ_k of a later solve differs from an earlier θ_j by
  Δ = θ_k − θ_j with Cov(Δ) = Σ_j − Σ_k ⪯ Σ_j, hence E[Δᵀ Σ_j⁻¹ Δ] ≤ d. Systematic model errors (unmodelled
  actuator losses, soft feet, a wrong URDF) make the estimate wander far beyond its claimed σ; the largest
  T = Δᵀ Σ_j⁻¹ Δ / d seen so far (lag ``consistency_lag`` s, on the payload's mass and CoM, d = 4) bounds by how
  much the covariance is too small, and the published payload covariance is multiplied by max(T_max, σ̂², floor)
  (the largest rather than the mean: chosen on the ablation of docs/robust.md, where the mean left the NEES 10-80x
  above the band). The pose and twist covariances get the ``residual`` factor: a payload statistic says nothing
  about the odometry. The two statistics see different failures (a misfit inside the window, a drift across
  windows), hence the larger of the two for the payload. It cannot see a *steady* bias (an estimate that converged
  to a wrong value and stays there).
"""

from __future__ import annotations

from collections import deque

import numpy as np


def mass_com(pi: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mass kg, CoM m (3,)) (4,) of a body's pi (10,) and its covariance (4, 4) from that of pi (10, 10) through
    d(m, h/m)/dpi (h = m c the first moment); needs m ≠ 0."""
    m = float(pi[0])
    jac = np.zeros((4, 10))
    jac[0, 0] = 1.0
    jac[1:, 0] = -np.asarray(pi[1:4]) / m**2
    jac[1:, 1:4] = np.eye(3) / m
    out = jac @ cov @ jac.T
    return np.r_[m, np.asarray(pi[1:4]) / m], 0.5 * (out + out.T)


class ConsistencyScale:
    """Running nested-estimate consistency factor (see module docstring) over a sequence of payload estimates:
    the largest T so far.

    ``update(t s, pi (10,), cov (10, 10) unscaled)`` returns the factor for that estimate (≥ ``floor``)."""

    def __init__(self, lag: float = 0.5, floor: float = 1.0):
        self.lag, self.floor = float(lag), float(floor)
        self._past: deque[tuple[float, np.ndarray, np.ndarray]] = deque()
        self._max, self._n = 0.0, 0

    def reset(self) -> None:
        self._past.clear()
        self._max, self._n = 0.0, 0

    def statistic(self) -> float:
        """The largest T so far (nan before the first lagged pair)."""
        return self._max if self._n else float("nan")

    def update(self, t: float, pi: np.ndarray, cov: np.ndarray) -> float:
        if abs(float(pi[0])) < 1e-6 or not np.all(np.isfinite(cov)):
            return max(self.floor, self.statistic()) if self._n else self.floor
        y, cy = mass_com(pi, cov)
        ref = None
        while self._past and self._past[0][0] <= t - self.lag:
            ref = self._past.popleft()
        if ref is not None:
            self._past.appendleft(ref)  # keep the newest old-enough estimate for the next update
            d = y - ref[1]
            stat = float(d @ np.linalg.pinv(ref[2], rcond=1e-12, hermitian=True) @ d) / d.size
            if np.isfinite(stat):
                self._max = max(self._max, stat)
                self._n += 1
        self._past.append((t, y, cy))
        return max(self.floor, self.statistic()) if self._n else self.floor
