"""Go1 payload regression: the payload's 10 inertial parameters are linear in the base rows of the dynamics.

Derivation (Pinocchio conventions: free-flyer velocity v = [v_lin, w, dq] with the base twist in the LOCAL frame of
the root joint, i.e. the trunk frame B; forces f_i on the robot from the ground, world axes, at foot frame F_i):

  M(q) a + h(q, v) = S^T tau + sum_i J_i(q)^T f_i,   J_i = d(p_{F_i})/dv, LOCAL_WORLD_ALIGNED, (3, nv).

M and h are linear in the inertias of all bodies. The payload is a rigid body fixed to the trunk
(``robot.payload_joint``), so the trunk's parameters are nominal + A pi_p (A = ``robot.payload_to_joint``) and

  rnea(q, v, a; nominal + payload) = rnea(q, v, a; nominal) + Y_payload(q, v, a) pi_p,
  Y_payload = Y[:, trunk block] A,  Y = computeJointTorqueRegressor (nv, 10 n_bodies).

Leg rows (3 per leg, after the 6 base rows): the trunk is not in a leg's subtree, so Y_payload is zero there and the
stance forces follow from the joint torques exactly as in :class:`mcoe_ros.multibody.contact.ContactDetector`
(f_i = J_leg^-T (rnea_leg - tau_leg)).
Base rows (the first 6, S^T tau has none): wrench in B about the trunk origin, force first,

  Gamma pi_p = y,  Gamma = Y_payload[:6] (6, 10),  y = sum_{i in stance} J_i[:, :6]^T f_i - rnea(q, v, a; nominal)[:6],

in N (rows 0:3) and N m (rows 3:6). Swing feet carry zero force (the stance set is an input).
Equivalently Gamma = body_wrench_regressor(w, dw, a_O - R_WB^T g) (:mod:`mcoe_ros.multibody.body_wrench`), checked
in the tests; the Pinocchio regressor is used because it also covers a payload on a non-root body.

Full state from sensors (:func:`states_from_sensors`). The IMU (frame ``robot.imu_frame_id``, rigid on the trunk at
rotation R_BI, position r in B) reports its orientation R_WI (quaternion w, x, y, z), gyro w_I and specific force s_I:

  R_WB = R_WI R_BI^T,  w = R_BI w_I,  a_O = R_BI s_I + R_WB^T g - dw x r - w x (w x r)   (classical, axes B),

dw and the joint accelerations come from Savitzky-Golay differentiation of w and dq (window in seconds).

Base linear velocity is not needed: every material point's classical acceleration is a_O plus terms in (w, dw, dq,
ddq) and the configuration -- adding a uniform velocity to the whole robot (Galilean boost) changes no force. In
Pinocchio's spatial convention the base acceleration is a[:3] = a_O - w x v_lin, so (v_lin = 0, a[:3] = a_O) gives
exactly the same rnea, regressor and contact forces as the true (v_lin, a_O - w x v_lin): the base-velocity Coriolis
terms do cancel (checked to 1e-9 in test/test_payload_regression.py). This requires the *classical* base acceleration,
which is what the accelerometer measures; a spatial-acceleration input with v_lin = 0 would not be exact.
The base position never matters (translation invariance with uniform gravity).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.contact import ContactDetector
from mcoe_ros.multibody.imu import states_from_imu
from mcoe_ros.multibody.robot import RobotModel

_LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED


# ----------------------------------------------------------------------------------------------------------------------
# Savitzky-Golay differentiation
# ----------------------------------------------------------------------------------------------------------------------


def sg_window_samples(window: float, dt: float, polyorder: int) -> int:
    """Odd SG window length (samples) closest to ``window`` s at sample period dt (s); odd and > polyorder."""
    n = int(round(window / dt))
    n += 1 - n % 2
    minimum = polyorder + 1 + polyorder % 2  # odd and > polyorder
    return max(n, minimum)


def sg_filter(x: np.ndarray, dt: float, window: float, polyorder: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """(smoothed x, dx/dt) along axis 0 of x (N, ...) sampled uniformly at dt (s), SG window in seconds."""
    n = sg_window_samples(window, dt, polyorder)
    x = np.asarray(x, dtype=float)
    if x.shape[0] < n:
        raise ValueError(f"need at least {n} samples for a {window} s SG window, got {x.shape[0]}")
    from scipy.signal import savgol_filter  # lazy: scipy.signal costs ~0.7 s of start-up

    smooth = savgol_filter(x, n, polyorder, deriv=0, axis=0, mode="interp")
    deriv = savgol_filter(x, n, polyorder, deriv=1, delta=dt, axis=0, mode="interp")
    return smooth, deriv


# ----------------------------------------------------------------------------------------------------------------------
# Full state from sensors
# ----------------------------------------------------------------------------------------------------------------------


@dataclass
class SensorSeries:
    """Time series of proprioception, N samples, uniform rate; joint arrays in the model's joint order.

    t (N,) s; q, dq, tau (N, nj) rad, rad/s, N m; quat (N, 4) w, x, y, z of the IMU frame in the world; gyro (N, 3)
    rad/s and acc (N, 3) specific force m/s^2, both in the IMU frame; contacts (N, nfeet) bool, model foot order.
    """

    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    quat: np.ndarray
    gyro: np.ndarray
    acc: np.ndarray
    contacts: np.ndarray

    def __len__(self) -> int:
        return int(np.asarray(self.t).shape[0])

    def imu(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(quat wxyz, gyro, acc) of sample k."""
        return self.quat[k], self.gyro[k], self.acc[k]

    @property
    def dt(self) -> float:
        """Median sample period, s."""
        return float(np.median(np.diff(self.t)))


