"""Systems and estimation windows of the paper-reproduction benchmarks (paper_table1, paper_fig3).

Systems (estimation windows generated with the estimator's own interval models, :mod:`mcoe_ros.testing.windows`):

- ``kinova``: Kinova Gen2 arm (example-robot-data, fixed base, 6 joints; reflected rotor inertia 0.02 kg m^2 per joint
  so that the explicit integrator is stable at dt = 10 ms), 0.6 kg payload on ``j2s6s200_link_6``;
  measurements: joint positions and velocities; dt 10 ms.
- ``quadrotor``: Hector quadrotor (free-flyer, one body). :class:`QuadrotorInterval` below: u = (thrust, 3 torques) as a
  body wrench, semi-implicit Euler, pi = the *whole* body's 10 parameters; measurements: position (mocap-like),
  orientation, gyro and specific force at the body origin; analytic Jacobians (checked against central
  differences, :meth:`QuadrotorInterval.calc_diff_fd`); dt 10 ms.
- ``go1``: Unitree Go1, 4 feet in contact (MultibodyIntervalModel), 3 kg payload on the trunk, default measurements
  (encoders + IMU); dt 2 ms.
- ``talos``: Talos humanoid (``talos_reduced``, 32 joints, floating base), both soles flat on the ground (four point
  contacts at the corners of each sole, added to the URDF as massless frames),
  5 kg payload on ``torso_2_link``, default measurements; dt 2 ms.

Inputs: joint torques u = contact-consistent gravity compensation at the initial posture + PD around it (gains from
each joint's diagonal mass-matrix entry: 15 rad/s, damping ratio 0.7) + smooth random sinusoids (~100 rad/s^2), known
to the estimator like the Go1 MPC torques in the paper. Measurements: exact prediction of each model plus Gaussian
noise of ``noise`` x its model standard deviation (orientation noise as a rotation).
Estimation problem: arrival prior at a noisy x_0, process-noise information ``W``; no theta prior unless asked.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.imu import rotation_quaternion
from mcoe_ros.multibody.inertia import make_parametrization, pi_from_com
from mcoe_ros.multibody.interval import MultibodyIntervalModel
from mcoe_ros.multibody.measurements import JointPosition, JointVelocity, default_measurements
from mcoe_ros.multibody.robot import RobotModel, RobotSpec, find_robot_data_file
from mcoe_ros.multibody.state import StateMultibody
from mcoe_ros.ocp import numdiff
from mcoe_ros.ocp.interval import IntervalData, IntervalModel
from mcoe_ros.ocp.problem import ArrivalPrior, EstimationProblem
from mcoe_ros.testing.windows import noisy_quat_wxyz, rollout

SYSTEMS = ("kinova", "quadrotor", "go1", "talos")


# ---------------------------------------------------------------------------------------------------- quadrotor
class QuadrotorData(IntervalData):
    def __init__(self, model: QuadrotorInterval):
        super().__init__(model)
        self.pmodel = model.pmodel.copy()
        self.pdata = self.pmodel.createData()
        self.h = np.zeros(model.nr)


class QuadrotorInterval(IntervalModel):
    """Free-flying rigid body driven by a body wrench (0, 0, thrust, tau_x, tau_y, tau_z) (see module docstring).

    x = (q, v) on the free-flyer manifold, pi = body parameters (joint frame), u (4,), z = [p (3), quat wxyz (4),
    gyro (3), specific force (3)], r (12,) = W (z ⊖ h). Semi-implicit Euler v' = v + dt a, q' = q ⊕ dt v'.
    """

    def __init__(self, dt: float = 0.01, std=(0.01, 0.01, 0.01, 0.1), eps: float = 1e-6):
        self.pmodel = pin.buildModelFromUrdf(
            find_robot_data_file("hector_description/robots/quadrotor_base.urdf"), pin.JointModelFreeFlyer()
        )
        self.state = StateMultibody(self.pmodel)
        self.npi, self.nu, self.nz, self.nr = 10, 4, 13, 12
        self.dt, self.eps = dt, eps
        self.w = np.repeat(1.0 / np.asarray(std, dtype=float), 3)

    def create_data(self) -> QuadrotorData:
        return QuadrotorData(self)

    def predict(self, d: QuadrotorData, x: np.ndarray, pi: np.ndarray):
        """(xnext, position, rotation, gyro, specific force) at (x, pi) with input d.u."""
        m, pd = d.pmodel, d.pdata
        m.inertias[1] = pin.Inertia.FromDynamicParameters(pi)
        q, v = x[:7], x[7:]
        tau = np.r_[0.0, 0.0, d.u[0], d.u[1:4]]
        a = pin.aba(m, pd, q, v, tau)
        v1 = v + self.dt * a
        xnext = np.concatenate([pin.integrate(m, q, self.dt * v1), v1])
        rot = pin.Quaternion(q[3:7]).toRotationMatrix()
        spec = a[:3] + np.cross(v[3:6], v[:3]) - rot.T @ m.gravity.linear
        return xnext, q[:3], rot, v[3:6], spec

    def _eval(self, d: QuadrotorData, x: np.ndarray, pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(xnext, whitened residual) at (x, pi)."""
        xnext, pos, rot, gyro, spec = self.predict(d, x, pi)
        z = d.z
        r = np.empty(12)
        r[0:3] = z[0:3] - pos
        r[3:6] = pin.log3(rot.T @ pin.Quaternion(z[3], z[4], z[5], z[6]).toRotationMatrix())
        r[6:9] = z[7:10] - gyro
        r[9:12] = z[10:13] - spec
        return xnext, self.w * r

    def calc(self, data: QuadrotorData, x: np.ndarray, pi: np.ndarray) -> None:
        data.xnext[:], data.r[:] = self._eval(data, x, pi)

    def calc_diff_fd(self, data: QuadrotorData, x: np.ndarray, pi: np.ndarray) -> None:
        """Central finite-difference Jacobians (reference for :meth:`calc_diff`)."""
        st = self.state
        data.Fx[:], data.Rx[:] = numdiff.jacobian(
            lambda xx: self._eval(data, xx, pi), x, step=self.eps, state=st, output_states=[st, None]
        )
        data.Fp[:], data.Rp[:] = numdiff.jacobian(
            lambda pp: self._eval(data, x, pp), pi, step=self.eps, output_states=[st, None]
        )
        data.xnext[:], data.r[:] = self._eval(data, x, pi)

    def calc_diff(self, data: QuadrotorData, x: np.ndarray, pi: np.ndarray) -> None:
        """Analytic Jacobians (ABA derivatives, joint-torque regressor, SO(3) log Jacobian)."""
        data.xnext[:], data.r[:] = self._eval(data, x, pi)
        m, pd, dt = data.pmodel, data.pdata, self.dt
        q, v = x[:7], x[7:]
        tau = np.r_[0.0, 0.0, data.u[0], data.u[1:4]]
        pin.computeABADerivatives(m, pd, q, v, tau)
        da_dq, da_dv = pd.ddq_dq.copy(), pd.ddq_dv.copy()
        a = pd.ddq.copy()
        minv = pd.Minv.copy()
        minv = np.triu(minv) + np.triu(minv, 1).T
        da_dpi = -minv @ pin.computeJointTorqueRegressor(m, pd, q, v, a)[:, :10]
        v1 = v + dt * a
        jq = pin.dIntegrate(m, q, dt * v1, pin.ArgumentPosition.ARG0)
        jv = pin.dIntegrate(m, q, dt * v1, pin.ArgumentPosition.ARG1)
        dv1_dx = np.hstack([dt * da_dq, np.eye(6) + dt * da_dv])
        data.Fx[6:] = dv1_dx
        data.Fx[:6] = dt * jv @ dv1_dx
        data.Fx[:6, :6] += jq
        data.Fp[6:] = dt * da_dpi
        data.Fp[:6] = dt * dt * jv @ da_dpi
        rot = pin.Quaternion(q[3:7]).toRotationMatrix()
        z = data.z
        mrel = rot.T @ pin.Quaternion(z[3], z[4], z[5], z[6]).toRotationMatrix()
        dh = np.zeros((12, 12))  # d h / dx for the Euclidean parts, d r_unwhitened / dx for the orientation
        dh[0:3, 0:3] = rot
        dh[3:6, 3:6] = pin.Jlog3(mrel) @ mrel.T  # r = log3(R^T Rz): dr/dδ = -Jlog3(M) M^T, sign flipped below
        dh[6:9, 9:12] = np.eye(3)
        g_b = rot.T @ m.gravity.linear
        dh[9:12, :6] = da_dq[:3]
        dh[9:12, 3:6] -= pin.skew(g_b)
        dh[9:12, 6:12] = da_dv[:3]
        dh[9:12, 6:9] += pin.skew(v[3:6])
        dh[9:12, 9:12] -= pin.skew(v[:3])
        data.Rx[:] = -self.w[:, None] * dh
        data.Rp[:] = 0.0
        data.Rp[9:12] = -self.w[9:12, None] * da_dpi[:3]


