"""Synthetic estimation windows from an interval model: rollout of the model's own dynamics and its measurements.

One loop for every synthetic window of the tests and benchmarks (:mod:`mcoe_ros.testing.go1`,
:mod:`mcoe_ros.testing.paper`): x_{k+1} = f(x_k; pi | u_k) exactly, z_k = h(x_k; pi | u_k) plus optional Gaussian
noise of ``noise`` times each measurement model's standard deviation (the orientation as a body-side rotation
R Exp(n), n ~ N(0, sigma^2 I), when ``orientation_noise``, else exact).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.imu import rotation_quaternion
from mcoe_ros.multibody.interval import MultibodyIntervalModel, predict_measurements
from mcoe_ros.multibody.measurements import ImuOrientation


def noisy_quat_wxyz(q_wxyz: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Quaternion (w, x, y, z) rotated by Exp(n) on the body side, n ~ N(0, sigma^2 I_3) rad."""
    rot = pin.Quaternion(*q_wxyz).toRotationMatrix() @ pin.exp3(sigma * rng.standard_normal(3))
    qn = rotation_quaternion(rot)
    return np.array([qn.w, qn.x, qn.y, qn.z])


def rollout(
    model: MultibodyIntervalModel,
    x0: np.ndarray,
    torques: Callable[[int, np.ndarray], np.ndarray],
    pi: np.ndarray,
    n: int,
    noise: float = 0.0,
    rng: np.random.Generator | None = None,
    orientation_noise: bool = True,
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """(xs (n+1), us (n+1), zs (n+1)) of n intervals from x0 with joint torques ``torques(k, x_k)`` (N m)."""
    data = model.create_data()
    xs, us, zs = [np.asarray(x0, dtype=float)], [], []
    for k in range(n + 1):
        u = torques(k, xs[k])
        data.u[:] = u
        z = predict_measurements(model, data, xs[k], pi)
        if noise > 0.0:
            for meas, zsl in zip(model.measurements, model.z_slices, strict=True):
                if isinstance(meas, ImuOrientation):
                    if orientation_noise:
                        z[zsl] = noisy_quat_wxyz(z[zsl], noise * (1.0 / meas.W[0, 0]), rng)
                else:
                    z[zsl] += noise * np.linalg.solve(meas.W, rng.standard_normal(meas.nr))
        us.append(u)
        zs.append(z)
        if k < n:
            xs.append(data.xnext.copy())
    return xs, us, zs
