"""An accelerometer that measures the realised acceleration a + n_v/dt (``noise.accelerometer_realised``).

* the noise-coupled residual r + Rw w in the solver: the Riccati step and the covariances (forward marginalisation +
  backward value function) equal the dense Gauss–Newton KKT of the same problem (velocity-only and full noise), and
  the converged estimate is a stationary point of the cost evaluated independently of the solver;
* the Go1 interval model's Rw = −W (∂f/∂a) / dt against finite differences of the specific force in the acceleration;
* the estimator with the option runs the Python solver (the compiled backend has no coupling) and says why; the
  coupling only on the intervals whose first knot has every foot down for ``noise.realised_standing_time``;
* errors in variables on a point mass with a noisy reported force: only the realised accelerometer together with the
  parametric torque-noise weight estimates the mass without bias.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.estimation.config import EstimatorConfig, NoiseConfig
from mcoe_ros.estimation.estimator import Estimator
from mcoe_ros.estimation.window import GridKnot
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import ConfigError, node_config
from mcoe_ros.multibody import compiled
from mcoe_ros.multibody.interval import MultibodyIntervalModel
from mcoe_ros.multibody.measurements import ImuSpecificForce, default_measurements
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.ocp.interval import IntervalData, IntervalModel
from mcoe_ros.ocp.problem import ArrivalPrior, EstimationProblem, PositiveParameters
from mcoe_ros.ocp.solver import MCOESolver, SolverOptions
from mcoe_ros.ocp.state import StateVector
from mcoe_ros.testing.data import first_estimates
from mcoe_ros.testing.go1 import FEET, payload_pi, standing_state
from mcoe_ros.testing.toy import assert_matches_dense_kkt, dense_kkt_step

DT = 0.01
SIGMA_P = 1e-2  #: position measurement noise, m
SIGMA_A = 0.05  #: accelerometer noise, m/s²
SIGMA_V = 1e-3  #: velocity process noise per step, m/s


class PointMassImu(IntervalModel):
    """1-D point mass, x = (p, v), pi = [m] kg, u = reported force N: v' = v + dt u / m, p' = p + dt v'. Knot
    measurements: the position (p − z_p)/σ_p and an accelerometer of the realised acceleration u/m + w_v/dt,
    r_a = (z_a − u/m − w_v/dt)/σ_a (noise-coupled, Rw = −1/(dt σ_a) on v); ``coupled=False``: of u/m alone."""

    def __init__(self, coupled: bool = True, sigma_a: float = SIGMA_A):
        self.state = StateVector(2)
        self.npi, self.nu, self.nz, self.nr = 1, 1, 2, 2
        self.noise_coupled = coupled
        self.sigma_a = sigma_a

    def calc(self, data: IntervalData, x: np.ndarray, pi: np.ndarray) -> None:
        acc = data.u[0] / pi[0]
        vn = x[1] + DT * acc
        data.xnext[:] = (x[0] + DT * vn, vn)
        data.r[:] = ((data.z[0] - x[0]) / SIGMA_P, (data.z[1] - acc) / self.sigma_a)

    def calc_diff(self, data: IntervalData, x: np.ndarray, pi: np.ndarray) -> None:
        self.calc(data, x, pi)
        dacc = -data.u[0] / pi[0] ** 2
        data.Fx[:] = [[1.0, DT], [0.0, 1.0]]
        data.Fp[:, 0] = (DT * DT * dacc, DT * dacc)
        data.Rx[:] = [[-1.0 / SIGMA_P, 0.0], [0.0, 0.0]]
        data.Rp[:, 0] = (0.0, -dacc / self.sigma_a)
        if self.noise_coupled:
            data.Rw[1, 1] = -1.0 / (DT * self.sigma_a)


def _trajectory(n: int, mass: float) -> tuple[np.ndarray, list[np.ndarray]]:
    """True force (n + 1,) N and states x_0..x_n of the point mass (semi-implicit Euler, as the model)."""
    t = DT * np.arange(n + 1)
    force = 3.0 * np.sin(2.1 * t) + 2.0 * np.cos(5.3 * t + 0.4)
    xs = [np.array([0.1, -0.2])]
    for k in range(n):
        vn = xs[-1][1] + DT * force[k] / mass
        xs.append(np.array([xs[-1][0] + DT * vn, vn]))
    return force, xs


def point_mass_problem(n: int, full_noise: bool, coupled: bool = True, seed: int = 3, sigma_u: float = 0.0):
    """A window of n intervals of a point mass (2 kg) pushed by a known force (reported with white noise sigma_u),
    position and accelerometer measured with noise; returns (problem, true states, guess (xs, ws, theta))."""
    rng = np.random.default_rng(seed)
    m_true = 2.0
    force, xs = _trajectory(n, m_true)
    model = PointMassImu(coupled)
    prior = ArrivalPrior.independent(xs[0] + [1e-3, 1e-2], np.array([1e2, 1e2]), 2, np.log([1.5]), 1e-2)
    info = np.array([(SIGMA_V * DT) ** -2, SIGMA_V**-2]) if full_noise else np.array([SIGMA_V**-2])
    prob = EstimationProblem([model] * n, model, prior, [PositiveParameters(1)], info, None if full_noise else [1])
    for k in range(n + 1):
        z = [xs[k][0] + SIGMA_P * rng.standard_normal(), force[k] / m_true + SIGMA_A * rng.standard_normal()]
        prob.set_knot(k, u=np.array([force[k] + sigma_u * rng.standard_normal()]), z=np.array(z))
    guess = [x + [2e-3, 0.05] for x in xs]
    return prob, xs, (guess, [np.zeros(prob.nw) for _ in range(n)], np.log([1.5]))


@pytest.mark.parametrize("full_noise", [False, True], ids=["velocity-noise", "full-noise"])
def test_riccati_step_and_covariances_equal_the_dense_kkt_with_the_noise_coupling(full_noise):
    prob, _, (xs, _, theta) = point_mass_problem(8, full_noise)
    rng = np.random.default_rng(1)
    ws = [1e-3 * rng.standard_normal(prob.nw) for _ in range(prob.N)]
    solver = MCOESolver(prob, SolverOptions())
    solver.set_guess(xs, ws, theta)
    prob.calc_diff(solver.xs, solver.ws, solver.theta)
    assert all(nd.coupled for nd in prob.knots[:-1]) and not prob.knots[-1].coupled
    step, _, _ = solver.compute_direction(0.0)
    _, _, _, (kkt, rhs) = dense_kkt_step(prob, xs, ws, theta)
    assert_matches_dense_kkt(solver, step, kkt, rhs, (0, 3, prob.N))


def _cost(prob: EstimationProblem, xs, theta) -> float:
    """The problem's cost at states xs and parameters theta (w_k = x_{k+1} − f(x_k) on the noise coordinates), from
    the model alone: ½‖r + Rw w‖² with Rw evaluated here, not the solver's linearisation."""
    pi = prob.param.pi(theta)
    cost = prob.prior.cost(prob.state, xs[0], theta)
    for k, nd in enumerate(prob.knots):
        d = nd.model.create_data()
        d.u[:], d.z[:] = nd.data.u, nd.data.z
        nd.model.calc_diff(d, xs[k], pi)
        r = d.r.copy()
        if k < prob.N:
            w = (xs[k + 1] - d.xnext)[prob.noise_dims]
            r += d.Rw[:, prob.noise_dims] @ w
            cost += 0.5 * float(w @ nd.W @ w)
        cost += 0.5 * float(r @ r)
    return cost