def quadrotor_pi() -> np.ndarray:
    """True body parameters: the URDF body with its CoM moved by (1, -1, 2) cm."""
    model = QuadrotorInterval().pmodel
    inertia = model.inertias[1]
    return pi_from_com(inertia.mass, inertia.lever + np.array([0.01, -0.01, 0.02]), inertia.inertia)


# ---------------------------------------------------------------------------------------------------- multibody
def _box_pi(mass: float, com, dims, rpy=(0.2, -0.1, 0.3)) -> np.ndarray:
    a, b, c = dims
    moments = mass / 12.0 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])
    rot = pin.rpy.rpyToMatrix(*rpy)
    return pi_from_com(mass, np.asarray(com, dtype=float), rot @ np.diag(moments) @ rot.T)


def kinova_urdf() -> str:
    """The Kinova URDF with its 3 continuous joints declared revolute (±2π limits), so that q_j has one coordinate per
    joint as the encoder measurement model requires; written once to the temp directory."""
    path = os.path.join(tempfile.gettempdir(), "mcoe_paper_kinova.urdf")
    with open(find_robot_data_file("kinova_description/robots/kinova.urdf"), encoding="utf-8") as fh:
        text = fh.read().replace('type="continuous"', 'type="revolute"')
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


TALOS_CORNERS = tuple(f"{side}_sole_{c}" for side in ("left", "right") for c in ("fl", "fr", "rl", "rr"))


