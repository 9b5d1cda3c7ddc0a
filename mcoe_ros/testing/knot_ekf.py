"""The IMU + leg-kinematics EKF baseline of the benchmarks, stepped on the estimator's own grid knots.

:class:`KnotEkf` follows a :class:`mcoe_ros.estimation.estimator.Estimator`'s sliding window: after each sample fed
to it, :meth:`KnotEkf.update` steps a :class:`mcoe_ros.estimation.leg_odometry.LegKinematicsEkf` once per grid knot
created since the last call, with the information the optimal estimator uses at that knot (an honest baseline, as in
the MCOE paper's comparison): the same resampled sensors, the zero-velocity update on the same feet as the estimator's
pseudo-measurement (the *settled* stance feet, :attr:`mcoe_ros.estimation.window.GridKnot.measured`: past their
touch-down transient and loaded), and, when the estimator uses the flat-ground base-height pseudo-measurement
(``noise.foot_height`` > 0), the same ground update on the detected stance feet with the same standard deviation
(ground plane = the first knot's lowest foot, the estimator's own convention, ``ProblemBuilder.standing_height``).
``settled=False`` / ``ground=False`` give the bare filter (every detected stance foot, no ground), for ablations;
``record=True`` keeps its steps for the fixed-lag smoother (:meth:`LegKinematicsEkf.smoothed`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mcoe_ros.estimation.leg_odometry import LegKinematicsEkf


class KnotEkf:
    """EKF on the new grid knots of ``estimator``; ``start(t)`` gives the initial base position (3,) in m at the first
    knot's time t (s, the window's clock); noise standard deviations from the estimator's configuration
    (``noise.accelerometer``, ``noise.foot_velocity``, ``noise.foot_height``); see the module docstring."""

    def __init__(
        self,
        estimator,
        start: Callable[[float], np.ndarray],
        settled: bool = True,
        ground: bool = True,
        record: bool = False,
    ):
        self.estimator = estimator
        self.start = start
        self.settled = settled
        self.ground = ground
        self.record = record  #: keep the filter's steps for its fixed-lag smoother (LegKinematicsEkf.smoothed)
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
                p0 = np.asarray(self.start(knot.t), dtype=float)
                ground_std = noise.foot_height if self.ground else 0.0
                self.ekf = LegKinematicsEkf(
                    est.robot,
                    p0,
                    accel_std=noise.accelerometer,
                    foot_velocity_std=noise.foot_velocity,
                    ground_height_std=ground_std,
                    ground_height=p0[2] - est.builder.standing_height(knot) if ground_std > 0.0 else 0.0,
                    record=self.record,
                )
            else:
                self.ekf.step(knot, est.dt, knot.measured if self.settled else knot.contacts)
        return knots

    @property
    def position(self) -> np.ndarray:
        """Base position (3,) in the world frame, m."""
        return self.ekf.position
