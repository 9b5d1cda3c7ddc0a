"""Measurement models h(x; pi | u) of one knot, with whitened manifold residuals r = W (z ⊖ h).

W (nr, nr) is the square-root information ("whitening") matrix, W^T W = Sigma^-1, i.e. W = L^T with
L the lower Cholesky factor of the inverse covariance, so that ½‖r‖² = ½ (z ⊖ h)^T Sigma^-1 (z ⊖ h).
Pass ``std`` (scalar or (nr,) standard deviations) or ``cov`` ((nr, nr) covariance) to a model.

Each model declares ``nz`` (its slice of the knot's z vector, in list order) and ``nr`` (its residual
size). Frames: IMU quantities are expressed in the IMU frame ``robot.imu_frame_id`` (from the URDF;
LOCAL axes). Units SI (rad, rad/s, m/s, m/s^2).

Models: :class:`JointPosition` (nj), :class:`JointVelocity` (nj), :class:`ImuAngularVelocity` (3),
:class:`ImuOrientation` (z: 4 quaternion, r: 3), :class:`ImuSpecificForce` (3, uses the interval's
acceleration a = FD(x, u; pi) and therefore depends on pi), :class:`ImuLinearVelocity` (3, for a
pre-integrated IMU velocity observation).

Default set (:func:`default_measurements`): joint positions, joint velocities, gyro, orientation and
specific force -- exactly what the Go1 LowState provides at every tick (encoders + IMU). It observes
the joints directly, base attitude/angular rate through the IMU, and the accelerometer is the one
measurement whose prediction depends on the dynamics and hence on the payload (the contact
constraints do the rest). The IMU linear velocity needs an external pre-integration and is opt-in.

Reset (impulse) intervals: velocity measurements use the knot state x = (q, v^-); the specific force is
predicted at the post-impact state (q, v+, a) the dynamics integrates from, i.e. it is the
acceleration over the reset interval.

The measurement functions read the knot's shared context ``c``
(:class:`mcoe_ros.multibody.collector.IntervalCollector`): ``c.model`` (pin.Model with the payload), ``c.kin_x``
(pin.Data, kinematics at (q, v)), ``c.kin_acc`` (pin.Data at (q, v+, a); the same object as kin_x without impulse) and
``c.dyn`` (:class:`mcoe_ros.multibody.dynamics.PhaseDynamicsData` with a, da_dx, da_dpi, dvdyn_dx, dvdyn_dpi).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.collector import IntervalCollector
from mcoe_ros.multibody.robot import RobotModel

_LOCAL = pin.ReferenceFrame.LOCAL


def sqrt_information(n: int, std: float | np.ndarray | None = None, cov: np.ndarray | None = None) -> np.ndarray:
    """W (n, n) with W^T W = Sigma^-1 from standard deviations (scalar or (n,)) or a covariance (n, n)."""
    if cov is not None:
        cov = np.asarray(cov, dtype=float)
        if cov.shape != (n, n):
            raise ValueError(f"covariance must be ({n}, {n})")
        return np.linalg.cholesky(np.linalg.inv(cov)).T.copy()
    std_arr = np.broadcast_to(np.asarray(1.0 if std is None else std, dtype=float), (n,))
    if np.any(std_arr <= 0.0):
        raise ValueError("standard deviations must be > 0")
    return np.diag(1.0 / std_arr)


class MeasurementData:
    """Per-knot workspace of one measurement: views into the interval data's r, Rx, Rp and scratch buffers."""

    def __init__(self, meas: MeasurementModel, r: np.ndarray, rx: np.ndarray, rp: np.ndarray):
        self.r, self.Rx, self.Rp = r, rx, rp  #: views (nr,), (nr, ndx), (nr, npi) into the interval data
        self.h = np.zeros(meas.nr)  #: prediction (Euclidean models) or z ⊖ h (orientation)
        self.dh_dx = np.zeros((meas.nr, rx.shape[1]))  #: d(z ⊖ h)/dx for orientation, dh/dx otherwise
        self.dh_dpi = np.zeros((meas.nr, rp.shape[1]))
        self.neg_W = -meas.W


