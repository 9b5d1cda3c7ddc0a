"""Node model of the legged-robot estimator: phase dynamics + measurement models (mcoe_ros.node contract).

``MultibodyNodeModel(robot, contacts, dt, measurements, impulse)`` implements
:class:`mcoe_ros.node.NodeModel` for x = (q, v) (StateMultibody), pi = payload parameters (10,),
u = joint torques (nj,), z = concatenation of the measurements' slices (list order).

Payload handling: every :class:`MultibodyNodeData` owns a copy of ``robot.model`` whose payload-parent
inertia is overwritten from the pi argument at every calc / calc_diff (nominal parent body +
``payload_to_joint @ pi``). ``robot.model`` itself is never modified and ``robot.payload_pi`` is
ignored (pi is the argument). Changes to robot.model made after ``create_data`` (e.g. armature) are
not seen by existing datas. No shared mutable state between datas -> datas can be evaluated in
parallel threads.

Per-node extras the problem builder may set besides data.u / data.z: ``data.dyn.anchors``
((n_contacts, 3) world contact points, m) to activate the Baumgarte kp term (see mcoe_ros.dynamics).
Available after calc: ``data.dyn.a`` (acceleration), ``data.dyn.lam`` (contact forces),
``data.dyn.vdyn`` (post-impact velocity); after calc_diff also their Jacobians (da_dx, dlam_dpi, ...).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pinocchio as pin

from mcoe_ros.dynamics import PhaseDynamicsModel
from mcoe_ros.manifold import StateMultibody
from mcoe_ros.measurement import Measurement
from mcoe_ros.model import RobotModel
from mcoe_ros.node import NodeData, NodeModel


class MultibodyNodeModel(NodeModel):
    """Dynamics of one contact phase (optionally preceded by a landing impulse) and the node's measurements.

    Extra keyword arguments go to :class:`mcoe_ros.dynamics.PhaseDynamicsModel` (reference_frame, kp,
    kd, mu, accuracy, max_iter, restitution).
    """

    def __init__(
        self,
        robot: RobotModel,
        contacts: Sequence[str],
        dt: float,
        measurements: Sequence[Measurement],
        impulse: Sequence[str] = (),
        **dynamics_options,
    ):
        self.robot = robot
        self.state = StateMultibody(robot.model)
        self.dynamics = PhaseDynamicsModel(robot, contacts, dt, impulse, **dynamics_options)
        self.contacts, self.impulse, self.dt = self.dynamics.contacts, self.dynamics.impulse, self.dynamics.dt
        self.measurements = list(measurements)
        self.npi = 10
        self.nu = robot.nj
        self.z_slices: list[slice] = []  #: each measurement's slice of z
        self.r_slices: list[slice] = []  #: each measurement's slice of r / rows of Rx, Rp
        nz = nr = 0
        for meas in self.measurements:
            self.z_slices.append(slice(nz, nz + meas.nz))
            self.r_slices.append(slice(nr, nr + meas.nr))
            nz, nr = nz + meas.nz, nr + meas.nr
        self.nz, self.nr = nz, nr
        self.needs_kinematics = any(m.needs_kinematics for m in self.measurements)
        self.uses_acceleration = any(m.uses_acceleration for m in self.measurements)

    def create_data(self) -> MultibodyNodeData:
        return MultibodyNodeData(self)

    def _kinematics(self, data: MultibodyNodeData, x: np.ndarray, diff: bool) -> None:
        """Frame kinematics for the measurements, once per call (see mcoe_ros.measurement)."""
        if not self.needs_kinematics:
            return
        model, nq, dyn = data.model, self.state.nq, data.dyn
        q, v = x[:nq], x[nq:]
        fk = pin.computeForwardKinematicsDerivatives if diff else pin.forwardKinematics
        if self.impulse:
            fk(model, data.kin_x, q, v, dyn.zero_v)
            pin.updateFramePlacements(model, data.kin_x)
            if self.uses_acceleration:
                fk(model, data.kin_acc, q, dyn.vdyn, dyn.a)
                pin.updateFramePlacements(model, data.kin_acc)
        else:
            fk(model, data.kin_x, q, v, dyn.a)
            pin.updateFramePlacements(model, data.kin_x)

    def calc(self, data: MultibodyNodeData, x: np.ndarray, pi: np.ndarray) -> None:
        self.dynamics.calc(data.dyn, x, data.u, pi)
        data.xnext[:] = data.dyn.xnext
        self._kinematics(data, x, diff=False)
        for meas, md, zs in zip(self.measurements, data.meas, self.z_slices, strict=True):
            meas.calc(md, data, x, data.z[zs])

    def calc_diff(self, data: MultibodyNodeData, x: np.ndarray, pi: np.ndarray) -> None:
        self.dynamics.calc_diff(data.dyn, x, data.u, pi)
        data.xnext[:] = data.dyn.xnext
        data.Fx[:] = data.dyn.Fx
        data.Fp[:] = data.dyn.Fp
        self._kinematics(data, x, diff=True)
        for meas, md, zs in zip(self.measurements, data.meas, self.z_slices, strict=True):
            meas.calc_diff(md, data, x, data.z[zs])


def predict_measurements(
    node: MultibodyNodeModel, data: MultibodyNodeData, x: np.ndarray, pi: np.ndarray
) -> np.ndarray:
    """Noise-free measurement vector z (nz,) of ``node`` at (x, pi), in the node's z layout (for synthetic data).

    The orientation slice holds the predicted IMU quaternion in the model's order (w, x, y, z by default).
    """
    from mcoe_ros.measurement import ImuOrientation

    data.z[:] = 0.0
    node.calc(data, x, pi)
    z = np.zeros(node.nz)
    for meas, md, zs in zip(node.measurements, data.meas, node.z_slices, strict=True):
        if isinstance(meas, ImuOrientation):
            quat = pin.Quaternion(data.kin_x.oMf[meas.frame_id].rotation)
            z[zs] = [quat.w, quat.x, quat.y, quat.z] if meas.quat_order == "wxyz" else quat.coeffs()
        else:
            z[zs] = md.h
    return z


class MultibodyNodeData(NodeData):
    """Node workspace: dynamics data (own pin.Model copy, pin.Datas, constraint datas, settings),
    kinematics pin.Datas for the measurements and one MeasurementData per measurement (views into r, Rx, Rp)."""

    def __init__(self, model: MultibodyNodeModel):
        super().__init__(model)
        self.dyn = model.dynamics.create_data()
        self.model = self.dyn.model  #: pin.Model with the payload of the last call
        self.kin_x = self.model.createData()  #: kinematics at (q, v) [and a when no impulse]
        self.kin_acc = self.model.createData() if model.impulse else self.kin_x  #: kinematics at (q, v+, a)
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


class NodeModelCache(dict):
    """dict keyed by (contacts, impulse) (tuples of foot names); missing models are created on access.

    Keys are canonicalised to ``robot.foot_names`` order, so ``cache[("FR_foot", "FL_foot"), ()]`` and
    ``cache[("FL_foot", "FR_foot"), ()]`` are the same model.
    """

    def __init__(self, robot: RobotModel, dt: float, measurements: Sequence[Measurement], **dynamics_options):
        super().__init__()
        self.robot, self.dt, self.measurements, self.options = robot, dt, list(measurements), dynamics_options

    def __getitem__(self, key: tuple[Sequence[str], Sequence[str]]) -> MultibodyNodeModel:
        contacts, impulse = key
        return super().__getitem__((_canonical(self.robot, contacts), _canonical(self.robot, impulse)))

    def __missing__(self, key: tuple[tuple[str, ...], tuple[str, ...]]) -> MultibodyNodeModel:
        model = MultibodyNodeModel(self.robot, key[0], self.dt, self.measurements, key[1], **self.options)
        self[key] = model
        return model

    def get_model(self, contacts: Sequence[str] = (), impulse: Sequence[str] = ()) -> MultibodyNodeModel:
        return self[contacts, impulse]


def make_node_models(
    robot: RobotModel, dt: float, measurements: Sequence[Measurement], **dynamics_options
) -> NodeModelCache:
    """Lazily filled cache of node models, ``models[contacts, impulse]`` (all share ``measurements``)."""
    return NodeModelCache(robot, dt, measurements, **dynamics_options)