def test_converged_estimate_is_stationary_for_the_coupled_cost():
    prob, _, guess = point_mass_problem(30, True, sigma_u=0.3)  # full noise: every perturbation is feasible
    solver = MCOESolver(prob, SolverOptions(max_iter=40))
    res = solver.solve(*guess)
    assert res.converged
    xs, theta = [x.copy() for x in solver.xs], solver.theta.copy()
    # gaps closed: perturb one state or θ; the independent cost does not change to first order
    base = _cost(prob, xs, theta)
    h = 1e-6
    for k in (0, 7, 30):
        for i in range(2):
            plus = [x.copy() for x in xs]
            minus = [x.copy() for x in xs]
            plus[k][i] += h
            minus[k][i] -= h
            grad = (_cost(prob, plus, theta) - _cost(prob, minus, theta)) / (2 * h)
            assert abs(grad) <= 1e-4 * max(1.0, base), (k, i, grad)
    grad_th = (_cost(prob, xs, theta + h) - _cost(prob, xs, theta - h)) / (2 * h)
    assert abs(grad_th) <= 1e-4 * max(1.0, base)


def test_the_coupling_changes_the_estimate():
    """Same data, the accelerometer of the model's a or of the realised a + w/dt: the two estimates differ (the
    coupling is not a no-op) and both converge."""
    out = []
    for coupled in (False, True):
        prob, _, guess = point_mass_problem(40, False, coupled=coupled, sigma_u=0.5)
        solver = MCOESolver(prob, SolverOptions(max_iter=40))
        assert solver.solve(*guess).converged
        out.append(float(np.exp(solver.theta[0])))
    assert abs(out[0] - out[1]) > 1e-4