class MeasurementModel:
    """Base class. Subclasses set nz, nr, W and the flags, and implement predict / predict_diff."""

    nz: int
    nr: int
    needs_kinematics: bool = False  #: needs frame kinematics at (q, v) (c.kin_x)
    uses_acceleration: bool = False  #: needs the dynamics' acceleration (c.kin_acc, c.dyn)
    bias: slice | None = None  #: an additive sensor bias in pi (c.pi[bias], see multibody.actuator.ParameterLayout)
    W: np.ndarray

    @property
    def depends_on_pi(self) -> bool:
        """Rp != 0: the prediction depends on the parameters (dynamics or a bias)."""
        return self.uses_acceleration or self.bias is not None

    def create_data(self, r: np.ndarray, rx: np.ndarray, rp: np.ndarray) -> MeasurementData:
        return MeasurementData(self, r, rx, rp)

    def predict(self, md: MeasurementData, c: IntervalCollector, x: np.ndarray) -> None:
        """Fill md.h = h(x) (Euclidean models)."""
        raise NotImplementedError

    def predict_diff(self, md: MeasurementData, c: IntervalCollector, x: np.ndarray) -> None:
        """Fill md.h, md.dh_dx (and md.dh_dpi if depends_on_pi)."""
        raise NotImplementedError

    def calc(self, md: MeasurementData, c: IntervalCollector, x: np.ndarray, z: np.ndarray) -> None:
        """md.r = W (z - h)."""
        self.predict(md, c, x)
        np.matmul(self.W, z - md.h, out=md.r)

    def calc_diff(self, md: MeasurementData, c: IntervalCollector, x: np.ndarray, z: np.ndarray) -> None:
        """md.r, md.Rx = -W dh/dx, md.Rp = -W dh/dpi."""
        self.predict_diff(md, c, x)
        np.matmul(self.W, z - md.h, out=md.r)
        np.matmul(md.neg_W, md.dh_dx, out=md.Rx)
        if self.depends_on_pi:
            np.matmul(md.neg_W, md.dh_dpi, out=md.Rp)


class _ConstantJacobian(MeasurementModel):
    """h selects state entries: Rx = -W dh/dx is constant, computed once in create_data."""

    def create_data(self, r, rx, rp):
        md = MeasurementData(self, r, rx, rp)
        self.predict_diff(md, None, np.zeros(self.nx))
        md.rx_const = -self.W @ md.dh_dx
        return md

    def calc_diff(self, md, c, x, z):
        self.predict(md, c, x)
        np.matmul(self.W, z - md.h, out=md.r)
        md.Rx[:] = md.rx_const


class JointPosition(_ConstantJacobian):
    """Encoder positions (nj,) rad, model joint order (1-dof joints only). z: (nj,)."""

    def __init__(self, robot: RobotModel, std: float | np.ndarray | None = 1e-3, cov: np.ndarray | None = None):
        model = robot.model
        first = 2 if robot.nu_base else 1
        if any(model.joints[j].nq != 1 or model.joints[j].nv != 1 for j in range(first, model.njoints)):
            raise ValueError("JointPosition supports 1-dof actuated joints only")
        self.nz = self.nr = robot.nj
        self.iq, self.iv = model.nq - robot.nj, model.nv - robot.nj
        self.nx = model.nq + model.nv
        self.W = sqrt_information(self.nr, std, cov)

    def predict(self, md, c, x):
        md.h[:] = x[self.iq : self.iq + self.nr]

    def predict_diff(self, md, c, x):
        self.predict(md, c, x)
        md.dh_dx[:, self.iv : self.iv + self.nr] = np.eye(self.nr)


class JointVelocity(_ConstantJacobian):
    """Encoder velocities (nj,) rad/s, model joint order. z: (nj,)."""

    def __init__(self, robot: RobotModel, std: float | np.ndarray | None = 0.05, cov: np.ndarray | None = None):
        self.nz = self.nr = robot.nj
        self.nq, self.nv = robot.model.nq, robot.model.nv
        self.nx = self.nq + self.nv
        self.W = sqrt_information(self.nr, std, cov)

    def predict(self, md, c, x):
        md.h[:] = x[self.nq + self.nv - self.nr :]

    def predict_diff(self, md, c, x):
        self.predict(md, c, x)
        md.dh_dx[:, 2 * self.nv - self.nr :] = np.eye(self.nr)