def states_from_sensors(
    robot: RobotModel,
    series: SensorSeries,
    window: float = 0.01,
    polyorder: int = 2,
    smooth: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(q (N, nq), v (N, nv), a (N, nv), tau (N, nj)) from sensor series with SG-differentiated dw and ddq.

    window: SG window, s (the paper's LS[100ms] / LS[10ms]); polyorder: SG polynomial order. smooth: also replace
    q, dq, tau, gyro, acc and the quaternion (component-wise, renormalised) by their SG-smoothed values, so every
    column of the regression sees the same filter. Zero base linear velocity (exact, see module docstring).
    """
    dt = series.dt
    qj, dqj = np.asarray(series.q, float), np.asarray(series.dq, float)
    tau, gyro, acc = np.asarray(series.tau, float), np.asarray(series.gyro, float), np.asarray(series.acc, float)
    quat = np.array(series.quat, dtype=float)
    flip = np.concatenate([[False], np.cumsum(np.sum(quat[1:] * quat[:-1], axis=1) < 0) % 2 == 1])
    quat[flip] *= -1.0  # continuous hemisphere before filtering
    dq_s, ddqj = sg_filter(dqj, dt, window, polyorder)
    gyro_s, domega = sg_filter(gyro, dt, window, polyorder)
    if smooth:
        qj, dqj, gyro = sg_filter(qj, dt, window, polyorder)[0], dq_s, gyro_s
        tau, acc = sg_filter(tau, dt, window, polyorder)[0], sg_filter(acc, dt, window, polyorder)[0]
        quat = sg_filter(quat, dt, window, polyorder)[0]
    q, v, a = states_from_imu(robot, qj, dqj, ddqj, quat, gyro, domega, acc)
    return q, v, a, tau


# ----------------------------------------------------------------------------------------------------------------------
# Regression
# ----------------------------------------------------------------------------------------------------------------------


class PayloadRegressor:
    """Gamma (6, 10), y (6,) with Gamma @ pi_p = y from one full state, joint torques and the stance set.

    pi_p is the payload's parameter vector (:mod:`mcoe_ros.multibody.inertia` convention, ``robot.payload_frame``
    frame). The nominal robot is ``robot`` without payload (``robot.nominal_inertias``), whatever payload ``robot``
    carries.
    """

    def __init__(self, robot: RobotModel):
        self.robot = robot
        self.model = pin.Model(robot.model)
        self.model.inertias[robot.payload_joint] = robot.nominal_inertias[robot.payload_joint].copy()
        self.data = self.model.createData()
        self._detector = ContactDetector(robot)
        j = robot.payload_joint - 1
        self._cols = slice(10 * j, 10 * j + 10)
        self.nb = robot.nu_base
        if self.nb != 6:
            raise ValueError("payload regression needs a floating base")

    def contact_forces(self, q: np.ndarray, v: np.ndarray, a: np.ndarray, tau_joints: np.ndarray) -> np.ndarray:
        """Leg-row force estimate (nfeet, 3), world axes, N, for every foot (swing feet included)."""
        return self._detector.forces_from_state(q, v, a, tau_joints).copy()

    def regress(
        self,
        q: np.ndarray,
        v: np.ndarray,
        a: np.ndarray,
        tau_joints: np.ndarray,
        contacts: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(Gamma (6, 10), y (6,)): base rows (B frame, force then moment about the trunk origin), N and N m.

        q (nq,), v (nv,), a (nv,) full state; tau_joints (nj,) N m; contacts (nfeet,) bool stance flags (model
        foot order) -- swing feet carry zero force.
        """
        model, data = self.model, self.data
        forces = self.contact_forces(q, v, a, tau_joints)
        y = -pin.rnea(model, data, q, v, a)[: self.nb]
        pin.computeJointJacobians(model, data, q)
        for i, fid in enumerate(self.robot.foot_frame_ids):
            if contacts[i]:
                jac = pin.getFrameJacobian(model, data, fid, _LWA)[:3, : self.nb]
                y += jac.T @ forces[i]
        reg = pin.computeJointTorqueRegressor(model, data, q, v, a)
        gamma = reg[: self.nb, self._cols] @ self.robot.payload_to_joint
        return gamma, y

    def regress_series(
        self,
        q: np.ndarray,
        v: np.ndarray,
        a: np.ndarray,
        tau_joints: np.ndarray,
        contacts: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Stacked (Gamma (N, 6, 10), y (N, 6)) for N samples (arrays with a leading N axis)."""
        n = q.shape[0]
        gammas, ys = np.empty((n, 6, 10)), np.empty((n, 6))
        for k in range(n):
            gammas[k], ys[k] = self.regress(q[k], v[k], a[k], tau_joints[k], contacts[k])
        return gammas, ys


def steady_contact_mask(contacts: np.ndarray, guard: int) -> np.ndarray:
    """(N,) bool: True where the stance set (contacts (N, nfeet) bool) does not change within +-guard samples.

    Samples near touch-down/lift-off carry impact accelerations that a smoothing filter smears and force estimates
    at the soft-contact threshold; excluding them reduces the bias of the regression (see the benchmark).
    """
    contacts = np.asarray(contacts, dtype=bool)
    change = np.zeros(contacts.shape[0], dtype=bool)
    change[1:] = np.any(contacts[1:] != contacts[:-1], axis=1)
    change[:-1] |= change[1:]  # both samples around a switch
    if guard <= 0:
        return ~change
    return np.convolve(change.astype(float), np.ones(2 * guard + 1), mode="same") == 0