@pytest.fixture(scope="module")
def go1():
    return RobotModel()


@pytest.mark.parametrize("impulse", [(), ("FL_foot", "RR_foot")], ids=["phase", "impulse"])
def test_go1_realised_accelerometer_noise_jacobian_matches_finite_differences(go1, impulse):
    robot = go1
    meas = default_measurements(robot)
    idx = next(i for i, m in enumerate(meas) if isinstance(m, ImuSpecificForce))
    acc = meas[idx] = ImuSpecificForce(robot, std=0.3, realised=True)
    dt = 0.002
    model = MultibodyIntervalModel(robot, FEET, dt, meas, impulse)
    assert model.noise_coupled
    data = model.create_data()
    rng = np.random.default_rng(2)
    x = standing_state(robot, rng)
    x[robot.nq :] += 0.2 * rng.standard_normal(robot.nv)
    data.u[:] = 5.0 * rng.standard_normal(robot.nj)
    model.calc_diff(data, x, payload_pi())
    nv = robot.nv
    rw = data.Rw[model.r_slices[idx], nv:]
    assert not data.Rw[:, :nv].any() and not np.delete(data.Rw, model.r_slices[idx], axis=0).any()
    # FD: the specific force at the same (q, v+) with the acceleration a + e/dt (a realised velocity noise e)
    pmodel = data.collector.model
    kin = pmodel.createData()
    q = x[: robot.nq]
    vplus = data.dyn.vdyn.copy() if impulse else x[robot.nq :]
    a0 = data.dyn.a.copy()

    def force(a):
        pin.forwardKinematics(pmodel, kin, q, vplus, a)
        pin.updateFramePlacements(pmodel, kin)
        lin = pin.getFrameClassicalAcceleration(pmodel, kin, acc.frame_id, pin.LOCAL).linear
        return lin - kin.oMf[acc.frame_id].rotation.T @ pmodel.gravity.linear

    h = 1e-4
    fd = np.zeros((3, nv))
    for i in range(nv):
        e = np.zeros(nv)
        e[i] = h
        fd[:, i] = (force(a0 + e / dt) - force(a0 - e / dt)) / (2 * h)
    expected = -acc.W @ fd
    err = np.abs(rw - expected).max() / np.abs(expected).max()
    print(f"realised accelerometer Rw vs FD ({'impulse' if impulse else 'phase'}): worst relative error {err:.1e}")
    assert err < 1e-7, err
    assert not rw[:, 6:].any()  # the base only: joint accelerations do not move the trunk's IMU


