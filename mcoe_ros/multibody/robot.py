"""Robot model: a Pinocchio model of a (floating-base) robot plus a rigidly attached payload body.

The payload is its own 10-parameter body (:mod:`mcoe_ros.multibody.inertia` convention, expressed in the frame
named ``payload_frame``) rigidly attached to that frame's parent joint. Its parameters pi_p are the
estimated quantities; the nominal robot stays as in the URDF. Because a rigid attachment adds
inertias linearly, the parent joint's inertia is ``nominal + A pi_p`` with A the constant frame-change
map, and the payload's columns of the joint-torque regressor are ``Y_parent @ A``.

No ROS import here. Units SI; Pinocchio conventions (q = [p, quat(x, y, z, w), joints] for a free flyer).
"""

from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.inertia import transform_matrix

#: Unitree SDK motor order (FR, FL, RR, RL; hip, thigh, calf) as URDF joint names.
GO1_UNITREE_JOINT_ORDER: tuple[str, ...] = tuple(
    f"{leg}_{part}_joint" for leg in ("FR", "FL", "RR", "RL") for part in ("hip", "thigh", "calf")
)
GO1_URDF = "go1_description/urdf/go1.urdf"
#: the bottom of the Go1's 0.02 m foot sphere in its foot frame, m, at the calf's stance pitch (world up = (0.75, 0,
#: 0.66) in the foot frame, within a few degrees on every gait of the realism suite): a ``foot_contact_offset``
GO1_FOOT_SOLE: tuple[float, float, float] = (-0.015, 0.0, -0.0132)


def find_robot_data_file(relpath: str) -> str:
    """Absolute path of ``relpath`` inside example-robot-data's ``robots/`` folder.

    Looks in ROS prefixes (AMENT_PREFIX_PATH, e.g. ros-<distro>-example-robot-data) and in the
    data-only ``example-robot-data`` wheel (``<site-packages>/cmeel.prefix/share``).
    """
    roots = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    roots += [os.path.join(p, "cmeel.prefix") for p in sys.path if p]
    roots.append(sys.prefix)
    for root in roots:
        cand = os.path.join(root, "share", "example-robot-data", "robots", relpath)
        if os.path.isfile(cand):
            return cand
    hits = glob.glob(
        os.path.join(
            sys.prefix,
            "lib",
            "python*",
            "site-packages",
            "cmeel.prefix",
            "share",
            "example-robot-data",
            "robots",
            relpath,
        )
    )
    if hits:
        return hits[0]
    raise FileNotFoundError(f"example-robot-data file '{relpath}' not found (install the example-robot-data package)")


@dataclass
class RobotSpec:
    """What defines the estimation model; every field is a config entry (no code change per robot)."""

    urdf_path: str = ""  #: URDF file; "" = Go1 from example-robot-data
    floating_base: bool = True
    base_frame: str = "base"
    imu_frame: str = "imu_link"
    foot_frames: tuple[str, ...] = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")
    payload_frame: str = "trunk"  #: payload parameters are expressed in this frame
    armature: float | list[float] = 0.0  #: rotor inertia per actuated joint, kg m^2 (reflected)
    #: radius of the round feet around the foot frames, m (Go1: 0.02); the rigid contacts hold the foot frames, so
    #: a foot rolling by φ moves the modelled contact by r φ (published horizontal covariance,
    #: :mod:`mcoe_ros.estimation.drift`); 0 = point feet
    foot_radius: float = 0.02
    #: the contact point of every foot in its foot frame, m (3,): (0, 0, 0) = the foot frame itself (a round foot's
    #: centre). A point fixed in the foot at the sphere's bottom for the stance orientation is the material point that
    #: rolls on the ground: still while the foot rolls, where the centre moves by r φ (docs/localisation.md, session
    #: 19). The contacts, the leg kinematics and the contact detector use these points (frames ``<foot>_contact``)
    foot_contact_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    hw_joint_names: tuple[str, ...] = GO1_UNITREE_JOINT_ORDER  #: joint names in the hardware's order
    extra: dict = field(default_factory=dict)

    def resolved_urdf(self) -> str:
        return self.urdf_path or find_robot_data_file(GO1_URDF)


