"""Actuator losses the reported joint torque does not include, linear in their parameters, and the layout of pi.

A Go1 reports the motor torque (current times torque constant). The joint sees less: viscous and Coulomb friction of
the gearbox and bearings, and the reflected rotor inertia adds to the mass matrix. Per parameter group g (a joint
type, hip / thigh / calf, or a single joint):

    tau_joint = u - b_v,g dq - b_c,g tanh(dq / eps),        M(q) <- M(q) + diag(I_r,g)   (joint rows),

with b_v (N m s/rad), b_c (N m), I_r (kg m^2) and eps (rad/s) the Coulomb smoothing. The inverse dynamics residual
M a + h + diag(I_r) a_j + b_v dq + b_c tanh(dq/eps) - u - J^T lambda is linear in p = (b_v, b_c, I_r) with the
regressor columns dq_j, tanh(dq_j/eps) and a_j on the joints of each group (:meth:`ActuatorModel.regressor`), so
their derivatives follow the payload's (-(da/dtau) Y, see :mod:`mcoe_ros.multibody.dynamics`).

:class:`ParameterLayout` places the blocks in the physical parameter vector pi of the interval models:
``[payload body (10) | actuator (n) | gyro bias (3) | accelerometer bias (3) | leg mass scale (1)]`` (absent blocks take
no room). The leg mass scale k > 0 multiplies the URDF inertial parameters of every body except the payload's parent
(the legs of a quadruped): pi_j = k pi_j,URDF (mass, first moment and inertia together, so k > 0 keeps every leg body
physically consistent; k - 1 is the legs' relative mass deviation, see :class:`mcoe_ros.multibody.dynamics`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mcoe_ros.multibody.robot import RobotModel

JOINT_TYPES = ("hip", "thigh", "calf")


class ActuatorModel:
    """Viscous + smoothed Coulomb friction and rotor inertia per joint group (see module docstring).

    grouping: 'type' (one group per joint type found in the joint names, e.g. hip/thigh/calf: 9 parameters on a
    quadruped) or 'joint' (one group per actuated joint). p = [b_v (n_groups), b_c (n_groups), I_r (n_groups)].
    Joint arrays are in the model's joint order (nj,).
    """

    def __init__(self, robot: RobotModel, grouping: str = "type", coulomb_smoothing: float = 0.05):
        if coulomb_smoothing <= 0.0:
            raise ValueError("coulomb_smoothing must be > 0 rad/s")
        names = robot.joint_names
        if grouping == "type":
            labels = [next((t for t in JOINT_TYPES if t in n), n) for n in names]
            self.group_names = list(dict.fromkeys(labels))
            group_of = [self.group_names.index(lbl) for lbl in labels]
        elif grouping == "joint":
            self.group_names = list(names)
            group_of = list(range(len(names)))
        else:
            raise ValueError(f"actuator grouping must be 'type' or 'joint', got {grouping!r}")
        self.nj = len(names)
        self.n_groups = len(self.group_names)
        self.n_params = 3 * self.n_groups
        self.eps = float(coulomb_smoothing)
        #: (nj, n_groups) joint -> group incidence
        self.groups = np.zeros((self.nj, self.n_groups))
        self.groups[np.arange(self.nj), group_of] = 1.0

    def viscous(self, p: np.ndarray) -> np.ndarray:
        return self.groups @ p[: self.n_groups]

    def coulomb(self, p: np.ndarray) -> np.ndarray:
        return self.groups @ p[self.n_groups : 2 * self.n_groups]

    def rotor_inertia(self, p: np.ndarray) -> np.ndarray:
        """Per-joint rotor inertia (nj,) kg m^2."""
        return self.groups @ p[2 * self.n_groups :]

    def loss(self, dq: np.ndarray, p: np.ndarray) -> np.ndarray:
        """Friction torque (nj,) N m lost between the motor and the joint at joint velocities dq (nj,) rad/s."""
        return self.viscous(p) * dq + self.coulomb(p) * np.tanh(dq / self.eps)

    def dloss_ddq(self, dq: np.ndarray, p: np.ndarray) -> np.ndarray:
        """d loss_j / d dq_j (nj,) (the loss is diagonal in the joints)."""
        th = np.tanh(dq / self.eps)
        return self.viscous(p) + self.coulomb(p) * (1.0 - th * th) / self.eps

    def regressor(self, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
        """d(inverse-dynamics residual of the joints)/dp (nj, n_params) at joint velocities dq and accelerations ddq
        (the columns multiply b_v, b_c, I_r of each group)."""
        g = self.groups
        return np.hstack([dq[:, None] * g, np.tanh(dq / self.eps)[:, None] * g, ddq[:, None] * g])

    def parameter_names(self) -> list[str]:
        return [f"{kind}_{g}" for kind in ("viscous", "coulomb", "rotor_inertia") for g in self.group_names]


@dataclass(frozen=True)
class ParameterLayout:
    """Blocks of the interval models' physical parameter vector pi (see module docstring)."""

    n_actuator: int = 0  #: actuator parameters (ActuatorModel.n_params), 0 = no actuator model
    gyro_bias: bool = False  #: 3 gyro bias parameters (rad/s, IMU frame)
    acc_bias: bool = False  #: 3 accelerometer bias parameters (m/s^2, IMU frame)
    leg_mass: bool = False  #: 1 leg mass scale k (dimensionless, legs' pi = k pi_URDF)

    @property
    def payload(self) -> slice:
        return slice(0, 10)

    @property
    def actuator(self) -> slice | None:
        return slice(10, 10 + self.n_actuator) if self.n_actuator else None

    @property
    def gyro(self) -> slice | None:
        start = 10 + self.n_actuator
        return slice(start, start + 3) if self.gyro_bias else None

    @property
    def acc(self) -> slice | None:
        start = 10 + self.n_actuator + 3 * self.gyro_bias
        return slice(start, start + 3) if self.acc_bias else None

    @property
    def leg(self) -> slice | None:
        start = 10 + self.n_actuator + 3 * self.gyro_bias + 3 * self.acc_bias
        return slice(start, start + 1) if self.leg_mass else None

    @property
    def size(self) -> int:
        return 10 + self.n_actuator + 3 * self.gyro_bias + 3 * self.acc_bias + int(self.leg_mass)
