"""An IMU + leg-kinematics Kalman filter: the localisation baseline (PRONTO-like, the MCOE paper's Fig. 5).

State (9): base position p and velocity v in the world frame, accelerometer bias b_a (IMU frame). The base
orientation is taken from the IMU's orientation (R_WB = R_WI R_BI^T), as PRONTO does with its attitude filter; with
orientation given, the filter is linear in this state (a Kalman filter with a time-varying model).

Per grid knot k (dt, the estimator's resampled sensors and *its* detected contact flags):
- predict with the accelerometer: a = R_WI (f - b_a) + g, p += v dt + ½ a dt², v += a dt, b_a random walk;
  process noise from the accelerometer standard deviation (lever arm of the IMU: ω × (ω × r) is compensated, the
  angular-acceleration term is neglected);
- update with each stance foot's kinematic base velocity: the foot is still, so
  v = −R_WB (J_f(q_j) dq_j + ω_B × p_f(q_j)) (leg forward kinematics in the base frame), R = foot_velocity_std² I.

Noise levels default to the estimator's configuration (``noise.accelerometer``, ``noise.foot_velocity``) so both
estimators use the same covariances, as in the paper's comparison.

With ``record=True`` the filter keeps each step's transition, prior and posterior, and :func:`fixed_lag_smooth` turns
them into the Rauch–Tung–Striebel smoother's estimates with a fixed lag (the smoothed counterpart of the filter, to
compare with the optimal estimator's window, which is a fixed-lag smoother itself).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.imu import base_motion, imu_mount
from mcoe_ros.multibody.robot import RobotModel


class LegKinematics:
    """The base velocity that each stance foot implies, from one IMU sample and the leg encoders (a foot at rest):
    v = −R_WB (J_f(q_j) dq_j + ω_B × p_f(q_j)), world frame, m/s."""

    def __init__(self, robot: RobotModel):
        self.robot = robot
        self.data = robot.create_data()
        self.mount = imu_mount(robot)
        self.q_base = robot.neutral()  # base at the identity: FK gives the feet in the base frame

    def base_velocities(self, quat_wxyz, gyro, q_j, dq_j, contacts) -> list[np.ndarray]:
        """World-frame base velocity (3,) implied by each foot flagged in ``contacts`` (nfeet,), model foot order."""
        robot, data = self.robot, self.data
        base = base_motion(self.mount, quat_wxyz, gyro)
        r_wb, omega_b = base.rotation, base.omega
        q = self.q_base.copy()
        q[7:] = q_j
        v = np.zeros(robot.nv)
        v[6:] = dq_j
        pin.forwardKinematics(robot.model, data, q, v)
        pin.updateFramePlacements(robot.model, data)
        out = []
        for fid, c in zip(robot.foot_frame_ids, contacts, strict=True):
            if not c:
                continue
            p_f = data.oMf[fid].translation
            v_f = pin.getFrameVelocity(robot.model, data, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED).linear
            out.append(-r_wb @ (v_f + np.cross(omega_b, p_f)))
        return out


class LegKinematicsEkf:
    """State (p, v, b_a) (9,) and covariance P (9, 9); see the module docstring."""

    def __init__(
        self,
        robot: RobotModel,
        p0: np.ndarray,
        v0: np.ndarray | None = None,
        accel_std: float = 0.3,
        foot_velocity_std: float = 0.02,
        bias_walk_std: float = 1e-3,
        p0_std: float = 1e-3,
        v0_std: float = 0.1,
        bias0_std: float = 0.05,
        ground_height_std: float = 0.0,
        ground_height: float = 0.0,
        record: bool = False,
    ):
        self.robot = robot
        self.legs = LegKinematics(robot)
        self.data = self.legs.data
        self.x = np.zeros(9)
        self.x[0:3] = p0
        if v0 is not None:
            self.x[3:6] = v0
        self.P = np.diag(np.r_[np.full(3, p0_std**2), np.full(3, v0_std**2), np.full(3, bias0_std**2)])
        self.accel_var = accel_std**2
        self.bias_var = bias_walk_std**2
        self.foot_var = foot_velocity_std**2
        self.ground_var = ground_height_std**2  #: 0: no ground-height update
        self.ground_height = ground_height
        self.mount = self.legs.mount
        self.r_bi = self.mount[0]  #: IMU axes in the base frame
        self.q_base = self.legs.q_base
        #: with record: per step (F (9, 9), x prior (9,), P prior (9, 9)) of the predictions, and the posteriors
        #: (x (9,), P (9, 9)) after each step's updates (:meth:`close_step`); entry 0 is the initial state
        self.record = record
        self.transitions: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.posteriors: list[tuple[np.ndarray, np.ndarray]] = [(self.x.copy(), self.P.copy())] if record else []

    def predict(self, dt: float, quat_wxyz, gyro, acc) -> None:
        # specific force at the IMU (bias removed) -> world acceleration of the base origin (angular acceleration
        # not differentiated: only the centripetal lever-arm term)
        base = base_motion(self.mount, quat_wxyz, gyro, np.asarray(acc) - self.x[6:9])
        r_wb = base.rotation
        r_wi = r_wb @ self.r_bi
        a = r_wb @ base.acc
        p, v = self.x[0:3], self.x[3:6]
        self.x[0:3] = p + v * dt + 0.5 * a * dt * dt
        self.x[3:6] = v + a * dt
        f = np.eye(9)
        f[0:3, 3:6] = dt * np.eye(3)
        dadb = -r_wb @ self.r_bi
        f[0:3, 6:9] = 0.5 * dt * dt * dadb
        f[3:6, 6:9] = dt * dadb
        g = np.zeros((9, 3))
        g[0:3] = 0.5 * dt * dt * r_wi
        g[3:6] = dt * r_wi
        q = g @ (self.accel_var * np.eye(3)) @ g.T
        q[6:9, 6:9] += self.bias_var * dt * np.eye(3)
        self.P = f @ self.P @ f.T + q
        if self.record:
            self.transitions.append((f, self.x.copy(), self.P.copy()))

    def close_step(self) -> None:
        """With ``record``: store the posterior after this step's updates (call once per :meth:`predict`)."""
        if self.record:
            self.posteriors.append((self.x.copy(), self.P.copy()))

    def foot_velocities(self, quat_wxyz, gyro, q_j, dq_j, contacts) -> list[np.ndarray]:
        """World-frame base velocity implied by each stance foot (:meth:`LegKinematics.base_velocities`)."""
        return self.legs.base_velocities(quat_wxyz, gyro, q_j, dq_j, contacts)

    def update(self, quat_wxyz, gyro, q_j, dq_j, contacts) -> None:
        for vm in self.foot_velocities(quat_wxyz, gyro, q_j, dq_j, contacts):
            h = np.zeros((3, 9))
            h[:, 3:6] = np.eye(3)
            s = h @ self.P @ h.T + self.foot_var * np.eye(3)
            k = np.linalg.solve(s, h @ self.P).T
            self.x = self.x + k @ (vm - self.x[3:6])
            self.P = (np.eye(9) - k @ h) @ self.P
            self.P = 0.5 * (self.P + self.P.T)

    def update_ground_height(self, quat_wxyz, q_j, contacts) -> None:
        """Flat-ground update (with ``ground_height_std`` > 0): each stance foot's frame is at z = ``ground_height``,
        z_f = p_z + (R_WB p_f(q_j))_z, variance ``ground_height_std``²."""
        if self.ground_var <= 0.0 or not any(contacts):
            return
        robot, data = self.robot, self.data
        r_wb = base_motion(self.mount, quat_wxyz, np.zeros(3)).rotation
        q = self.q_base.copy()
        q[7:] = q_j
        pin.framesForwardKinematics(robot.model, data, q)
        h = np.zeros((1, 9))
        h[0, 2] = 1.0
        for fid, c in zip(robot.foot_frame_ids, contacts, strict=True):
            if not c:
                continue
            z = self.x[2] + (r_wb @ data.oMf[fid].translation)[2]
            s = h @ self.P @ h.T + self.ground_var
            k = (self.P @ h.T) / s
            self.x = self.x + (k * (self.ground_height - z))[:, 0]
            self.P = (np.eye(9) - k @ h) @ self.P
            self.P = 0.5 * (self.P + self.P.T)

    def step(self, knot, dt: float, still=None) -> None:
        """Predict over dt with a grid knot's IMU sample (:class:`mcoe_ros.estimation.window.GridKnot`), then the
        zero-velocity update on the feet ``still`` (nfeet,) (None: its detected stance feet) and the ground update on
        its detected stance feet. The IMU is the sensor's (``raw_gyro``, ``raw_acc``): a baseline does not get the
        estimator's tracked biases."""
        self.predict(dt, knot.imu.raw_quat, knot.imu.raw_gyro, knot.imu.raw_acc)
        feet = knot.contacts if still is None else still
        self.update(knot.imu.raw_quat, knot.imu.raw_gyro, knot.joint.q, knot.joint.dq, feet)
        self.update_ground_height(knot.imu.raw_quat, knot.joint.q, knot.contacts)
        self.close_step()

    @property
    def position(self) -> np.ndarray:
        return self.x[0:3].copy()

    def smoothed(self, lag: int) -> np.ndarray:
        """With ``record``: the fixed-lag smoothed states (n, 9) of the recorded steps (:func:`fixed_lag_smooth`)."""
        if not self.record:
            raise ValueError("smoothing needs a filter created with record=True")
        return fixed_lag_smooth(self.transitions, self.posteriors, lag)