class JointMap:
    """Name-based map between a hardware joint order and the model's actuated-joint order."""

    def __init__(self, model_names: list[str], hw_names: list[str]):
        if sorted(model_names) != sorted(hw_names) or len(set(hw_names)) != len(hw_names):
            missing = sorted(set(model_names) ^ set(hw_names))
            raise ValueError(f"joint map: hardware and model joint names differ: {missing}")
        self.model_names = list(model_names)
        self.hw_names = list(hw_names)
        #: model_array = hw_array[hw_to_model]
        self.hw_to_model = np.array([hw_names.index(n) for n in model_names], dtype=int)
        #: hw_array = model_array[model_to_hw]
        self.model_to_hw = np.array([model_names.index(n) for n in hw_names], dtype=int)

    def to_model(self, hw_values: np.ndarray) -> np.ndarray:
        return np.asarray(hw_values)[..., self.hw_to_model]

    def to_hw(self, model_values: np.ndarray) -> np.ndarray:
        return np.asarray(model_values)[..., self.model_to_hw]


class RobotModel:
    """Pinocchio model (with the payload applied) and the robot's named frames and joint map.

    Attributes: ``model`` (pin.Model), ``nq``, ``nv``, ``nj`` (actuated joints), ``joint_names``
    (actuated, model order), ``joint_map``, ``base_frame_id``, ``imu_frame_id``, ``foot_frame_ids``,
    ``payload_joint`` (parent joint id), ``payload_to_joint`` (10x10 map pi_p -> joint-frame pi),
    ``payload_pi`` (current payload parameters, (10,)).
    """

    def __init__(self, spec: RobotSpec | None = None):
        self.spec = spec or RobotSpec()
        root = pin.JointModelFreeFlyer() if self.spec.floating_base else None
        path = self.spec.resolved_urdf()
        self.model = pin.buildModelFromUrdf(path, root) if root is not None else pin.buildModelFromUrdf(path)
        self.nq, self.nv = self.model.nq, self.model.nv
        self.nu_base = 6 if self.spec.floating_base else 0
        self.nj = self.nv - self.nu_base
        first = 2 if self.spec.floating_base else 1
        self.joint_names = [self.model.names[j] for j in range(first, self.model.njoints)]
        self.joint_map = JointMap(self.joint_names, list(self.spec.hw_joint_names or self.joint_names))
        self.base_frame_id = self._frame(self.spec.base_frame)
        self.imu_frame_id = self._frame(self.spec.imu_frame) if self.spec.imu_frame else -1
        self.foot_frame_ids = self._contact_frames([self._frame(f) for f in self.spec.foot_frames])
        self.foot_names = list(self.spec.foot_frames)
        self.foot_map = JointMap(self.foot_names, self._hw_foot_order())  #: per-foot arrays (e.g. foot_force)
        arm = np.broadcast_to(np.asarray(self.spec.armature, dtype=float), (self.nj,))
        self.model.armature[self.nu_base :] = arm
        payload_frame = self.model.frames[self._frame(self.spec.payload_frame)]
        self.payload_joint = int(payload_frame.parentJoint)
        self.payload_placement = payload_frame.placement.copy()
        self.payload_to_joint = transform_matrix(payload_frame.placement.rotation, payload_frame.placement.translation)
        self.nominal_inertias = [inertia.copy() for inertia in self.model.inertias]
        self.payload_pi = np.zeros(10)

    def _hw_foot_order(self) -> list[str]:
        """Feet sorted by the hardware index of the first joint of their leg (Unitree: FR, FL, RR, RL)."""
        hw = self.joint_map.hw_names

        def first_hw_index(fid: int) -> int:
            joint, found = self.model.frames[fid].parentJoint, []
            while joint > 0:
                name = self.model.names[joint]
                if name in hw:
                    found.append(hw.index(name))
                joint = self.model.parents[joint]
            return min(found) if found else len(hw)

        return [
            n
            for _, n in sorted(
                (first_hw_index(f), n) for f, n in zip(self.foot_frame_ids, self.foot_names, strict=True)
            )
        ]

    def _contact_frames(self, feet: list[int]) -> list[int]:
        """The feet's contact frames: the foot frames themselves, or (``spec.foot_contact_offset`` ≠ 0) a frame
        ``<foot>_contact`` per foot at that offset in the foot frame, added to the model (so the C++ robot, built from
        the serialised model, has them too)."""
        offset = np.asarray(self.spec.foot_contact_offset, dtype=float)
        if offset.shape != (3,) or not np.all(np.isfinite(offset)):
            raise ValueError(f"foot contact offset must be 3 finite numbers (m), got {self.spec.foot_contact_offset!r}")
        if not offset.any():
            return feet
        out = []
        for fid in feet:
            foot = self.model.frames[fid]
            placement = foot.placement * pin.SE3(np.eye(3), offset)
            frame = pin.Frame(f"{foot.name}_contact", foot.parentJoint, fid, placement, pin.FrameType.OP_FRAME)
            out.append(self.model.addFrame(frame, False))
        return out

    def _frame(self, name: str) -> int:
        if not self.model.existFrame(name):
            raise ValueError(f"frame '{name}' not in the robot model")
        return self.model.getFrameId(name)

    @property
    def payload_parent_frame(self) -> str:
        """Name of a frame that coincides with the payload's parent joint frame (where ``combined_pi`` lives)."""
        for frame in self.model.frames:
            if frame.parentJoint == self.payload_joint and frame.placement.isIdentity():
                if frame.type == pin.FrameType.BODY:
                    return frame.name
        return self.model.names[self.payload_joint]

    def create_data(self) -> pin.Data:
        return self.model.createData()

    def set_payload(self, pi_payload: np.ndarray) -> None:
        """Apply payload parameters (10,) (payload-frame convention) to the model in place."""
        self.payload_pi = np.array(pi_payload, dtype=float)
        self.model.inertias[self.payload_joint] = self.combined_inertia()

    def combined_pi(self, pi_payload: np.ndarray | None = None) -> np.ndarray:
        """Dynamic parameters (10,) of parent body + payload, in the parent joint frame."""
        pi_p = self.payload_pi if pi_payload is None else pi_payload
        return self.nominal_inertias[self.payload_joint].toDynamicParameters() + self.payload_to_joint @ pi_p

    def nominal_body_pi(self) -> np.ndarray:
        """The payload's parent body as in the URDF (10,), expressed like a payload (payload frame): the offset
        between an estimated whole body (parent + payload) and the payload."""
        return np.linalg.solve(self.payload_to_joint, self.nominal_inertias[self.payload_joint].toDynamicParameters())

    @property
    def leg_joints(self) -> list[int]:
        """Joint ids of the bodies a leg mass scale multiplies: every body except the universe and the payload's
        parent (on a quadruped whose payload frame is the trunk: the 12 leg bodies)."""
        return [j for j in range(1, self.model.njoints) if j != self.payload_joint]

    @property
    def leg_mass(self) -> float:
        """URDF mass of the :attr:`leg_joints` bodies, kg."""
        return float(sum(self.nominal_inertias[j].mass for j in self.leg_joints))

    def combined_inertia(self, pi_payload: np.ndarray | None = None) -> pin.Inertia:
        """Parent body + payload as a pin.Inertia in the parent joint frame (what an MPC model needs)."""
        return pin.Inertia.FromDynamicParameters(self.combined_pi(pi_payload))

    def neutral(self) -> np.ndarray:
        return pin.neutral(self.model)

    @property
    def total_mass(self) -> float:
        return float(sum(inertia.mass for inertia in self.model.inertias))
