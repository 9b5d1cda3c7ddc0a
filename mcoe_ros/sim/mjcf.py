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
* optional actuator losses (:class:`ActuatorLosses`): viscous joint damping, Coulomb friction (MuJoCo
  ``frictionloss``) and reflected rotor inertia (``armature``) per joint type, inside the physics; the torque the
  robot *reports* does not include them (see :mod:`mcoe_ros.sim.runner`);
* optional robot/URDF mismatch (:class:`MassMismatch`): the simulated link masses, inertias and trunk CoM differ
  from the URDF the estimator uses (seeded); :meth:`Go1Sim.trunk_deviation_pi` gives the trunk's difference;
* contact options (:class:`ContactConfig`): foot/floor friction (sliding, torsional, rolling), ``condim`` of the
  foot spheres (3 = point contact, 6 = soft round foot with torsional and rolling friction), ``solref``/``solimp``
  softness of the ground, the foot spheres' radius;
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

from dataclasses import dataclass, field, replace

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


JOINT_TYPES = ("hip", "thigh", "calf")


def _per_type(values, what: str) -> tuple[float, float, float]:
    """A scalar or a (hip, thigh, calf) triple -> (hip, thigh, calf) floats >= 0."""
    vals = np.broadcast_to(np.asarray(values, dtype=float), (3,))
    if not np.all(np.isfinite(vals)) or np.any(vals < 0):
        raise ValueError(f"{what} must be finite and >= 0, got {values}")
    return tuple(float(v) for v in vals)


@dataclass(frozen=True)
class ActuatorLosses:
    """What happens between the motor torque the robot reports and the torque at the joint (off by default).

    Per joint type (hip, thigh, calf; a scalar applies to all three): ``viscous`` N m s/rad (MuJoCo joint
    ``damping``), ``coulomb`` N m (MuJoCo ``frictionloss``, a soft dry-friction constraint), ``rotor_inertia``
    kg m^2 (MuJoCo ``armature``, reflected rotor inertia). ``torque_scale``: torque-constant error, the motor
    applies ``torque_scale`` x the commanded torque while reporting the commanded one; ``torque_offset`` N m:
    added to every reported torque (current-sensor offset). Realistic Go1-like magnitudes (issue 13):
    :data:`REALISTIC_LOSSES`.
    """

    viscous: tuple[float, float, float] = (0.0, 0.0, 0.0)
    coulomb: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rotor_inertia: tuple[float, float, float] = (0.0, 0.0, 0.0)
    torque_scale: float = 1.0
    torque_offset: float = 0.0

    def __post_init__(self) -> None:
        for name in ("viscous", "coulomb", "rotor_inertia"):
            object.__setattr__(self, name, _per_type(getattr(self, name), f"actuator {name}"))
        if not 0.5 <= self.torque_scale <= 1.5:
            raise ValueError(f"torque_scale must be within 0.5 .. 1.5, got {self.torque_scale}")
        if not np.isfinite(self.torque_offset):
            raise ValueError("torque_offset must be finite")

    def per_joint(self, joint_names: list[str], name: str) -> np.ndarray:
        """(nj,) values of field ``name`` in the given joint order (type from the joint name)."""
        vals = getattr(self, name)
        return np.array([vals[next(i for i, t in enumerate(JOINT_TYPES) if t in n)] for n in joint_names])

    @property
    def active(self) -> bool:
        return any(any(getattr(self, n)) for n in ("viscous", "coulomb", "rotor_inertia")) or (
            self.torque_scale != 1.0 or self.torque_offset != 0.0
        )


#: Go1-like actuator losses of issue 13: damping 1-2 N m s/rad, Coulomb ~0.2 N m, rotor inertia ~0.01 kg m^2. The
#: torque-constant error and offset are separate options (``torque_scale``, ``torque_offset``; e.g. 1.03 and
#: 0.05 N m): no estimator can tell a torque-constant error from a heavier robot, so they are not in this profile
REALISTIC_LOSSES = ActuatorLosses(viscous=(1.0, 1.5, 2.0), coulomb=(0.2, 0.2, 0.2), rotor_inertia=(0.01, 0.01, 0.01))