def test_estimator_with_the_realised_accelerometer_runs_both_solvers():
    """noise.accelerometer_realised: the config refuses what it cannot honour (soft model, robust loss); with the
    torque-noise weight parametric as well (the errors-in-variables combination) the Python solver's running knots
    are coupled, 'auto' runs the compiled solver (whose knots carry Rw), and both give the same finite estimates."""
    base = {"noise.accelerometer_realised": True}
    bad = [
        ({"robust.loss": "huber"}, "robust.loss"),
        ({"dynamics.model": "soft", "actuator.enabled": False}, "dynamics.model"),
    ]
    for extra, text in bad:
        with pytest.raises(ConfigError, match=f"noise.accelerometer_realised.*{text}"):
            node_config({**base, **extra, "noise.joint_torque_weight": "frozen"})
    over = {
        **base,
        "noise.realised_standing_time": 0.0,  # every interval (the gate: test_realised_accelerometer_only_standing)
        "noise.joint_torque_weight": "parametric",
        "estimator.window": 0.06,
        "estimator.tick_period": 0.02,
    }
    feed = SensorFeed(node_config({**over, "solver.backend": "python"}))
    out = first_estimates(feed, 3)
    est = feed.estimator
    assert type(est.solver).__name__ == "MCOESolver" and all(e.is_finite() for e in out)
    knots = est.solver.problem.knots
    assert all(k.coupled for k in knots[:-1]) and not knots[-1].coupled
    assert all(np.any(k.Rw) for k in knots[:-1])
    if not compiled.available():
        return
    assert compiled.unsupported(knots[0].model) is None
    cfeed = SensorFeed(node_config(over))
    cout = first_estimates(cfeed, 3)
    solver = cfeed.estimator.solver
    assert type(solver).__name__ == "CompiledSolver" and all(e.is_finite() for e in cout)
    assert all(np.any(solver._cpp.knot_data(k).Rw) for k in range(solver._cpp.N))
    for e, ce in zip(out, cout, strict=True):
        np.testing.assert_allclose(ce.payload_pi, e.payload_pi, rtol=1e-5, atol=1e-8)


def test_realised_accelerometer_only_standing():
    """noise.realised_standing_time (default 0.1 s): an interval has the realised accelerometer only when its first
    knot has every foot down for that long (stance times; its contacts without them), whatever the other flags; the
    models are those of the plain cache otherwise (same contact set, same pseudo-measurements); 0 = every interval;
    on by default."""
    assert (
        EstimatorConfig().noise.realised_standing_time == 0.1 and EstimatorConfig().noise.accelerometer_realised is True
    )
    feet4 = (True,) * 4
    flags = [feet4] * 12
    flags[3] = (True, False, True, True)  # a foot in the air
    knots = [GridKnot(0.002 * i, None, None, f, np.zeros((4, 3))) for i, f in enumerate(flags)]
    for kn in knots:
        kn.stance_time = tuple(0.0 if not c else 0.2 for c in kn.contacts)
    knots[4].stance_time = (0.2, 0.0, 0.2, 0.2)  # it has just landed
    knots[5].stance_time = (0.2, 0.05, 0.2, 0.2)
    knots[6].stance_time = (0.2, 0.1, 0.2, 0.2)  # down for exactly the standing time
    knots[8].settled = (True, False, True, True)  # down long enough though not loaded: coupled
    knots[10].stance_time = None  # not known: its contacts
    builder = Estimator(EstimatorConfig(noise=NoiseConfig(accelerometer_realised=True))).builder
    running, terminal = builder.phase_models(knots, None)
    assert [i for i, m in enumerate(running) if not m.noise_coupled] == [3, 4, 5]
    assert not terminal.noise_coupled
    plain = Estimator(EstimatorConfig(noise=NoiseConfig(accelerometer_realised=False))).builder
    assert not plain.accelerometer_realised
    ref, _ = plain.phase_models(knots, None)
    for m, r in zip(running, ref, strict=True):
        assert (m.contacts, m.impulse, len(m.measurements)) == (r.contacts, r.impulse, len(r.measurements))
    always = Estimator(EstimatorConfig(noise=NoiseConfig(accelerometer_realised=True, realised_standing_time=0.0)))
    assert all(m.noise_coupled for m in always.builder.phase_models(knots, None)[0])
    assert node_config({"noise.realised_standing_time": 0.3}).estimator.noise.realised_standing_time == 0.3
    with pytest.raises(ConfigError, match="noise.realised_standing_time"):
        node_config({"noise.realised_standing_time": -0.1})
    # a window that starts with no foot down long enough: no coupled knot
    over = {"noise.accelerometer_realised": True, "noise.realised_standing_time": 5.0, "estimator.window": 0.06}
    feed = SensorFeed(node_config({**over, "estimator.tick_period": 0.02, "solver.backend": "python"}))
    first_estimates(feed, 2)
    est = feed.estimator
    assert type(est.solver).__name__ == "MCOESolver"
    assert not any(k.coupled for k in est.solver.problem.knots)


