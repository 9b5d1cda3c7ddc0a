"""The IMU -> base-state conversion: one place for the IMU mounting and the rigid-body kinematics of the trunk.

The IMU (frame ``robot.imu_frame_id``, rigid on the floating base at rotation R_BI and position r in the base frame B,
from the URDF) reports its orientation R_WI (quaternion w, x, y, z), gyro w_I (rad/s) and specific force s_I (m/s^2),
all in its own frame. Then

  R_WB = R_WI R_BI^T,   w = R_BI w_I,   a_O = R_BI s_I + R_WB^T g - dw x r - w x (w x r)   (classical, axes B),

with dw the angular acceleration (rad/s^2, e.g. from differentiating the gyro). Gravity g = (0, 0, -9.81) m/s^2 in
the world frame (z up, REP-103).
"""

from __future__ import annotations

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
    force) (N, 3) in the IMU frame. Base position = 0. v_lin (N, 3) base linear velocity in B, or None = 0 (exact, see
    the module docstring); a[:3] = a_O - w x v_lin is set consistently.
    """
    rot_bi, r_imu = imu_mount(robot)
    quat = np.atleast_2d(np.asarray(quat_wxyz, dtype=float))
    n = quat.shape[0]
    quat = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    q = np.zeros((n, robot.nq))
    v = np.zeros((n, robot.nv))
    a = np.zeros((n, robot.nv))
    omega = np.atleast_2d(gyro) @ rot_bi.T
    domega = np.atleast_2d(domega_imu) @ rot_bi.T
    for k in range(n):
        rot_wb = pin.Quaternion(*quat[k]).toRotationMatrix() @ rot_bi.T
        q[k, 3:7] = pin.Quaternion(rot_wb).coeffs()  # x, y, z, w
        a[k, :3] = rot_bi @ acc[k] + rot_wb.T @ GRAVITY
    a[:, :3] -= np.cross(domega, r_imu) + np.cross(omega, np.cross(omega, r_imu))
    if v_lin is not None:
        v[:, :3] = v_lin
        a[:, :3] -= np.cross(omega, v_lin)
    q[:, 7:] = qj
    v[:, 3:6], v[:, 6:] = omega, dqj
    a[:, 3:6], a[:, 6:] = domega, ddqj
    return q, v, a