#: which link bodies a :class:`MassMismatch` perturbs
MISMATCH_LINKS = ("all", "trunk")


@dataclass(frozen=True)
class MassMismatch:
    """The simulated robot differs from the URDF (the estimator keeps the nominal URDF). Off by default.

    Every perturbed link body (Pinocchio's merged joint inertias) gets its mass and its inertia about its CoM
    multiplied by ``1 + s_j``, ``|s_j|`` uniform in [scale / 2, scale]; the sign is ``direction``: 'lighter'
    (all -), 'heavier' (all +) or 'random' (each link). The trunk CoM moves by a uniform offset in
    [-com_offset, com_offset] m per axis. ``links``: 'all' = the trunk and the 12 leg bodies, 'trunk' = the trunk
    only (the legs keep their URDF values: the deviation is exactly what a payload body on the trunk can
    represent). Seeded (``seed``); the draws do not depend on ``links``, so for a given seed 'trunk' perturbs the
    trunk exactly as 'all' does."""

    scale: float = 0.0
    direction: str = "random"
    com_offset: float = 0.0
    seed: int = 0
    links: str = "all"

    def __post_init__(self) -> None:
        if not 0.0 <= self.scale < 0.5:
            raise ValueError(f"mass mismatch scale must be within 0 .. 0.5, got {self.scale}")
        if self.direction not in ("random", "lighter", "heavier"):
            raise ValueError(f"mass mismatch direction must be random, lighter or heavier, got {self.direction!r}")
        if not 0.0 <= self.com_offset <= 0.05:
            raise ValueError(f"trunk CoM offset must be within 0 .. 0.05 m, got {self.com_offset}")
        if self.links not in MISMATCH_LINKS:
            raise ValueError(f"mass mismatch links must be one of {MISMATCH_LINKS}, got {self.links!r}")

    def apply(self, inertias: list) -> list:
        """Perturbed copies of Pinocchio inertias (index = joint id; index 0, the universe, unchanged)."""
        rng = np.random.default_rng([self.seed, 13])
        out = [pin.Inertia(inertias[0])]
        for jid in range(1, len(inertias)):
            nom = inertias[jid]
            mag = rng.uniform(0.5, 1.0) * self.scale
            sign = {"lighter": -1.0, "heavier": 1.0}.get(self.direction) or (1.0 if rng.uniform() < 0.5 else -1.0)
            offset = rng.uniform(-1.0, 1.0, 3) * self.com_offset
            if jid > 1 and self.links == "trunk":  # draws above kept: the trunk's do not depend on ``links``
                out.append(pin.Inertia(inertias[jid]))
                continue
            factor = 1.0 + sign * mag
            com = np.asarray(nom.lever) + (offset if jid == 1 else 0.0)
            out.append(pin.Inertia(float(nom.mass) * factor, com, np.asarray(nom.inertia) * factor))
        return out