def talos_urdf() -> str:
    """talos_reduced with four massless corner frames per sole (±0.1 m, ±0.05 m): eight point contacts hold the
    feet flat (two point contacts could not resist a moment about the line between the feet)."""
    path = os.path.join(tempfile.gettempdir(), "mcoe_paper_talos.urdf")
    with open(find_robot_data_file("talos_data/robots/talos_reduced.urdf"), encoding="utf-8") as fh:
        text = fh.read()
    extra = []
    for name in TALOS_CORNERS:
        side, corner = name.split("_")[0], name[-2:]
        x = 0.1 if corner[0] == "f" else -0.1
        y = 0.05 if corner[1] == "l" else -0.05
        extra.append(
            f'<link name="{name}"/><joint name="{name}_joint" type="fixed"><parent link="leg_{side}_6_link"/>'
            f'<child link="{name}"/><origin rpy="0 0 0" xyz="{x} {y} -0.107"/></joint>'
        )
    text = text.replace("</robot>", "\n".join(extra) + "\n</robot>")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def make_robot(name: str) -> tuple[RobotModel, tuple[str, ...], np.ndarray]:
    """(robot, stance feet, true payload pi) of a multibody system."""
    if name == "kinova":
        spec = RobotSpec(
            urdf_path=kinova_urdf(),
            floating_base=False,
            base_frame="j2s6s200_link_base",
            imu_frame="",
            foot_frames=(),
            payload_frame="j2s6s200_link_6",
            armature=0.02,
            hw_joint_names=(),
        )
        return RobotModel(spec), (), _box_pi(0.6, (0.01, -0.02, 0.06), (0.08, 0.06, 0.1))
    if name == "go1":
        return (
            RobotModel(),
            ("FL_foot", "FR_foot", "RL_foot", "RR_foot"),
            _box_pi(3.0, (0.05, -0.02, 0.06), (0.3, 0.2, 0.1)),
        )
    if name == "talos":
        spec = RobotSpec(
            urdf_path=talos_urdf(),
            base_frame="base_link",
            imu_frame="imu_link",
            foot_frames=TALOS_CORNERS,
            payload_frame="torso_2_link",
            hw_joint_names=(),
        )
        return RobotModel(spec), TALOS_CORNERS, _box_pi(5.0, (-0.15, 0.0, 0.1), (0.2, 0.3, 0.4))
    raise ValueError(name)


