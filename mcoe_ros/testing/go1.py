"""Go1 estimation windows generated with the estimator's own interval model, shared by tests and benchmarks."""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.inertia import make_parametrization, pi_from_com
from mcoe_ros.multibody.interval import MultibodyIntervalModel
from mcoe_ros.multibody.measurements import ImuSpecificForce, default_measurements
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.ocp.problem import ArrivalPrior, EstimationProblem
from mcoe_ros.testing.windows import rollout

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
    realised: bool = False,
):
    """4-contact Go1 window with exact dynamics: returns (problem, true xs, true payload pi, interval model).
    ``realised``: the accelerometer of the realised acceleration (noise-coupled, ``ImuSpecificForce(realised=True)``).

    Torques: smooth random excitation around a standing posture; arrival prior at the true x_0 (information
    ``info_x0``), no parameter prior. Measurements are noise-free unless ``noise`` > 0: then every Euclidean
    measurement gets Gaussian noise of ``noise`` times its model standard deviation (orientation stays exact)."""
    rng = np.random.default_rng(seed)
    robot = RobotModel()
    meas = default_measurements(robot)
    if realised:  # the same default noise level
        meas = [ImuSpecificForce(robot, realised=True) if isinstance(m, ImuSpecificForce) else m for m in meas]
    model = MultibodyIntervalModel(robot, FEET, dt, meas)
    pi_true = payload_pi(spherical)
    x = standing_state(robot, rng)
    amp = 4.0 * rng.standard_normal(robot.nj)
    freq = rng.uniform(5.0, 15.0, robot.nj)
    phase = rng.uniform(0, 2 * np.pi, robot.nj)
    u0 = np.zeros(robot.nj)
    for i, name in enumerate(robot.joint_names):
        u0[i] = 0.0 if "hip" in name else (-3.0 if "thigh" in name else 6.0)

    def torques(k: int, _x: np.ndarray) -> np.ndarray:
        return u0 + amp * np.sin(2 * np.pi * freq * k * dt + phase)

    xs, us, zs = rollout(model, x, torques, pi_true, N, noise, rng, orientation_noise=False)
    prior = ArrivalPrior.independent(xs[0], info_x0, model.state.ndx, np.zeros(10))
    prob = EstimationProblem([model] * N, model, prior, [make_parametrization(param)], info_w)
    for k in range(N + 1):
        prob.set_knot(k, u=us[k], z=zs[k])
    return prob, xs, pi_true, model


def go1_velocity_window(
    n: int, seed: int = 0, noise: float = 1.0, info_w: float = 1e4, info_theta: float = 1e-2, realised: bool = False
):
    """:func:`go1_window`'s data as the estimator's problem: process noise on the velocities only (information
    ``info_w`` per velocity), a weak parameter prior (``info_theta``) at the true payload.
    Returns (problem, true xs, true payload pi)."""
    prob, xs, pi_true, model = go1_window(n, seed=seed, noise=noise, realised=realised)
    nv = model.state.nv
    prior = ArrivalPrior.independent(xs[0], 1e6, model.state.ndx, prob.param.theta(pi_true), info_theta)
    vel = EstimationProblem([model] * n, model, prior, prob.param, np.full(nv, info_w), np.arange(nv, 2 * nv))
    for k, knot in enumerate(prob.knots):
        vel.set_knot(k, knot.data.u, knot.data.z)
    return vel, xs, pi_true
