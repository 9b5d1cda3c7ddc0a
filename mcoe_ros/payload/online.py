"""Online RLS-logdet payload estimator on the estimator grid (runs beside the optimal estimator).

Each grid knot (resampled joints + IMU + detected contacts, :class:`mcoe_ros.estimation.window.GridKnot`) enters a short
buffer of ``window`` seconds; the buffer's centre sample gets Savitzky-Golay smoothed signals and derivatives
(angular acceleration from the gyro, joint accelerations from the joint velocities), becomes a full state
(:func:`mcoe_ros.multibody.imu.states_from_imu`: zero base linear velocity is exact) and a payload wrench
regression ``Gamma pi_p = y`` (:class:`mcoe_ros.payload.regression.PayloadRegressor`), which updates an
:class:`mcoe_ros.payload.rls.RlsLogdet` (physically consistent at every step). Samples whose buffer spans a
contact change are skipped (impacts and the contact threshold bias the regression). Latency: window / 2.
Memory and cost per knot are constant (O(1) in the data length).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from mcoe_ros.multibody.imu import states_from_imu
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.payload.batch import DEFAULT_ALPHA, default_prior
from mcoe_ros.payload.regression import PayloadRegressor, sg_window_samples
from mcoe_ros.payload.rls import RlsLogdet


class OnlinePayloadRls:
    """Payload parameters pi_p (10,) from the grid-knot stream (see module docstring).

    ``offset`` (10,): estimate the body ``offset + pi_p`` as a whole (physically consistent, log-det prior at
    ``offset + prior``) and report pi_p = body - offset, which may then have a negative mass (the 'combined' body of
    the estimator: offset = the URDF trunk). None: pi_p itself is the consistent body."""

    def __init__(
        self,
        robot: RobotModel,
        dt: float,
        window: float = 0.01,
        polyorder: int = 2,
        alpha: float = DEFAULT_ALPHA,
        mu: float = 1.0,
        prior: np.ndarray | None = None,
        min_updates: int = 50,
        offset: np.ndarray | None = None,
    ):
        self.robot = robot
        self.regressor = PayloadRegressor(robot)
        self.n = sg_window_samples(window, dt, polyorder)
        from scipy.signal import savgol_coeffs  # lazy: scipy.signal costs ~0.7 s of start-up

        self.smooth = savgol_coeffs(self.n, polyorder, deriv=0, use="dot")
        self.deriv = savgol_coeffs(self.n, polyorder, deriv=1, delta=dt, use="dot")
        self.offset = np.zeros(10) if offset is None else np.asarray(offset, dtype=float)
        self.prior = (default_prior() if prior is None else np.asarray(prior, dtype=float)) + self.offset
        self.rls = RlsLogdet(self.prior, n_bodies=1, alpha=alpha, mu=mu, max_iter=3)
        self.min_updates = min_updates
        self.buffer: deque = deque(maxlen=self.n)
        self.updates = 0
        self.skipped = 0
        self.residual_var = 1.0  #: running mean of the squared prediction residual per row (N^2, N^2 m^2)

    def reset(self) -> None:
        self.rls.reset(self.prior)
        self.buffer.clear()
        self.updates = self.skipped = 0
        self.residual_var = 1.0

    @property
    def ready(self) -> bool:
        """Enough data for the estimate to mean something (``min_updates`` regression samples)."""
        return self.updates >= self.min_updates

    @property
    def pi(self) -> np.ndarray:
        """The payload estimate pi_p (10,) (body - offset)."""
        return self.rls.theta - self.offset

    def covariance(self) -> np.ndarray:
        """(10, 10) covariance of pi: the RLS inverse information (unit row weights) times the residual variance."""
        return self.residual_var * self.rls.covariance()

    def update(self, knot) -> bool:
        """Add one grid knot; True if a regression sample was used."""
        self.buffer.append(knot)
        if len(self.buffer) < self.n:
            return False
        knots = self.buffer
        centre = knots[self.n // 2]
        if any(k.contacts != centre.contacts for k in knots) or not any(centre.contacts):
            self.skipped += 1
            return False
        stack = lambda get: np.array([get(k) for k in knots])  # noqa: E731
        qj = self.smooth @ stack(lambda n: n.joint.q)
        dq = stack(lambda n: n.joint.dq)
        gyro = stack(lambda n: n.imu.gyro)
        q, v, a = states_from_imu(
            self.robot,
            qj[None],
            (self.smooth @ dq)[None],
            (self.deriv @ dq)[None],
            centre.imu.quat[None],
            (self.smooth @ gyro)[None],
            (self.deriv @ gyro)[None],
            (self.smooth @ stack(lambda n: n.imu.acc))[None],
        )
        tau = self.smooth @ stack(lambda n: n.joint.tau)
        gamma, y = self.regressor.regress(q[0], v[0], a[0], tau, np.asarray(centre.contacts))
        y = y + gamma @ self.offset  # Gamma (offset + pi_p) = y + Gamma offset
        res = y - gamma @ self.rls.theta  # prediction residual before the update
        self.updates += 1
        self.residual_var += (float(res @ res) / 6.0 - self.residual_var) / min(self.updates, 1000)
        self.rls.update(gamma, y)
        return True