@dataclass(frozen=True)
class ContactConfig:
    """Foot/floor contact. Default = the historical stiff point-contact model (condim 3).

    ``floor_friction`` sliding mu (low = slippery floor); ``torsional_friction`` m and ``rolling_friction`` m
    (MuJoCo's second and third friction coefficients, effective only with ``foot_condim`` 6 = soft round foot);
    ``solref`` (time constant s, damping ratio) and ``solimp`` (MuJoCo impedance) of the foot and floor geoms:
    a larger time constant is a softer ground (MuJoCo default (0.02, 1)); ``foot_radius`` m of the foot collision
    spheres centred at the URDF's foot frames (0.0005 .. 0.05; the URDF's :data:`FOOT_RADIUS` by default; a
    near-zero radius puts the contact point at the foot frame, the estimator's point contact; below the URDF's
    radius the calves get no collision geom, as their boxes end at the foot frame); ``noslip_iterations`` of
    MuJoCo's no-slip solver (0 = off): a post-pass that removes the soft friction rows' creep, so a held foot stays
    where it is (a floor that grips, for ablations; MuJoCo's soft friction alone lets a held foot creep at R/B per N
    of tangential force plus a J̇v term, see docs/localisation.md session 22). Realistic soft-foot profile:
    :data:`SOFT_FEET`."""

    floor_friction: float = 0.8
    torsional_friction: float = 0.005
    rolling_friction: float = 0.0001
    foot_condim: int = 3
    solref: tuple[float, float] = (0.02, 1.0)
    solimp: tuple[float, float, float, float, float] = (0.9, 0.95, 0.001, 0.5, 2.0)
    foot_radius: float = FOOT_RADIUS
    noslip_iterations: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.noslip_iterations <= 1000:
            raise ValueError(f"noslip iterations must be within 0 .. 1000, got {self.noslip_iterations}")
        if not 0.0005 <= self.foot_radius <= 0.05:
            raise ValueError(f"foot radius must be within 0.0005 .. 0.05 m, got {self.foot_radius}")
        if not 0.0 < self.floor_friction <= 3.0:
            raise ValueError(f"floor friction must be within 0 .. 3, got {self.floor_friction}")
        if self.foot_condim not in (1, 3, 4, 6):
            raise ValueError(f"foot condim must be 1, 3, 4 or 6, got {self.foot_condim}")
        if self.torsional_friction < 0 or self.rolling_friction < 0:
            raise ValueError("torsional and rolling friction must be >= 0")
        if len(self.solref) != 2 or not 0.002 <= self.solref[0] <= 0.2 or self.solref[1] <= 0:
            raise ValueError(
                f"contact solref must be (time constant 0.002 .. 0.2 s, damping ratio > 0), got {self.solref}"
            )

    @property
    def friction(self) -> list[float]:
        return [self.floor_friction, self.torsional_friction, self.rolling_friction]


#: soft round feet on a medium-hard floor: torsional and rolling friction on, 2.5x softer contact than default
SOFT_FEET = ContactConfig(torsional_friction=0.01, rolling_friction=0.002, foot_condim=6, solref=(0.05, 1.0))


@dataclass
class SimConfig:
    """Physics options. ``timestep`` s; ``armature`` kg m^2 on each leg hinge (added to ``losses.rotor_inertia``);
    ``floor_friction`` sliding mu (overrides ``contact.floor_friction`` when not None)."""

    timestep: float = 0.001
    armature: float = 0.0
    floor_friction: float | None = None
    payload: PayloadSpec = field(default_factory=PayloadSpec)
    losses: ActuatorLosses = field(default_factory=ActuatorLosses)
    mismatch: MassMismatch = field(default_factory=MassMismatch)
    contact: ContactConfig = field(default_factory=ContactConfig)

    def __post_init__(self) -> None:
        if self.floor_friction is not None:
            self.contact = replace(self.contact, floor_friction=float(self.floor_friction))