class _Frame3(MeasurementModel):
    """A 3-vector measurement of a frame (default: the IMU frame); sets frame_id, nz = nr = 3, nv, W, and an optional
    additive bias read from pi (h += pi[bias], dh/dpi[:, bias] = 1)."""

    def __init__(self, robot: RobotModel, frame_id: int | None, std, cov, bias: slice | None = None):
        self.frame_id = robot.imu_frame_id if frame_id is None else int(frame_id)
        if self.frame_id < 0:
            raise ValueError("no IMU frame in the robot model")
        self.nz = self.nr = 3
        self.nv = robot.model.nv
        self.W = sqrt_information(3, std, cov)
        if bias is not None and bias.stop - bias.start != 3:
            raise ValueError("a frame measurement bias has 3 entries")
        self.bias = bias

    def _add_bias(self, md: MeasurementData, c: IntervalCollector, diff: bool) -> None:
        if self.bias is None:
            return
        md.h += c.pi[self.bias]
        if diff:
            md.dh_dpi[:, self.bias] = np.eye(3)


class _FrameVelocity(_Frame3):
    """Linear (rows 0:3) or angular (rows 3:6) LOCAL velocity of a frame at (q, v)."""

    needs_kinematics = True
    rows: slice

    def predict(self, md, c, x):
        md.h[:] = pin.getFrameVelocity(c.model, c.kin_x, self.frame_id, _LOCAL).vector[self.rows]
        self._add_bias(md, c, diff=False)

    def predict_diff(self, md, c, x):
        md.h[:] = pin.getFrameVelocity(c.model, c.kin_x, self.frame_id, _LOCAL).vector[self.rows]
        self._add_bias(md, c, diff=True)
        v_dq, v_dv = pin.getFrameVelocityDerivatives(c.model, c.kin_x, self.frame_id, _LOCAL)
        md.dh_dx[:, : self.nv] = v_dq[self.rows]
        md.dh_dx[:, self.nv :] = v_dv[self.rows]


class ImuAngularVelocity(_FrameVelocity):
    """Gyroscope: angular velocity of the IMU frame in the IMU frame, rad/s, plus the gyro bias when ``bias`` is the
    slice of pi that holds it. z: (3,)."""

    rows = slice(3, 6)

    def __init__(self, robot: RobotModel, std=0.01, cov=None, frame_id: int | None = None, bias: slice | None = None):
        super().__init__(robot, frame_id, std, cov, bias)


class ImuLinearVelocity(_FrameVelocity):
    """Linear velocity of the IMU frame origin in the IMU frame, m/s (pre-integrated IMU). z: (3,)."""

    rows = slice(0, 3)

    def __init__(self, robot: RobotModel, std=0.05, cov=None, frame_id: int | None = None):
        super().__init__(robot, frame_id, std, cov)


class ContactVelocity(_FrameVelocity):
    """Zero-velocity pseudo-measurement of a stance foot: linear velocity of the foot frame, LOCAL axes, m/s.

    z: (3,), normally zeros (a foot in contact does not move: leg odometry). Use it on feet that are in
    contact at the knot's state (not on feet landing in the interval's impulse: their pre-impact velocity is
    not zero). With ``point_index`` k (rolling feet): the velocity of the foot's contact point p_k (foot-frame
    coordinates, the dynamics' input, ``c.dyn.points[k]``) instead of the frame origin, v_L + ω_L × p_k.
    """

    rows = slice(0, 3)

    def __init__(self, robot: RobotModel, frame_id: int, std=0.02, cov=None, point_index: int | None = None):
        super().__init__(robot, frame_id, std, cov)
        self.point_index = point_index  #: the foot whose input contact point is measured (None: the frame origin)

    def predict(self, md, c, x):
        if self.point_index is None:
            super().predict(md, c, x)
            return
        vel = pin.getFrameVelocity(c.model, c.kin_x, self.frame_id, _LOCAL)
        md.h[:] = vel.linear + np.cross(vel.angular, c.dyn.points[self.point_index])

    def predict_diff(self, md, c, x):
        if self.point_index is None:
            super().predict_diff(md, c, x)
            return
        point = c.dyn.points[self.point_index]
        vel = pin.getFrameVelocity(c.model, c.kin_x, self.frame_id, _LOCAL)
        md.h[:] = vel.linear + np.cross(vel.angular, point)
        v_dq, v_dv = pin.getFrameVelocityDerivatives(c.model, c.kin_x, self.frame_id, _LOCAL)
        cross = pin.skew(point)  # d(ω × p) = -p × dω
        md.dh_dx[:, : self.nv] = v_dq[:3] - cross @ v_dq[3:]
        md.dh_dx[:, self.nv :] = v_dv[:3] - cross @ v_dv[3:]


