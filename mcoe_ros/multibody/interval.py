"""Interval model of the legged-robot estimator: phase dynamics + the knot's measurement models.

``MultibodyIntervalModel(robot, contacts, dt, measurements, impulse)`` implements
:class:`mcoe_ros.ocp.interval.IntervalModel` for x = (q, v) (:class:`~mcoe_ros.multibody.state.StateMultibody`),
pi = the parameter blocks of :class:`~mcoe_ros.multibody.actuator.ParameterLayout` (payload body 10, optional
actuator model and IMU biases; ``actuator=`` and ``layout=`` go to the dynamics), u = reported joint torques (nj,)
N m (with ``rolling_feet`` followed by every foot's contact point in its foot frame, 3 each, m), z = concatenation
of the measurements' slices (list order).

Payload handling: every :class:`MultibodyIntervalData` owns (through its dynamics data) a copy of ``robot.model``
whose payload-parent inertia is overwritten from the pi argument at every calc / calc_diff (nominal parent body +
``payload_to_joint @ pi``). ``robot.model`` itself is never modified and ``robot.payload_pi`` is ignored (pi is the
argument). Changes to robot.model made after ``create_data`` (e.g. armature) are not seen by existing datas. No
shared mutable state between datas -> datas can be evaluated in parallel threads.

Per-knot extras the problem builder may set besides data.u / data.z: ``data.dyn.anchors``
((n_contacts, 3) world contact points, m) to activate the Baumgarte kp term (see :mod:`mcoe_ros.multibody.dynamics`).
Available after calc: ``data.dyn.a`` (acceleration), ``data.dyn.lam`` (contact forces), ``data.dyn.vdyn``
(post-impact velocity); after calc_diff also their Jacobians (da_dx, dlam_dpi, ...). The measurement models read
them through ``data.collector`` (:class:`~mcoe_ros.multibody.collector.IntervalCollector`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.collector import IntervalCollector
from mcoe_ros.multibody.dynamics import PhaseDynamicsModel
from mcoe_ros.multibody.imu import rotation_quaternion
from mcoe_ros.multibody.measurements import (
    BaseHeight,
    ContactVelocity,
    ImuAngularVelocity,
    ImuOrientation,
    ImuSpecificForce,
    MeasurementModel,
)
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.multibody.soft_dynamics import SoftPhaseDynamicsModel
from mcoe_ros.multibody.state import StateMultibody
from mcoe_ros.ocp.interval import IntervalData, IntervalModel


class MultibodyIntervalModel(IntervalModel):
    """Dynamics of one contact phase (optionally preceded by a landing impulse) and the knot's measurements.

    Extra keyword arguments go to :class:`mcoe_ros.multibody.dynamics.PhaseDynamicsModel` (reference_frame, kp,
    kd, mu, accuracy, max_iter, restitution); with ``soft_contact`` (a
    :class:`~mcoe_ros.multibody.soft_contact.SoftContactModel`) the dynamics are the implicit soft-contact step of
    :class:`~mcoe_ros.multibody.soft_dynamics.SoftPhaseDynamicsModel` instead (``impulse`` ignored; ``actuator`` /
    ``layout`` and ``tol`` / ``max_iter`` go to it).
    """

    def __init__(
        self,
        robot: RobotModel,
        contacts: Sequence[str],
        dt: float,
        measurements: Sequence[MeasurementModel],
        impulse: Sequence[str] = (),
        **dynamics_options,
    ):
        self.robot = robot
        self.state = StateMultibody(robot.model)
        soft = dynamics_options.pop("soft_contact", None)
        if soft is not None:
            self.dynamics = SoftPhaseDynamicsModel(robot, contacts, dt, soft, **dynamics_options)
        else:
            self.dynamics = PhaseDynamicsModel(robot, contacts, dt, impulse, **dynamics_options)
        self.contacts, self.impulse, self.dt = self.dynamics.contacts, self.dynamics.impulse, self.dynamics.dt
        self.measurements = list(measurements)
        self.npi = self.dynamics.npi
        #: u = reported joint torques (nj,), N m, then with rolling feet the feet's contact points (3 per foot, m)
        self.nu = getattr(self.dynamics, "nu", robot.nj)
        self.z_slices: list[slice] = []  #: each measurement's slice of z
        self.r_slices: list[slice] = []  #: each measurement's slice of r / rows of Rx, Rp
        nz = nr = 0
        for meas in self.measurements:
            self.z_slices.append(slice(nz, nz + meas.nz))
            self.r_slices.append(slice(nr, nr + meas.nr))
            nz, nr = nz + meas.nz, nr + meas.nr
        self.nz, self.nr = nz, nr
        self.consider_jacobian = imu_bias_jacobian(self.measurements, self.r_slices, nr)
        #: rows of the realised-acceleration accelerometers (ImuSpecificForce(realised=True)): their residual depends
        #: on the interval's velocity noise, Rw = -W (∂f/∂a) / dt on the velocity columns (mcoe_ros.ocp.interval)
        self._realised = [
            (i, rs)
            for i, (m, rs) in enumerate(zip(self.measurements, self.r_slices, strict=True))
            if getattr(m, "realised", False)
        ]
        self.noise_coupled = bool(self._realised)
        self.needs_kinematics = any(m.needs_kinematics for m in self.measurements)
        self.uses_acceleration = any(m.uses_acceleration for m in self.measurements)

    def create_data(self) -> MultibodyIntervalData:
        return MultibodyIntervalData(self)

    def _kinematics(self, data: MultibodyIntervalData, x: np.ndarray, diff: bool) -> None:
        """Frame kinematics for the measurements, once per call (see mcoe_ros.multibody.measurements)."""
        if not self.needs_kinematics:
            return
        c = data.collector
        model, nq, dyn = c.model, self.state.nq, c.dyn
        q, v = x[:nq], x[nq:]
        fk = pin.computeForwardKinematicsDerivatives if diff else pin.forwardKinematics
        if self.impulse:
            fk(model, c.kin_x, q, v, dyn.zero_v)
            pin.updateFramePlacements(model, c.kin_x)
            if self.uses_acceleration:
                fk(model, c.kin_acc, q, dyn.vdyn, dyn.a)
                pin.updateFramePlacements(model, c.kin_acc)
        else:
            fk(model, c.kin_x, q, v, dyn.a)
            pin.updateFramePlacements(model, c.kin_x)

    def calc(self, data: MultibodyIntervalData, x: np.ndarray, pi: np.ndarray) -> None:
        data.collector.pi[:] = pi
        self.dynamics.calc(data.dyn, x, data.u, pi)
        data.xnext[:] = data.dyn.xnext
        self._kinematics(data, x, diff=False)
        for meas, md, zs in zip(self.measurements, data.meas, self.z_slices, strict=True):
            meas.calc(md, data.collector, x, data.z[zs])

    def calc_diff(self, data: MultibodyIntervalData, x: np.ndarray, pi: np.ndarray) -> None:
        data.collector.pi[:] = pi
        self.dynamics.calc_diff(data.dyn, x, data.u, pi)
        data.xnext[:] = data.dyn.xnext
        data.Fx[:] = data.dyn.Fx
        data.Fp[:] = data.dyn.Fp
        self._kinematics(data, x, diff=True)
        for meas, md, zs in zip(self.measurements, data.meas, self.z_slices, strict=True):
            meas.calc_diff(md, data.collector, x, data.z[zs])
        nv = self.state.nv
        for i, rs in self._realised:
            md = data.meas[i]
            np.matmul(md.neg_W, md.dh_da, out=data.Rw[rs, nv:])
            data.Rw[rs, nv:] /= self.dt


#: consider parameters of the multibody interval models: b = (gyro bias (3,) rad/s, accelerometer bias (3,) m/s²,
#: orientation offset (3,) rad), IMU axes: additive on the gyro and accelerometer readings that do not estimate their
#: bias, and a rotation R_meas exp(δ) of the orientation reading (its attitude filter's slowly varying tilt error)
IMU_CONSIDER = ("gyro", "accelerometer", "orientation")


def imu_bias_jacobian(
    measurements: Sequence[MeasurementModel], r_slices: Sequence[slice], nr: int
) -> np.ndarray | None:
    """∂r/∂b (nr, 9) of a knot's whitened residual r = W (z − h) in the consider parameters b of
    :data:`IMU_CONSIDER`: W on the gyro and accelerometer rows (zero where a measurement estimates its own bias:
    ``bias`` set, it is in pi), W on the orientation rows (r = W log3(R̂ᵀ R_meas exp(δ)): W Jlog3, = W at a small
    residual), zero on every other row; None if all zero."""
    jac = np.zeros((nr, 9))
    for meas, rs in zip(measurements, r_slices, strict=True):
        if isinstance(meas, ImuOrientation):
            jac[rs, 6:9] = meas.W
        elif meas.bias is not None:
            continue
        elif isinstance(meas, ImuAngularVelocity):
            jac[rs, 0:3] = meas.W
        elif isinstance(meas, ImuSpecificForce):
            jac[rs, 3:6] = meas.W
    return jac if jac.any() else None


def predict_measurements(
    model: MultibodyIntervalModel, data: MultibodyIntervalData, x: np.ndarray, pi: np.ndarray
) -> np.ndarray:
    """Noise-free measurement vector z (nz,) of ``model`` at (x, pi), in its z layout (for synthetic data).

    The orientation slice holds the predicted IMU quaternion in the model's order (w, x, y, z by default).
    """
    data.z[:] = 0.0
    model.calc(data, x, pi)
    z = np.zeros(model.nz)
    for meas, md, zs in zip(model.measurements, data.meas, model.z_slices, strict=True):
        if isinstance(meas, ImuOrientation):
            quat = rotation_quaternion(data.collector.kin_x.oMf[meas.frame_id].rotation)
            z[zs] = [quat.w, quat.x, quat.y, quat.z] if meas.quat_order == "wxyz" else quat.coeffs()
        else:
            z[zs] = md.h
    return z


class MultibodyIntervalData(IntervalData):
    """Knot workspace: dynamics data ``dyn`` (own pin.Model copy, pin.Datas, constraint datas, settings), the
    measurements' shared context ``collector`` and one MeasurementData per measurement (views into r, Rx, Rp)."""

    def __init__(self, model: MultibodyIntervalModel):
        super().__init__(model)
        self.dyn = model.dynamics.create_data()
        self.collector = IntervalCollector(self.dyn, bool(model.impulse))
        self.meas = [
            meas.create_data(self.r[rs], self.Rx[rs], self.Rp[rs])
            for meas, rs in zip(model.measurements, model.r_slices, strict=True)
        ]


