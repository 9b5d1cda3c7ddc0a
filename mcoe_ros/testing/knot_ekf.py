"""The IMU + leg-kinematics EKF baseline of the benchmarks, stepped on the estimator's own grid knots.

:class:`KnotEkf` follows a :class:`mcoe_ros.estimation.estimator.Estimator`'s sliding window: after each sample fed
to it, :meth:`KnotEkf.update` steps a :class:`mcoe_ros.estimation.leg_odometry.LegKinematicsEkf` once per grid knot
created since the last call (same resampled sensors, same detected contacts as the optimal estimator), so that the
two are compared on identical data.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mcoe_ros.estimation.leg_odometry import LegKinematicsEkf


class KnotEkf:
    """EKF on the new grid knots of ``estimator``; ``start(t)`` gives the initial base position (3,) in m at the first
    knot's time t (s, the window's clock); noise standard deviations from the estimator's configuration."""

    def __init__(self, estimator, start: Callable[[float], np.ndarray]):
        self.estimator = estimator
        self.start = start
        self.ekf: LegKinematicsEkf | None = None
        self._seen = 0

    def update(self) -> list:
        """Step the EKF on the knots created since the last call (the first knot initialises it); returns them."""
        est = self.estimator
        window = est.window
        created = window.n_created
        new = min(created - self._seen, len(window.knots))
        self._seen = created
        knots = list(window.knots)[len(window.knots) - new :] if new > 0 else []
        noise = est.config.noise
        for knot in knots:
            if self.ekf is None:
                self.ekf = LegKinematicsEkf(
                    est.robot, self.start(knot.t), accel_std=noise.accelerometer, foot_velocity_std=noise.foot_velocity
                )
            else:
                self.ekf.step(knot, est.dt)
        return knots

    @property
    def position(self) -> np.ndarray:
        """Base position (3,) in the world frame, m."""
        return self.ekf.position