class BaseHeight(MeasurementModel):
    """Leg-odometry height of the base: the base origin's world height p_z (m), measured as the height at which a
    settled stance foot (``frame_id``) lies on the flat ground. z: (1,) = ground height - the foot's height below the
    base origin from the knot's encoders and IMU orientation (a knot input,
    :meth:`mcoe_ros.estimation.builder.ProblemBuilder.knot_inputs`), so only the base height moves it: the IMU and
    encoders are not bent to level the feet (as the arrival's ground term,
    :meth:`mcoe_ros.estimation.builder.ProblemBuilder.with_ground_height`; a measurement of the foot's own height would
    tilt the base and bend the joints: the sways' CoM, docs/localisation.md session 21). dh/dq = (R_WB[2], 0, 0) on
    the base's local translation and rotation."""

    def __init__(self, robot: RobotModel, frame_id: int, std: float = 0.01):
        self.frame_id = int(frame_id)  #: the stance foot whose kinematics give z
        self.nz = self.nr = 1
        self.W = sqrt_information(1, std)

    def predict(self, md, c, x):
        md.h[0] = x[2]

    def predict_diff(self, md, c, x):
        md.h[0] = x[2]
        quat = pin.Quaternion(x[6], x[3], x[4], x[5])
        quat.normalize()
        md.dh_dx[0, :3] = quat.toRotationMatrix()[2]


class ImuOrientation(MeasurementModel):
    """Orientation of the IMU frame in the world, R = oMf.rotation. z: (4,) unit quaternion.

    ``quat_order`` 'wxyz' (default; Unitree LowState imu.quaternion) or 'xyzw' (Pinocchio/ROS msgs).
    Residual r = W log3(R^T R_meas) (3,) rad = z ⊖ h expressed in the predicted IMU frame (same ⊖ as
    :mod:`mcoe_ros.multibody.state`). Yaw from an IMU filter drifts: inflate its std (e.g. std=(0.01, 0.01, 1.0)).
    """

    needs_kinematics = True

    def __init__(self, robot: RobotModel, std=0.01, cov=None, frame_id: int | None = None, quat_order: str = "wxyz"):
        if quat_order not in ("wxyz", "xyzw"):
            raise ValueError("quat_order must be 'wxyz' or 'xyzw'")
        self.frame_id = robot.imu_frame_id if frame_id is None else int(frame_id)
        if self.frame_id < 0:
            raise ValueError("no IMU frame in the robot model")
        self.quat_order = quat_order
        self.nz, self.nr = 4, 3
        self.nv = robot.model.nv
        self.W = sqrt_information(3, std, cov)

    def measured_rotation(self, z: np.ndarray) -> np.ndarray:
        w, x, y, zz = z if self.quat_order == "wxyz" else (z[3], z[0], z[1], z[2])
        quat = pin.Quaternion(float(w), float(x), float(y), float(zz))
        quat.normalize()
        return quat.toRotationMatrix()

    def _error(self, c, z):
        rot = c.kin_x.oMf[self.frame_id].rotation
        err = rot.T @ self.measured_rotation(z)
        return err, pin.log3(err)

    def calc(self, md, c, x, z):
        _, e = self._error(c, z)
        np.matmul(self.W, e, out=md.r)

    def calc_diff(self, md, c, x, z):
        err, e = self._error(c, z)
        np.matmul(self.W, e, out=md.r)
        # R(q ⊕ dq) = R Exp(J dq): log(Exp(-d) E) = log(E Exp(-E^T d)) ≈ e - Jlog3(E) E^T d
        jac = pin.getFrameJacobian(c.model, c.kin_x, self.frame_id, _LOCAL)[3:]
        md.dh_dx[:, : self.nv] = -pin.Jlog3(err) @ err.T @ jac
        np.matmul(self.W, md.dh_dx, out=md.Rx)


