"""The gyro's bias learnt from the IMU's own orientation reading (``imu_bias.attitude_tracking``).

A legged robot's IMU reports a quaternion from its own attitude filter, run on the same gyro and accelerometer: its
roll and pitch are held to gravity by the accelerometer, so their error stays bounded (the accelerometer bias's tilt
plus fluctuations of ~1–12 mrad correlated over 0.15–0.5 s on the realism suite, docs/realism.md session 25), while
the gyro integrated alone drifts at its bias. Over T seconds the two differ by b T + (bounded error): the reading's
long-term tilt carries the horizontal gyro bias (what the attitude filter's integral term learns), with no leg, contact
or floor model in it. The window of the optimal estimator is too short to see it (b T ≈ 5 mrad in 0.2 s against its
white orientation weight), and the bias estimated in the window is pulled by the contact model's own errors (a soft
floor's sinking feet, the trot's landings: docs/realism.md session 26).

:class:`GyroBiasTracker` is a 6-state error-state Kalman filter at a decimated rate:

* state: the gyro-integrated attitude R̂ (IMU frame to world, propagated with ω − b̂ at every sample) and b̂ (3,)
  rad/s (IMU frame); error δθ (world-frame small rotation, R = exp(δθ) R̂) and δb = b − b̂;
* propagation over Δ: δθ ← δθ − G δb with G = Σ R̂ dt, process noise σ_g² Δ (the gyro's white noise) on δθ and
  σ_w² Δ (the bias random walk) on δb;
* every ``interval`` s (no shorter than the reading's error correlation time, so the updates' errors are about
  independent): the reading R_r's tilt, z = (log(R_r R̂ᵀ))_xy (world x, y) with std σ_m (``error``). Yaw is not
  measured (the reading's yaw is its own gyro integral), so b̂'s vertical component stays at its prior.

Its covariance's bias block is the uncertainty the consider analysis then adds for the gyro (the estimator's
``imu_bias.consider``), so the published covariances follow what the tracker has learnt. A constant tilt offset of
the reading moves δθ, not b̂ (it does not grow with time).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin


class GyroBiasTracker:
    """Gyro bias b̂ (3,) rad/s, IMU frame, and its covariance (3, 3) from the gyro and the orientation reading.

    prior_std: rad/s per axis (the initial bias spread); random_walk: rad/s/√s; gyro_noise: the gyro's white-noise
    density, rad/√s; error: rad, the reading's tilt error per update; interval: s between updates; max_gap: s, a
    longer gap between two samples restarts the attitude from the reading (b̂ and its covariance, grown by the random
    walk over the gap, are kept).
    """

    def __init__(
        self,
        prior_std: float,
        random_walk: float,
        gyro_noise: float,
        error: float,
        interval: float,
        max_gap: float = 0.1,
    ) -> None:
        if min(prior_std, error, interval) <= 0.0 or min(random_walk, gyro_noise) < 0.0:
            raise ValueError("need prior_std, error, interval > 0 and random_walk, gyro_noise >= 0")
        self.prior_std, self.random_walk, self.gyro_noise = float(prior_std), float(random_walk), float(gyro_noise)
        self.error, self.interval, self.max_gap = float(error), float(interval), float(max_gap)
        self.bias = np.zeros(3)  #: b̂ (3,) rad/s, IMU frame
        self.cov = np.zeros((6, 6))  #: covariance of (δθ world rad, δb rad/s)
        self.updates = 0  #: reading updates so far
        self._rot = None  #: R̂ (3, 3), IMU frame to world; None before the first sample
        self._gain = np.zeros((3, 3))  #: G = Σ R̂ dt since the last update
        self._t = 0.0  #: time of the last sample, s
        self._since = 0.0  #: s since the last update
        self._h = np.zeros((2, 6))
        self._h[0, 0] = self._h[1, 1] = 1.0
        self._started = False  #: the bias covariance holds a prior

    @property
    def last_t(self) -> float | None:
        """Time of the newest sample, s; None before the first."""
        return None if self._rot is None else self._t

    @property
    def variance(self) -> np.ndarray:
        """(3,) variances of b̂, (rad/s)²."""
        return np.diag(self.cov)[3:].copy()

    def add(self, t: float, rot: np.ndarray, gyro: np.ndarray) -> None:
        """One IMU sample: time s, the reading R_r (3, 3) IMU frame to world, the gyro (3,) rad/s (IMU frame)."""
        t = float(t)
        dt = t - self._t
        if self._rot is None or dt > self.max_gap or dt < 0.0:
            bias_cov = self.cov[3:, 3:].copy()
            self.cov[:] = 0.0
            self.cov[:3, :3] = np.eye(3) * self.error**2
            if self._started:  # a gap: the bias kept, its random walk over the gap added
                self.cov[3:, 3:] = bias_cov + np.eye(3) * self.random_walk**2 * max(dt, 0.0)
            else:
                self.cov[3:, 3:] = np.eye(3) * self.prior_std**2
            self._started = True
            self._rot = np.array(rot, dtype=float)
            self._gain[:] = 0.0
            self._t, self._since = t, 0.0
            return
        self._t = t
        if dt == 0.0:
            return
        self._gain += self._rot * dt
        self._rot = self._rot @ pin.exp3((np.asarray(gyro, dtype=float) - self.bias) * dt)
        self._since += dt
        if self._since >= self.interval:
            self._update(rot)

    def _update(self, rot: np.ndarray) -> None:
        """Propagate the covariance over the interval, then fuse the reading's tilt."""
        f = np.eye(6)
        f[:3, 3:] = -self._gain
        cov = f @ self.cov @ f.T
        cov[:3, :3] += np.eye(3) * self.gyro_noise**2 * self._since
        cov[3:, 3:] += np.eye(3) * self.random_walk**2 * self._since
        self._gain[:] = 0.0
        self._since = 0.0
        z = pin.log3(np.asarray(rot, dtype=float) @ self._rot.T)[:2]  # world-frame tilt of the reading against R̂
        h = self._h
        s = h @ cov @ h.T + np.eye(2) * self.error**2
        k = np.linalg.solve(s, h @ cov).T
        dx = k @ z
        ikh = np.eye(6) - k @ h
        self.cov = ikh @ cov @ ikh.T + (k * self.error**2) @ k.T  # Joseph form
        self.cov = 0.5 * (self.cov + self.cov.T)
        self._rot = pin.exp3(dx[:3]) @ self._rot
        self.bias += dx[3:]
        self.updates += 1