def initial_state(name: str, robot: RobotModel, rng: np.random.Generator) -> np.ndarray:
    q = robot.neutral()
    v = np.zeros(robot.nv)
    if name == "kinova":
        q[:] = [0.3, 3.6, 1.5, -1.2, 2.0, 0.5]
        v[:] = 0.2 * rng.standard_normal(robot.nv)
        return np.concatenate([q, v])
    if name == "go1":
        q[2] = 0.30
        for i, jn in enumerate(robot.joint_names):
            q[7 + i] = 0.0 if "hip" in jn else (0.8 if "thigh" in jn else -1.5)
    elif name == "talos":
        q[2] = 1.02
        for i, jn in enumerate(robot.joint_names):
            if jn.startswith("leg_") and jn[-7:-6] in "346":
                q[7 + i] = {"3": -0.4, "4": 0.8, "6": -0.4}[jn[-7]]
    # base height that puts the lowest foot on z = 0
    data = robot.create_data()
    pin.framesForwardKinematics(robot.model, data, q)
    q[2] -= min(data.oMf[f].translation[2] for f in robot.foot_frame_ids)
    v[:6] = 0.02 * rng.standard_normal(6)
    return np.concatenate([q, v])


def holding_torque(robot: RobotModel, q: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """Joint torques that hold posture q statically (gravity, stance feet share the weight by least squares)."""
    model = robot.model.copy()
    model.inertias[robot.payload_joint] = robot.combined_inertia(pi)
    data = model.createData()
    g = pin.computeGeneralizedGravity(model, data, q)
    nb = robot.nu_base
    if nb == 0 or not robot.foot_frame_ids:
        return g[nb:].copy()
    pin.computeJointJacobians(model, data, q)
    pin.framesForwardKinematics(model, data, q)
    jt = np.hstack(
        [
            pin.getFrameJacobian(model, data, f, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)[:3].T
            for f in robot.foot_frame_ids
        ]
    )  # (nv, 3 nf)
    lam = np.linalg.lstsq(jt[:nb], g[:nb], rcond=None)[0]
    return (g - jt @ lam)[nb:]


# ---------------------------------------------------------------------------------------------------- windows
@dataclass
class Window:
    name: str
    problem: EstimationProblem
    xs_true: list  #: (N+1) true states
    pi_true: np.ndarray
    dt: float


DEFAULT_N = {"kinova": 100, "quadrotor": 100, "go1": 50, "talos": 30}


def make_window(
    name: str,
    param: str = "exp-eigval",
    seed: int = 0,
    n: int | None = None,
    noise: float = 1.0,
    info_x0: float = 1e4,
    info_w: float = 1e6,
    theta_prior: float | None = None,
) -> Window:
    """Estimation window of system ``name`` (see module docstring). The arrival prior mean is the true x_0 perturbed
    by N(0, info_x0^-1) (noise > 0); ``theta_prior`` (information, None = no parameter prior) at the truth."""
    rng = np.random.default_rng(seed)
    n = n or DEFAULT_N[name]
    if name == "quadrotor":
        model = QuadrotorInterval()
        st = model.state
        pi_true = quadrotor_pi()
        data = model.create_data()
        x = np.concatenate([pin.neutral(model.pmodel), 0.3 * rng.standard_normal(6)])
        x[2] = 1.0
        mg = pi_true[0] * 9.81
        amp = rng.uniform(0.05, 0.2, 4) * np.array([mg, 0.05, 0.05, 0.05])
        freq = rng.uniform(0.5, 3.0, 4)
        phase = rng.uniform(0, 2 * np.pi, 4)
        xs, us, zs = [x], [], []
        for k in range(n + 1):
            q, v = xs[k][:7], xs[k][7:]
            rot = pin.Quaternion(q[3:7]).toRotationMatrix()
            att = -0.5 * pin.log3(rot) - 0.1 * v[3:6]
            u = np.r_[mg, att] + amp * np.sin(2 * np.pi * freq * k * model.dt + phase)
            data.u[:] = u
            xnext, pos, rot_, gyro, spec = model.predict(data, xs[k], pi_true)
            quat = rotation_quaternion(rot_)
            z = np.concatenate([pos, [quat.w, quat.x, quat.y, quat.z], gyro, spec])
            if noise > 0:
                std = 1.0 / model.w
                z[0:3] += noise * std[0:3] * rng.standard_normal(3)
                z[3:7] = noisy_quat_wxyz(z[3:7], noise * std[3], rng)
                z[7:13] += noise * std[6:12] * rng.standard_normal(6)
            us.append(u)
            zs.append(z)
            if k < n:
                xs.append(xnext)
        running, terminal = [model] * n, model
    else:
        robot, feet, pi_true = make_robot(name)
        if name == "kinova":
            meas = [JointPosition(robot, std=1e-3), JointVelocity(robot, std=0.05)]
        else:
            meas = default_measurements(robot)
        model = MultibodyIntervalModel(robot, feet, DEFAULT_DT[name], meas)
        st = model.state
        x = initial_state(name, robot, rng)
        nq, nb, nj = robot.nq, robot.nu_base, robot.nj
        qj0 = x[nq - nj : nq].copy()
        u_hold = holding_torque(robot, x[:nq], pi_true)
        mjj = np.diag(pin.crba(robot.model, robot.create_data(), x[:nq]))[nb:]
        kp, kd = 15.0**2 * mjj, 2 * 0.7 * 15.0 * mjj  # 15 rad/s, damping ratio 0.7 on each joint's own inertia
        amp = 100.0 * mjj * rng.standard_normal(nj)  # ~100 rad/s^2 excitation
        freq = rng.uniform(1.0, 5.0, nj) if name == "kinova" else rng.uniform(5.0, 15.0, nj)
        phase = rng.uniform(0, 2 * np.pi, nj)

        def torques(k: int, xk: np.ndarray) -> np.ndarray:
            qj, vj = xk[nq - nj : nq], xk[nq + nb :]
            return u_hold + kp * (qj0 - qj) - kd * vj + amp * np.sin(2 * np.pi * freq * k * model.dt + phase)

        xs, us, zs = rollout(model, x, torques, pi_true, n, noise, rng)
        running, terminal = [model] * n, model
    x_bar = st.integrate(xs[0], (noise > 0) * info_x0**-0.5 * rng.standard_normal(st.ndx))
    parametrization = make_parametrization(param)
    theta_bar = parametrization.theta(pi_true)
    prior = ArrivalPrior.independent(x_bar, info_x0, st.ndx, theta_bar, theta_prior)
    prob = EstimationProblem(running, terminal, prior, [parametrization], info_w)
    for k in range(n + 1):
        prob.set_knot(k, u=us[k], z=zs[k])
    return Window(name, prob, xs, pi_true, DEFAULT_DT[name])


DEFAULT_DT = {"kinova": 0.01, "quadrotor": 0.01, "go1": 0.002, "talos": 0.002}


def traj_error(window: Window, xs) -> float:
    """ℓ∞ norm of the state error over the window (tangent space)."""
    st = window.problem.state
    return max(float(np.abs(st.difference(a, b)).max()) for a, b in zip(xs, window.xs_true, strict=True))


def traj_error_l1(window: Window, xs) -> float:
    st = window.problem.state
    return float(sum(np.abs(st.difference(a, b)).sum() for a, b in zip(xs, window.xs_true, strict=True)))


def mass_error_pct(pi: np.ndarray, pi_true: np.ndarray) -> float:
    return 100.0 * abs(pi[0] - pi_true[0]) / pi_true[0]