def _canonical(robot: RobotModel, feet: Sequence[str]) -> tuple[str, ...]:
    feet = set(feet)
    unknown = feet - set(robot.foot_names)
    if unknown:
        raise ValueError(f"unknown feet {sorted(unknown)}")
    return tuple(name for name in robot.foot_names if name in feet)


class IntervalModelCache(dict):
    """Interval models per phase, created on first use: ``cache[contacts, impulse, measured, damped]`` (tuples of
    foot names; ``damped``: the contacts whose constraint has the options' velocity gain ``kd``, a landing over time).

    Every model has the shared sensor ``measurements`` plus, for each foot in ``measured``, a zero-velocity
    pseudo-measurement (:class:`~mcoe_ros.multibody.measurements.ContactVelocity`, std ``foot_velocity_std``,
    leg odometry; with the dynamics option ``rolling_feet`` of the foot's input contact point) and, with
    ``foot_height_std`` > 0, the leg-odometry base height that puts the foot on the ground
    (:class:`~mcoe_ros.multibody.measurements.BaseHeight`, its z a knot input). Keys are
    canonicalised to ``robot.foot_names`` order, so ``cache[("FR_foot", "FL_foot"), (), ()]`` and
    ``cache[("FL_foot", "FR_foot"), (), ()]`` are the same model; a 2-tuple key means no measured feet, a 3-tuple no
    damped ones.
    """

    def __init__(
        self,
        robot: RobotModel,
        dt: float,
        measurements: Sequence[MeasurementModel],
        foot_velocity_std: float | None = None,
        foot_height_std: float = 0.0,
        **dynamics_options,
    ):
        super().__init__()
        self.robot, self.dt, self.measurements, self.options = robot, dt, list(measurements), dynamics_options
        self.foot_measurements: dict[str, list[MeasurementModel]] = {}
        rolling = bool(dynamics_options.get("rolling_feet", False))
        if rolling and dynamics_options.get("soft_contact") is not None:
            raise ValueError("rolling feet are a rigid-contact option (not the soft-contact model)")
        if foot_velocity_std is not None:
            self.foot_measurements = {
                name: [ContactVelocity(robot, fid, std=foot_velocity_std, point_index=i if rolling else None)]
                + ([BaseHeight(robot, fid, std=foot_height_std)] if foot_height_std > 0 else [])
                for i, (name, fid) in enumerate(zip(robot.foot_names, robot.foot_frame_ids, strict=True))
            }

    def _key(self, key: tuple) -> tuple[tuple[str, ...], ...]:
        contacts, impulse, *rest = key
        measured = rest[0] if rest else ()
        damped = rest[1] if len(rest) > 1 else ()
        if self.options.get("soft_contact") is not None:
            impulse = damped = ()  # the soft contact absorbs landings: no reset map, no landing damping
        return tuple(_canonical(self.robot, feet) for feet in (contacts, impulse, measured, damped))

    def __getitem__(self, key: tuple) -> MultibodyIntervalModel:
        return super().__getitem__(self._key(key))

    def __missing__(self, key: tuple[tuple[str, ...], ...]) -> MultibodyIntervalModel:
        contacts, impulse, measured, damped = key
        if measured and not self.foot_measurements:
            raise ValueError("measured feet need a foot_velocity_std")
        meas = self.measurements + [m for f in measured for m in self.foot_measurements[f]]
        options = dict(self.options)
        if options.get("soft_contact") is None:
            options["damped"] = damped
        model = MultibodyIntervalModel(self.robot, contacts, self.dt, meas, impulse, **options)
        self[key] = model
        return model