class ImuSpecificForce(_Frame3):
    """Accelerometer: specific force of the IMU frame in the IMU frame, m/s^2, plus the accelerometer bias when
    ``bias`` is the slice of pi that holds it. z: (3,).

    f = R^T (p_ddot - g) = a_classical_LOCAL - R^T g, with a = FD(x, u; pi) of the interval's dynamics
    (so Rp != 0); classical = spatial linear + omega x v_linear. Derivatives chain the frame
    acceleration derivatives with the dynamics' da_dx, da_dpi, dvdyn_dx, dvdyn_dpi.

    ``realised``: the accelerometer measures the interval's realised acceleration a + n_v/dt (n_v the process noise
    on the velocities, m/s per interval), not the model's a alone: calc_diff also fills ``md.dh_da`` (3, nv) = ∂f/∂a,
    from which the interval model sets its noise coupling Rw (:mod:`mcoe_ros.ocp.interval`). For a frame on the
    floating base ∂f/∂a is the constant motion transform of the base acceleration to the IMU.
    """

    needs_kinematics = True
    uses_acceleration = True

    def __init__(
        self,
        robot: RobotModel,
        std=0.1,
        cov=None,
        frame_id: int | None = None,
        bias: slice | None = None,
        realised: bool = False,
    ):
        super().__init__(robot, frame_id, std, cov, bias)
        self.realised = bool(realised)
        if self.realised and robot.model.frames[self.frame_id].parentJoint != 1:
            raise ValueError("a realised-acceleration accelerometer must be on the floating base")

    def predict(self, md, c, x):
        kin = c.kin_acc
        rot = kin.oMf[self.frame_id].rotation
        acc = pin.getFrameClassicalAcceleration(c.model, kin, self.frame_id, _LOCAL).linear
        md.h[:] = acc - rot.T @ c.model.gravity.linear
        self._add_bias(md, c, diff=False)

    def create_data(self, r, rx, rp):
        md = MeasurementData(self, r, rx, rp)
        md.cross = np.zeros((3, 6))  #: [[w]x, -[v]x]: d(w x v) = cross @ d(v, w)
        md.dh_da = np.zeros((3, self.nv))  #: ∂f/∂a (realised only)
        return md

    def predict_diff(self, md, c, x):
        model, kin, nv, fid, dyn = c.model, c.kin_acc, self.nv, self.frame_id, c.dyn
        vel = pin.getFrameVelocity(model, kin, fid, _LOCAL).vector
        cross = md.cross
        cross[:, :3] = pin.skew(vel[3:])
        cross[:, 3:] = pin.skew(-vel[:3])
        gb = kin.oMf[fid].rotation.T @ model.gravity.linear
        md.h[:] = pin.getFrameAcceleration(model, kin, fid, _LOCAL).linear + cross[:, :3] @ vel[:3] - gb
        v_dq, a_dq, a_dv, a_da = pin.getFrameAccelerationDerivatives(model, kin, fid, _LOCAL)
        # d(w x v) = w x dv - v x dw; d(-R^T g)/dq = -[R^T g]x J_ang
        df_dq = a_dq[:3] + cross @ v_dq - pin.skew(gb) @ a_da[3:]
        df_dvd = a_dv[:3] + cross @ a_da
        if self.realised:
            md.dh_da[:] = a_da[:3]
        np.matmul(a_da[:3], dyn.da_dx, out=md.dh_dx)
        md.dh_dx[:, :nv] += df_dq
        np.matmul(a_da[:3], dyn.da_dpi, out=md.dh_dpi)
        if kin is c.kin_x:  # no reset: v+ = v
            md.dh_dx[:, nv:] += df_dvd
        else:
            md.dh_dx += df_dvd @ dyn.dvdyn_dx
            md.dh_dpi += df_dvd @ dyn.dvdyn_dpi
        self._add_bias(md, c, diff=True)


def default_measurements(robot: RobotModel) -> list[MeasurementModel]:
    """Encoders q, v + IMU gyro, orientation (wxyz) and specific force, default noise levels.

    z layout: [q_j (nj), v_j (nj), omega (3), quat wxyz (4), f (3)].
    """
    return [
        JointPosition(robot),
        JointVelocity(robot),
        ImuAngularVelocity(robot),
        ImuOrientation(robot),
        ImuSpecificForce(robot),
    ]
