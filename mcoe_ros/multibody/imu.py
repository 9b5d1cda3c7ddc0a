"""The IMU -> base-state conversion: one place for the IMU mounting and the rigid-body kinematics of the trunk.

The IMU (frame ``robot.imu_frame_id``, rigid on the floating base at rotation R_BI and position r in the base frame B,
from the URDF) reports its orientation R_WI (quaternion w, x, y, z), gyro w_I (rad/s) and specific force s_I (m/s^2),
all in its own frame. Then

  R_WB = R_WI R_BI^T,   w = R_BI w_I,   a_O = R_BI s_I + R_WB^T g - dw x r - w x (w x r)   (classical, axes B),

with dw the angular acceleration (rad/s^2, e.g. from differentiating the gyro). Gravity g = (0, 0, -9.81) m/s^2 in
the world frame (z up, REP-103).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.robot import RobotModel

GRAVITY = np.array([0.0, 0.0, -9.81])  #: m/s^2, world frame


def imu_mount(robot: RobotModel) -> tuple[np.ndarray, np.ndarray]:
    """(R_BI (3, 3), r (3,) m): IMU frame rotation and position in the root joint (trunk) frame, from the URDF."""
    frame = robot.model.frames[robot.imu_frame_id]
    if frame.parentJoint != 1:
        raise ValueError("the IMU frame must be fixed to the floating base")
    return frame.placement.rotation.copy(), frame.placement.translation.copy()


def rotation_quaternion(rot: np.ndarray) -> pin.Quaternion:
    """The unit quaternion of a rotation matrix (3, 3); use instead of ``pin.Quaternion(rot)``.

    eigenpy (3.13) leaks the column-major copy it makes of a C-ordered (row-major) numpy matrix passed to the
    Quaternion constructor: 80 B of native heap per call, invisible to tracemalloc. A matrix product or
    ``toRotationMatrix() @ ...`` is C-ordered, and this conversion runs several times per input message (contact
    detection, odometry step and output), which made the ROS node's resident size grow by ~0.5 kB per message
    (``docs/soak.md``). A Fortran-ordered copy maps without the leaking conversion."""
    return pin.Quaternion(np.asfortranarray(rot))


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a x b for (3,) vectors (np.cross costs ~20x more on single vectors: it is on the input-rate path)."""
    a0, a1, a2 = a
    b0, b1, b2 = b
    return np.array([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0])


@dataclass
class BaseMotion:
    """Orientation and motion of the base frame B from one IMU sample (see module docstring).

    rotation R_WB (3, 3); quat_xyzw (4,) the same rotation (Pinocchio's free-flyer order); omega (3,) rad/s and
    domega (3,) rad/s^2 in B; acc (3,) m/s^2 classical acceleration of the base origin in B (None without a specific
    force)."""

    rotation: np.ndarray
    omega: np.ndarray
    domega: np.ndarray
    acc: np.ndarray | None

    @property
    def quat_xyzw(self) -> np.ndarray:
        """R_WB as a quaternion (computed on use: the input-rate odometry step needs the matrix only)."""
        return rotation_quaternion(self.rotation).coeffs()


def base_motion(
    mount: tuple[np.ndarray, np.ndarray],
    quat_wxyz: np.ndarray,
    gyro: np.ndarray,
    acc: np.ndarray | None = None,
    domega_imu: np.ndarray | None = None,
) -> BaseMotion:
    """The base's orientation, angular velocity and acceleration and origin acceleration from one IMU sample.

    mount = :func:`imu_mount`; quat_wxyz (4,) IMU orientation (normalised here); gyro (3,) rad/s, acc (3,) specific
    force m/s^2 and domega_imu (3,) angular acceleration rad/s^2 (None = 0, e.g. when it is not differentiated),
    all in the IMU frame. The lever-arm terms dw x r + w x (w x r) are applied (the angular one with domega).
    """
    rot_bi, r_imu = mount
    quat = np.asarray(quat_wxyz, dtype=float)
    quat = quat / np.linalg.norm(quat)
    rot_wb = pin.Quaternion(*quat).toRotationMatrix() @ rot_bi.T
    omega = rot_bi @ np.asarray(gyro, dtype=float)
    domega = np.zeros(3) if domega_imu is None else rot_bi @ np.asarray(domega_imu, dtype=float)
    a_o = None
    if acc is not None:
        a_o = rot_bi @ np.asarray(acc, dtype=float) + rot_wb.T @ GRAVITY
        a_o -= cross(domega, r_imu) + cross(omega, cross(omega, r_imu))
    return BaseMotion(rot_wb, omega, domega, a_o)


def states_from_imu(
    robot: RobotModel,
    qj: np.ndarray,
    dqj: np.ndarray,
    ddqj: np.ndarray,
    quat_wxyz: np.ndarray,
    gyro: np.ndarray,
    domega_imu: np.ndarray,
    acc: np.ndarray,
    v_lin: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Full states (q (N, nq), v (N, nv), a (N, nv)) from N samples of joints and IMU (no differentiation here).

    qj, dqj, ddqj (N, nj); quat_wxyz (N, 4) IMU orientation; gyro, domega_imu (angular acceleration), acc (specific
    force) (N, 3) in the IMU frame. Base position = 0. v_lin (N, 3) base linear velocity in B, or None = 0 (exact for
    the dynamics of a free-floating robot: a Galilean boost changes no force); a[:3] = a_O - w x v_lin is set
    consistently (Pinocchio's spatial acceleration).
    """
    mount = imu_mount(robot)
    quat = np.atleast_2d(np.asarray(quat_wxyz, dtype=float))
    gyro, domega_imu, acc = np.atleast_2d(gyro), np.atleast_2d(domega_imu), np.atleast_2d(acc)
    n = quat.shape[0]
    q = np.zeros((n, robot.nq))
    v = np.zeros((n, robot.nv))
    a = np.zeros((n, robot.nv))
    for k in range(n):
        base = base_motion(mount, quat[k], gyro[k], acc[k], domega_imu[k])
        q[k, 3:7] = base.quat_xyzw
        v[k, 3:6] = base.omega
        a[k, :3], a[k, 3:6] = base.acc, base.domega
    if v_lin is not None:
        v[:, :3] = v_lin
        a[:, :3] -= np.cross(v[:, 3:6], v_lin)
    q[:, 7:] = qj
    v[:, 6:] = dqj
    a[:, 6:] = ddqj
    return q, v, a
