"""MuJoCo model of the Go1 (plus a welded payload) built with ``mujoco.MjSpec`` from the Pinocchio URDF model.

MuJoCo's URDF importer rejects the Go1 URDF (near-zero inertia on the ``base`` link), so the model is
built body by body from :class:`mcoe_ros.multibody.robot.RobotModel`:

* one MuJoCo body per Pinocchio joint, in Pinocchio order (trunk with a free joint, then FL, FR, RL, RR
  hip/thigh/calf hinges), so ``qpos[7:]``/``qvel[6:]`` are in the model joint order;
* inertias are Pinocchio's *merged* joint inertias (fixed children such as rotors, imu, cameras are
  lumped into their parent joint's body), so both engines carry identical inertial parameters;
* collision geoms: the URDF's primitive collision shapes from Pinocchio's geometry model (trunk box,
  hip cylinders, thigh/calf boxes, foot spheres r = 0.02 m at the ``*_foot`` frames); rotor and
  sensor shapes skipped; geoms only collide with the floor (plane, friction ``floor_friction``);
* torque motors (gear 1) with the URDF effort limits (23.7 / 35.55 N m) as control range;
* optional reflected rotor inertia (``armature``, kg m^2) on every leg hinge;
* a site ``imu`` at the ``imu_link`` frame with MuJoCo ``framequat``/``gyro``/``accelerometer`` sensors
  (accelerometer = specific force a - g in the site frame);
* a jointless body ``payload`` welded to the trunk, body frame at the payload CoM (trunk frame,
  orientation = principal axes of the payload inertia).

Payload on/off: the payload body always exists; :meth:`Go1Sim.set_payload_active` switches its
``body_mass`` and ``body_inertia`` between the configured values and zero and calls ``mj_setConst`` (on
scratch data, so the simulation state is untouched).
Its frame (CoM position and principal axes) is fixed at build time.

Frames: world = odom (z up, floor at z = 0); base = trunk origin. Units SI.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mujoco
import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.inertia import pi_from_com
from mcoe_ros.multibody.robot import RobotModel, RobotSpec

FOOT_RADIUS = 0.02


@dataclass
class PayloadSpec:
    """Rigid payload welded to the trunk: mass (kg), CoM (3,) in the trunk frame (m), inertia about the CoM (3, 3)
    expressed in the trunk frame (kg m^2)."""

    mass: float = 0.0
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    inertia: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))

    def __post_init__(self) -> None:
        self.com = np.asarray(self.com, dtype=float).reshape(3)
        self.inertia = np.asarray(self.inertia, dtype=float).reshape(3, 3)
        if self.mass < 0.0:
            raise ValueError(f"payload mass must be >= 0, got {self.mass}")
        if not np.allclose(self.inertia, self.inertia.T, atol=1e-12):
            raise ValueError("payload inertia must be symmetric")
        if self.mass > 0.0:
            ev = np.linalg.eigvalsh(self.inertia)
            if ev[0] <= 0.0 or ev[0] + ev[1] < ev[2] - 1e-12:
                raise ValueError(f"payload inertia is not physical (eigenvalues {ev})")

    @classmethod
    def box(cls, mass: float, com, size) -> PayloadSpec:
        """Solid box of full side lengths ``size`` (3,) (m), axes aligned with the trunk."""
        sx, sy, sz = (float(s) for s in size)
        diag = mass / 12.0 * np.array([sy**2 + sz**2, sx**2 + sz**2, sx**2 + sy**2])
        return cls(mass, np.asarray(com, dtype=float), np.diag(diag))

    @classmethod
    def sphere(cls, mass: float, com, radius: float) -> PayloadSpec:
        """Solid sphere of radius (m)."""
        return cls(mass, np.asarray(com, dtype=float), 0.4 * mass * radius**2 * np.eye(3))

    @property
    def pi(self) -> np.ndarray:
        """Dynamic parameters (10,) about the trunk origin (:mod:`mcoe_ros.multibody.inertia` convention)."""
        return pi_from_com(self.mass, self.com, self.inertia)


def principal_axes(inertia: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(diagonal (3,), quaternion w,x,y,z (4,)) with inertia = R diag R^T, R right-handed."""
    evals, evecs = np.linalg.eigh(0.5 * (inertia + inertia.T))
    if np.linalg.det(evecs) < 0.0:
        evecs[:, 2] *= -1.0
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, np.ascontiguousarray(evecs).ravel())
    return np.maximum(evals, 0.0), quat


def _set_inertial(body, inertia: pin.Inertia) -> None:
    diag, quat = principal_axes(np.asarray(inertia.inertia))
    body.explicitinertial = True
    body.mass = float(inertia.mass)
    body.ipos = np.asarray(inertia.lever, dtype=float)
    body.iquat = quat
    body.inertia = np.maximum(diag, 1e-9)


def _rot_quat(rotation: np.ndarray) -> np.ndarray:
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, np.ascontiguousarray(rotation, dtype=float).ravel())
    return quat