def _add_collision_geoms(spec_bodies: dict, robot: RobotModel, contact: ContactConfig) -> None:
    geom_model = pin.buildGeomFromUrdf(robot.model, robot.spec.resolved_urdf(), pin.GeometryType.COLLISION)
    for obj in geom_model.geometryObjects:
        shape = obj.geometry
        kind = type(shape).__name__
        if "rotor" in obj.name:
            continue
        name = obj.name.rsplit("_", 1)[0]
        geom_kw = {"pos": obj.placement.translation.copy(), "quat": _rot_quat(obj.placement.rotation)}
        if kind == "Box":
            half = np.asarray(shape.halfSide, dtype=float)
            if half.max() < 0.005:  # sensor placeholders
                continue
            geom_kw.update(type=mujoco.mjtGeom.mjGEOM_BOX, size=half)
        elif kind == "Sphere":
            radius = contact.foot_radius if name.endswith("_foot") else float(shape.radius)
            geom_kw.update(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[radius, 0, 0])
        elif kind == "Cylinder":
            geom_kw.update(type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[float(shape.radius), float(shape.halfLength), 0])
        else:
            continue
        if name.endswith("_calf") and contact.foot_radius < FOOT_RADIUS:
            continue  # the calf box ends at the foot frame: it would touch the floor before a smaller foot sphere
        body = spec_bodies[int(obj.parentJoint)]
        if name.endswith("_foot"):
            geom_kw.update(condim=contact.foot_condim)
        body.add_geom(
            name=name,
            contype=2,
            conaffinity=1,
            friction=contact.friction,
            solref=list(contact.solref),
            solimp=list(contact.solimp),
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
    spec.option.noslip_iterations = cfg.contact.noslip_iterations
    spec.worldbody.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[0, 0, 0.05],
        contype=1,
        conaffinity=2,
        friction=cfg.contact.friction,
        solref=list(cfg.contact.solref),
        solimp=list(cfg.contact.solimp),
    )
    inertias = cfg.mismatch.apply(list(model.inertias))
    losses = cfg.losses
    bodies: dict[int, object] = {}
    trunk = spec.worldbody.add_body(name="trunk", pos=[0, 0, 0.35])
    trunk.add_freejoint(name="root")
    _set_inertial(trunk, inertias[1])
    bodies[1] = trunk
    for jid in range(2, model.njoints):
        parent = bodies[int(model.parents[jid])]
        placement = model.jointPlacements[jid]
        jname = model.names[jid]
        body = parent.add_body(
            name=jname.replace("_joint", ""), pos=placement.translation.copy(), quat=_rot_quat(placement.rotation)
        )
        _set_inertial(body, inertias[jid])
        short = model.joints[jid].shortname()
        axis = {"JointModelRX": [1, 0, 0], "JointModelRY": [0, 1, 0], "JointModelRZ": [0, 0, 1]}[short]
        iq = model.joints[jid].idx_q
        body.add_joint(
            name=jname,
            type=mujoco.mjtJoint.mjJNT_HINGE,
            axis=axis,
            range=[float(model.lowerPositionLimit[iq]), float(model.upperPositionLimit[iq])],
            limited=mujoco.mjtLimited.mjLIMITED_TRUE,
            armature=float(cfg.armature) + losses.per_joint([jname], "rotor_inertia")[0],
            damping=losses.per_joint([jname], "viscous")[0],
            frictionloss=losses.per_joint([jname], "coulomb")[0],
        )
        effort = float(model.effortLimit[model.joints[jid].idx_v])
        spec.add_actuator(
            name=jname.replace("_joint", "_motor"),
            target=jname,
            trntype=mujoco.mjtTrn.mjTRN_JOINT,
            gainprm=[1.0] + [0.0] * 9,
            ctrlrange=[-effort * max(1.0, losses.torque_scale), effort * max(1.0, losses.torque_scale)],
            ctrllimited=mujoco.mjtLimited.mjLIMITED_TRUE,
        )
        bodies[jid] = body
    _add_collision_geoms(bodies, robot, cfg.contact)
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
        #: URDF effort limits (N m) the controller clips its commands to (the motors may apply torque_scale x that)
        self.effort_limit = self.model.actuator_ctrlrange[:, 1] / max(1.0, self.cfg.losses.torque_scale)
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

    def link_inertias(self) -> list:
        """Pinocchio inertias (index = Pinocchio joint id) of the *simulated* links (URDF mismatch applied)."""
        return self.cfg.mismatch.apply(list(self.robot.model.inertias))

    def trunk_deviation_pi(self) -> np.ndarray:
        """pi (10,), trunk frame, of simulated trunk minus URDF trunk (zero without mass mismatch)."""
        return np.asarray(self.link_inertias()[1].toDynamicParameters()) - np.asarray(
            self.robot.model.inertias[1].toDynamicParameters()
        )

    def effective_payload_pi(self) -> np.ndarray:
        """pi (10,), trunk frame, of what an estimator with the URDF trunk must find: the current payload plus the
        trunk's deviation from the URDF, as one body (mass may be negative for a robot lighter than its URDF)."""
        pay = self.payload
        return (pay.pi if pay.mass > 0 else np.zeros(10)) + self.trunk_deviation_pi()

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