def fixed_lag_smooth(
    transitions: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    posteriors: list[tuple[np.ndarray, np.ndarray]],
    lag: int,
) -> np.ndarray:
    """Rauch–Tung–Striebel estimates with a fixed lag: row k (n, nx) is the mean of state k given the data of steps
    0 … min(k + lag, n − 1) (lag 0: the filter's posteriors; lag ≥ n − 1: the full smoother).

    transitions: n − 1 of (F_k (nx, nx), x⁻_k, P⁻_k), the prediction from step k − 1 to step k (k = 1 … n − 1);
    posteriors: n of (x_k, P_k) after step k's updates. Linear-Gaussian model with the recorded F: the gains
    G_k = P_k F_{k+1}ᵀ (P⁻_{k+1})⁻¹ do not depend on the lag, x^s_k = x_k + G_k (x^s_{k+1} − x⁻_{k+1})."""
    n = len(posteriors)
    if len(transitions) != n - 1 or lag < 0:
        raise ValueError("need n - 1 transitions for n posteriors and lag >= 0")
    x = np.array([p[0] for p in posteriors])
    if n < 2 or lag == 0:
        return x
    x_prior = np.array([t[1] for t in transitions])  # row k - 1: step k's prior
    gains = np.array(
        [
            np.linalg.solve(transitions[k][2], transitions[k][0] @ posteriors[k][1]).T
            for k in range(n - 1)  # G_k = P_k F_{k+1}^T (P-_{k+1})^-1, P- symmetric
        ]
    )
    ends = np.minimum(np.arange(n) + lag, n - 1)  # the newest step each row sees
    out = x[ends].copy()
    for back in range(lag - 1, -1, -1):  # rows whose step k + back is still before their end move one step back
        k = np.arange(n) + back
        rows = np.nonzero(k < ends)[0]
        k = k[rows]
        out[rows] = x[k] + np.einsum("kij,kj->ki", gains[k], out[rows] - x_prior[k])
    return out
