"""Single-rigid-body wrench regressor: the wrench a body needs for its motion is linear in pi.

All vectors are expressed in the body frame B, about the body origin O (not the CoM):
f = m (a - g) + dω × h + ω × (ω × h),  n = Ī dω + ω × (Ī ω) + h × (a - g),
with a the classical linear acceleration of O (m/s^2), g gravity (m/s^2), ω, dω the angular velocity and
acceleration (rad/s, rad/s^2). pi = [m, h_x, h_y, h_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz] (see inertia.py).
"""

from __future__ import annotations

import numpy as np


def _skew(v: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def _inertia_dot(x: np.ndarray) -> np.ndarray:
    """(3, 6) map with Ī x = _inertia_dot(x) @ pi[4:10]."""
    return np.array(
        [
            [x[0], x[1], 0.0, x[2], 0.0, 0.0],
            [0.0, x[0], x[1], 0.0, x[2], 0.0],
            [0.0, 0.0, 0.0, x[0], x[1], x[2]],
        ]
    )


def body_wrench_regressor(omega: np.ndarray, domega: np.ndarray, acc_minus_g: np.ndarray) -> np.ndarray:
    """Y (6, 10) with [f; n] = Y @ pi (N, N m; force first, body frame, about the body origin).

    omega, domega: angular velocity (rad/s) and acceleration (rad/s^2), (3,) in B.
    acc_minus_g: classical acceleration of the body origin minus gravity, a - g (m/s^2), (3,) in B.
    Equals Pinocchio's ``computeJointTorqueRegressor`` for a free-flyer body (LOCAL velocity convention).
    """
    omega = np.asarray(omega, dtype=float)
    s_w = _skew(omega)
    out = np.zeros((6, 10))
    out[0:3, 0] = acc_minus_g
    out[0:3, 1:4] = _skew(np.asarray(domega, dtype=float)) + s_w @ s_w
    out[3:6, 1:4] = -_skew(np.asarray(acc_minus_g, dtype=float))
    out[3:6, 4:10] = _inertia_dot(domega) + s_w @ _inertia_dot(omega)
    return out