def _eiv_mass(coupled: bool, parametric: bool, seed: int, n: int = 300, sigma_u: float = 1.0) -> float:
    """Mass estimate of a point mass (2 kg) whose reported force has white noise sigma_u (errors in variables), with
    the velocity noise it causes, Σ_v = dt² σ_u² / m² + floor² (weight frozen at each linearisation, or parametric),
    and an accelerometer (σ 0.5 m/s²) of the model's or of the realised acceleration."""
    sigma_a, floor = 0.5, 1e-4
    rng = np.random.default_rng(seed)
    m_true = 2.0
    force, xs = _trajectory(n, m_true)
    holder = []

    def noise_model(knot):
        return np.array([[1.0 / (DT**2 * sigma_u**2 / holder[0].pi[0] ** 2 + floor**2)]])

    def noise_derivative(knot):
        return np.full((1, 1, 1), -2.0 * DT**2 * sigma_u**2 / holder[0].pi[0] ** 3)

    model = PointMassImu(coupled, sigma_a)
    prior = ArrivalPrior.independent(xs[0], np.array([1e2, 1e2]), 2, np.log([1.5]), 1e-4)
    prob = EstimationProblem(
        [model] * n,
        model,
        prior,
        [PositiveParameters(1)],
        np.ones(1),
        [1],
        noise_model,
        None,
        noise_derivative if parametric else None,
    )
    holder.append(prob)
    for k in range(n + 1):
        z = [xs[k][0] + SIGMA_P * rng.standard_normal(), force[k] / m_true + sigma_a * rng.standard_normal()]
        prob.set_knot(k, u=np.array([force[k] + sigma_u * rng.standard_normal()]), z=np.array(z))
    solver = MCOESolver(prob, SolverOptions(max_iter=60))
    assert solver.solve([x.copy() for x in xs], [np.zeros(1)] * n, np.log([1.5])).converged
    return float(np.exp(solver.theta[0]))


def test_errors_in_variables_need_both_the_realised_accelerometer_and_the_parametric_weight():
    """A noisy reported force biases the mass up (a heavier body makes the noisy input matter less) through two
    channels: the process noise (its weight frozen in θ) and the accelerometer (its prediction carries the input
    noise that the states' noise absorbs). Only both fixes together are unbiased (docs/realism.md, session 15:
    the Go1 sways' vertical CoM behaves the same way). Six seeds, 300 knots each."""
    means = {}
    for coupled in (False, True):
        for parametric in (False, True):
            means[coupled, parametric] = float(np.mean([_eiv_mass(coupled, parametric, s) for s in range(6)]))
    print("mass means (coupled, parametric):", {k: round(v, 3) for k, v in means.items()})
    assert abs(means[True, True] - 2.0) < 0.06
    for key in ((False, False), (False, True), (True, False)):
        assert means[key] > 2.1, key