@dataclass
class SimConfig:
    """Physics options. ``timestep`` s; ``armature`` kg m^2 on each leg hinge; ``floor_friction`` sliding mu."""

    timestep: float = 0.001
    armature: float = 0.0
    floor_friction: float = 0.8
    payload: PayloadSpec = field(default_factory=PayloadSpec)


def _add_collision_geoms(spec_bodies: dict, robot: RobotModel, floor_friction: float) -> None:
    geom_model = pin.buildGeomFromUrdf(robot.model, robot.spec.resolved_urdf(), pin.GeometryType.COLLISION)
    for obj in geom_model.geometryObjects:
        shape = obj.geometry
        kind = type(shape).__name__
        if "rotor" in obj.name:
            continue
        geom_kw = {"pos": obj.placement.translation.copy(), "quat": _rot_quat(obj.placement.rotation)}
        if kind == "Box":
            half = np.asarray(shape.halfSide, dtype=float)
            if half.max() < 0.005:  # sensor placeholders
                continue
            geom_kw.update(type=mujoco.mjtGeom.mjGEOM_BOX, size=half)
        elif kind == "Sphere":
            geom_kw.update(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[float(shape.radius), 0, 0])
        elif kind == "Cylinder":
            geom_kw.update(type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[float(shape.radius), float(shape.halfLength), 0])
        else:
            continue
        name = obj.name.rsplit("_", 1)[0]
        body = spec_bodies[int(obj.parentJoint)]
        body.add_geom(
            name=name,
            contype=2,
            conaffinity=1,
            friction=[floor_friction, 0.005, 0.0001],
            mass=0.0,
            density=0.0,
            **geom_kw,
        )


def build_spec(robot: RobotModel, cfg: SimConfig) -> mujoco.MjSpec:
    """MjSpec of the Go1 + payload + floor (see module docstring)."""
    model = robot.model
    spec = mujoco.MjSpec()
    spec.modelname = "go1_mcoe"
    spec.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_FALSE
    spec.compiler.fusestatic = False
    spec.compiler.autolimits = True
    spec.compiler.degree = False  # joint ranges in rad
    spec.option.timestep = cfg.timestep
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.worldbody.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[0, 0, 0.05],
        contype=1,
        conaffinity=2,
        friction=[cfg.floor_friction, 0.005, 0.0001],
    )
    bodies: dict[int, object] = {}
    trunk = spec.worldbody.add_body(name="trunk", pos=[0, 0, 0.35])
    trunk.add_freejoint(name="root")
    _set_inertial(trunk, model.inertias[1])
    bodies[1] = trunk
    for jid in range(2, model.njoints):
        parent = bodies[int(model.parents[jid])]
        placement = model.jointPlacements[jid]
        jname = model.names[jid]
        body = parent.add_body(
            name=jname.replace("_joint", ""), pos=placement.translation.copy(), quat=_rot_quat(placement.rotation)
        )
        _set_inertial(body, model.inertias[jid])
        short = model.joints[jid].shortname()
        axis = {"JointModelRX": [1, 0, 0], "JointModelRY": [0, 1, 0], "JointModelRZ": [0, 0, 1]}[short]
        iq = model.joints[jid].idx_q
        body.add_joint(
            name=jname,
            type=mujoco.mjtJoint.mjJNT_HINGE,
            axis=axis,
            range=[float(model.lowerPositionLimit[iq]), float(model.upperPositionLimit[iq])],
            limited=mujoco.mjtLimited.mjLIMITED_TRUE,
            armature=float(cfg.armature),
        )
        effort = float(model.effortLimit[model.joints[jid].idx_v])
        spec.add_actuator(
            name=jname.replace("_joint", "_motor"),
            target=jname,
            trntype=mujoco.mjtTrn.mjTRN_JOINT,
            gainprm=[1.0] + [0.0] * 9,
            ctrlrange=[-effort, effort],
            ctrllimited=mujoco.mjtLimited.mjLIMITED_TRUE,
        )
        bodies[jid] = body
    _add_collision_geoms(bodies, robot, cfg.floor_friction)
    imu = model.frames[robot.imu_frame_id].placement
    trunk.add_site(name="imu", pos=imu.translation.copy(), quat=_rot_quat(imu.rotation))
    for foot in robot.foot_names:
        frame = model.frames[robot._frame(foot)]
        bodies[int(frame.parentJoint)].add_site(name=foot, pos=frame.placement.translation.copy())
    pay = cfg.payload
    diag, quat = principal_axes(pay.inertia) if pay.mass > 0 else (np.zeros(3), np.array([1.0, 0, 0, 0]))
    payload = trunk.add_body(name="payload", pos=pay.com.copy(), quat=quat)
    payload.explicitinertial = True
    payload.ipos = np.zeros(3)  # the body frame *is* the CoM frame (unset, MuJoCo would offset it again)
    payload.iquat = np.array([1.0, 0.0, 0.0, 0.0])
    payload.mass = max(pay.mass, 1e-6)
    payload.inertia = np.maximum(diag, 1e-9)
    payload.add_geom(
        name="payload_visual", type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.03, 0, 0], contype=0, conaffinity=0
    )
    for kind, name in (
        (mujoco.mjtSensor.mjSENS_FRAMEQUAT, "imu_quat"),
        (mujoco.mjtSensor.mjSENS_GYRO, "imu_gyro"),
        (mujoco.mjtSensor.mjSENS_ACCELEROMETER, "imu_acc"),
    ):
        spec.add_sensor(name=name, type=kind, objtype=mujoco.mjtObj.mjOBJ_SITE, objname="imu")
    return spec


