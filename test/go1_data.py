"""Go1 estimation windows generated with the estimator's own model (MultibodyNodeModel), for tests and benchmarks."""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from mcoe_ros.inertia import pi_from_com
from mcoe_ros.measurement import ImuOrientation, default_measurements
from mcoe_ros.model import RobotModel
from mcoe_ros.multibody_node import MultibodyNodeModel, predict_measurements
from mcoe_ros.problem import ArrivalPrior, EstimationProblem

FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")


def payload_pi(spherical: bool = False) -> np.ndarray:
    """A 3 kg payload on the trunk (payload-frame convention)."""
    com = np.array([0.05, -0.02, 0.06])
    if spherical:
        return pi_from_com(3.0, com, 0.02 * np.eye(3))
    rot = pin.exp3(np.array([0.2, -0.1, 0.3]))
    return pi_from_com(3.0, com, rot @ np.diag([0.012, 0.025, 0.018]) @ rot.T)


def perturbed(pi: np.ndarray, factor: float = 1.7) -> np.ndarray:
    """Mass, first moment and inertia all scaled (``factor`` = 1.7: initialised 70 % off)."""
    return factor * np.asarray(pi, dtype=float)


def standing_state(robot: RobotModel, rng: np.random.Generator) -> np.ndarray:
    q = robot.neutral()
    q[2] = 0.30
    for i, name in enumerate(robot.joint_names):
        q[7 + i] = 0.0 if "hip" in name else (0.8 if "thigh" in name else -1.5)
    v = np.zeros(robot.nv)
    v[:6] = 0.05 * rng.standard_normal(6)
    return np.concatenate([q, v])


def go1_window(
    N: int,  # noqa: N803
    spherical: bool = False,
    param: str = "exp-eigval",
    dt: float = 2e-3,
    seed: int = 0,
    info_x0: float = 1e6,
    info_w: float = 1e8,
    noise: float = 0.0,
):
    """4-contact Go1 window with exact dynamics: returns (problem, true xs, true payload pi, node model).

    Torques: smooth random excitation around a standing posture; arrival prior at the true x_0 (information
    ``info_x0``), no parameter prior. Measurements are noise-free unless ``noise`` > 0: then every Euclidean
    measurement gets Gaussian noise of ``noise`` times its model standard deviation (orientation stays exact)."""
    rng = np.random.default_rng(seed)
    robot = RobotModel()
    node = MultibodyNodeModel(robot, FEET, dt, default_measurements(robot))
    pi_true = payload_pi(spherical)
    data = node.create_data()
    x = standing_state(robot, rng)
    amp = 4.0 * rng.standard_normal(robot.nj)
    freq = rng.uniform(5.0, 15.0, robot.nj)
    phase = rng.uniform(0, 2 * np.pi, robot.nj)
    u0 = np.zeros(robot.nj)
    for i, name in enumerate(robot.joint_names):
        u0[i] = 0.0 if "hip" in name else (-3.0 if "thigh" in name else 6.0)
    us = [u0 + amp * np.sin(2 * np.pi * freq * k * dt + phase) for k in range(N + 1)]
    xs, zs = [x], []
    for k in range(N + 1):
        data.u[:] = us[k]
        zs.append(predict_measurements(node, data, xs[k], pi_true))
        if noise > 0.0:
            for meas, zsl in zip(node.measurements, node.z_slices, strict=True):
                if not isinstance(meas, ImuOrientation):
                    zs[-1][zsl] += noise * np.linalg.solve(meas.W, rng.standard_normal(meas.nr))
        if k < N:
            xs.append(data.xnext.copy())
    prior = ArrivalPrior.independent(xs[0], info_x0, node.state.ndx, np.zeros(10))
    prob = EstimationProblem([node] * N, node, prior, [param], info_w)
    for k in range(N + 1):
        prob.set_node(k, u=us[k], z=zs[k])
    return prob, xs, pi_true, node