class Go1Sim:
    """Compiled MuJoCo Go1 with index helpers.

    ``qpos = [p_world (3), quat_wxyz (4), joints (12, model order)]``, ``qvel = [v_world (3), w_body (3),
    joints (12)]`` (MuJoCo free-joint convention), ``ctrl`` (12, model order, N m).
    """

    def __init__(self, cfg: SimConfig | None = None, robot: RobotModel | None = None):
        self.cfg = cfg or SimConfig()
        self.robot = robot or RobotModel(RobotSpec())
        self.spec = build_spec(self.robot, self.cfg)
        self.model = self.spec.compile()
        self.data = mujoco.MjData(self.model)
        self.trunk_id = self.model.body("trunk").id
        self.payload_id = self.model.body("payload").id
        self.foot_geom_ids = [self.model.geom(f).id for f in self.robot.foot_names]
        self.floor_id = self.model.geom("floor").id
        self._payload_mass = float(self.cfg.payload.mass)
        self._payload_inertia = self.model.body_inertia[self.payload_id].copy()
        self.joint_names = [self.model.joint(i).name for i in range(1, self.model.njnt)]
        assert self.joint_names == self.robot.joint_names, "MuJoCo and Pinocchio joint orders differ"
        self.effort_limit = self.model.actuator_ctrlrange[:, 1].copy()
        self._sens = {n: self.model.sensor(n) for n in ("imu_quat", "imu_gyro", "imu_acc")}
        self.payload_active = True
        self.set_payload_active(self._payload_mass > 0.0)

    @property
    def dt(self) -> float:
        return float(self.model.opt.timestep)

    @property
    def robot_mass(self) -> float:
        """Mass of the robot without the payload (kg)."""
        return float(sum(self.model.body_mass[1:])) - float(self.model.body_mass[self.payload_id])

    @property
    def payload(self) -> PayloadSpec:
        """Current ground-truth payload (mass 0 when removed)."""
        if not self.payload_active:
            return PayloadSpec()
        return self.cfg.payload

    def set_payload_active(self, active: bool) -> None:
        """Add (``True``) or remove the configured payload (mass/inertia switched, frame unchanged)."""
        active = bool(active) and self._payload_mass > 0.0
        self.model.body_mass[self.payload_id] = self._payload_mass if active else 0.0
        self.model.body_inertia[self.payload_id] = self._payload_inertia if active else 0.0
        # mj_setConst evaluates the model at qpos0 in the data it is given: use scratch data, keep the state
        mujoco.mj_setConst(self.model, mujoco.MjData(self.model))
        self.payload_active = active

    def reset(self, base_pos: np.ndarray, joint_q: np.ndarray) -> None:
        """Set base position (world, m), level orientation, joint angles (12, model order), zero velocity."""
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[:3] = base_pos
        self.data.qpos[3:7] = [1.0, 0.0, 0.0, 0.0]
        self.data.qpos[7:] = joint_q
        mujoco.mj_forward(self.model, self.data)

    def sensor(self, name: str) -> np.ndarray:
        s = self._sens[name]
        return self.data.sensordata[s.adr[0] : s.adr[0] + s.dim[0]].copy()

    def foot_normal_forces(self) -> np.ndarray:
        """Normal contact force (N, >= 0) floor -> each foot sphere (4, model foot order FL, FR, RL, RR)."""
        out = np.zeros(4)
        wrench = np.zeros(6)
        for i in range(self.data.ncon):
            con = self.data.contact[i]
            geoms = (int(con.geom1), int(con.geom2))
            if self.floor_id not in geoms:
                continue
            other = geoms[1] if geoms[0] == self.floor_id else geoms[0]
            if other in self.foot_geom_ids:
                mujoco.mj_contactForce(self.model, self.data, i, wrench)
                out[self.foot_geom_ids.index(other)] += wrench[0]
        return out

    def total_vertical_contact_force(self) -> float:
        """Sum over all floor contacts of the world-z force on the robot (N)."""
        total = 0.0
        wrench = np.zeros(6)
        for i in range(self.data.ncon):
            con = self.data.contact[i]
            mujoco.mj_contactForce(self.model, self.data, i, wrench)
            frame = np.asarray(con.frame).reshape(3, 3)  # rows: contact axes in world
            force_world = frame.T @ wrench[:3]
            # contact force acts from geom1 on geom2; the floor is always geom1 (lower id: world body geom)
            sign = 1.0 if int(con.geom1) == self.floor_id else -1.0
            total += sign * force_world[2]
        return float(total)
