"""The compiled errors-in-variables option against the Python reference on identical problems: the accelerometer of
the realised acceleration (its residual depends on the interval's velocity noise, ``noise.accelerometer_realised``)
and the parametric torque-noise weight (the noise cost differentiated in θ, ``noise.joint_torque_weight:
parametric``), alone and together, in the interval model (Rw), the noise covariance's derivative, one solver step,
a few iterations, the marginal prior with its consider sensitivity, the terminal covariance and a shift."""

from __future__ import annotations

import numpy as np
import pytest

from mcoe_ros.multibody import compiled
from mcoe_ros.multibody.actuator import ActuatorModel, ParameterLayout
from mcoe_ros.multibody.interval import IntervalModelCache, MultibodyIntervalModel
from mcoe_ros.multibody.measurements import (
    ImuAngularVelocity,
    ImuOrientation,
    ImuSpecificForce,
    JointPosition,
    JointVelocity,
)
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.ocp.problem import EstimationProblem
from mcoe_ros.ocp.solver import MCOESolver, SolverOptions
from mcoe_ros.testing.compare import assert_close
from mcoe_ros.testing.go1 import go1_velocity_window, payload_pi, perturbed, standing_state

pytestmark = pytest.mark.skipif(not compiled.available(), reason=f"extension not built: {compiled.IMPORT_ERROR}")

TOL = 1e-9
FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")


def _close(a, b, tol=TOL) -> float:
    return assert_close(a, b, tol)


@pytest.fixture(scope="module")
def robot():
    return RobotModel()


def _cache(robot, realised: bool, biases: bool):
    act = ActuatorModel(robot)
    layout = ParameterLayout(n_actuator=act.n_params, gyro_bias=biases, acc_bias=biases)
    meas = [
        JointPosition(robot, std=1e-3),
        JointVelocity(robot, std=0.05),
        ImuAngularVelocity(robot, std=0.01, bias=layout.gyro),
        ImuOrientation(robot, std=0.01),
        ImuSpecificForce(robot, std=0.1, bias=layout.acc, realised=realised),
    ]
    return IntervalModelCache(robot, 2e-3, meas, foot_velocity_std=0.02, actuator=act, layout=layout), layout


def _pi(layout, rng) -> np.ndarray:
    pi = np.zeros(layout.size)
    pi[:10] = payload_pi()
    pi[layout.actuator] = rng.uniform(0.01, 0.1, layout.n_actuator)
    if layout.gyro is not None:
        pi[layout.gyro] = 0.01 * rng.standard_normal(3)
        pi[layout.acc] = 0.1 * rng.standard_normal(3)
    return pi


def _linearised(robot, model, layout, seed: int):
    """The C++ counterpart of ``model`` and both models' data linearised at one random state, pi, u and z:
    returns (C++ model, Python data, C++ data, x)."""
    cmodel = compiled.compiled_interval_model(model)
    rng = np.random.default_rng(seed)
    d, cd = model.create_data(), cmodel.create_data()
    x = standing_state(robot, rng)
    x[robot.nq :] = 0.3 * rng.standard_normal(robot.nv)
    pi = _pi(layout, rng)
    d.u[:] = cd.u = 3.0 * rng.standard_normal(robot.nj)
    d.z[:] = cd.z = rng.standard_normal(model.nz)
    model.calc_diff(d, x, pi)
    cmodel.calc_diff(cd, x, pi)
    return cmodel, d, cd, x


@pytest.mark.parametrize("biases", [False, True], ids=["consider", "estimated-biases"])
@pytest.mark.parametrize("impulse", [(), ("FL_foot", "RR_foot")], ids=["stance", "impulse"])
def test_realised_accelerometer_interval_model_matches_python(robot, impulse, biases):
    """r, Rx, Rp and Rw = ∂r/∂n_v of the realised accelerometer (Python: Rw's velocity columns) to 1e-9; a plain
    model has no Rw; an accelerometer off the floating base is refused."""
    cache, layout = _cache(robot, True, biases)
    model = cache[FEET, impulse, FEET[:2]]
    assert model.noise_coupled
    cmodel, d, cd, _ = _linearised(robot, model, layout, 3)
    assert cmodel.noise_coupled
    for name in ("xnext", "r", "Rx", "Rp"):
        _close(getattr(cd, name), getattr(d, name))
    nv = robot.nv
    assert np.any(d.Rw[:, nv:]) and not np.any(d.Rw[:, :nv])
    _close(cd.Rw, d.Rw[:, nv:])
    plain = compiled.compiled_interval_model(_cache(robot, False, biases)[0][FEET, impulse, FEET[:2]])
    assert not plain.noise_coupled and plain.create_data().Rw.size == 0
    foot = robot.foot_frame_ids[0]
    with pytest.raises(ValueError, match="floating base"):
        cmodel.add_measurement("specific_force", foot, np.eye(3), -1, True, True)


@pytest.mark.parametrize(
    "contacts,impulse", [((), ()), (FEET, ()), (FEET, ("FL_foot", "RR_foot"))], ids=["flight", "stance", "impulse"]
)
def test_torque_noise_covariance_derivative_matches_python(robot, contacts, impulse):
    """∂Q/∂π of the torque-noise covariance (payload inertia and rotor inertia columns; zero for friction and
    biases) = the Python reference's to 1e-9."""
    cache, layout = _cache(robot, False, True)
    model = cache[contacts, impulse, ()]
    cmodel, d, cd, x = _linearised(robot, model, layout, 8)
    std = np.full(robot.nj, 0.3)
    ref = model.dynamics.velocity_noise_covariance_derivative(d.dyn, std)  # (npi, nv, nv)
    out = np.asarray(cmodel.velocity_noise_covariance_derivative(cd, x[: robot.nq], std))
    nv = robot.nv
    got = np.stack([out[:, j].reshape(nv, nv, order="F") for j in range(model.npi)])
    scale = np.abs(ref).max()
    _close(got / scale, ref / scale)
    rotor = layout.actuator.start + 2 * (layout.n_actuator // 3)
    assert np.any(ref[:10]) and np.any(ref[rotor]) and not np.any(ref[layout.acc])


def _eiv_problem(realised: bool, parametric: bool, mixed: bool, n: int = 20, seed: int = 9):
    """A velocity-noise Go1 window with the torque-noise model (0.3 N m), the realised accelerometer on every interval
    (``mixed``: on every other one, the others the plain model) and the parametric weight as asked."""
    base, xs_true, pi_true = go1_velocity_window(n, seed=seed, noise=0.5, realised=realised)
    torque_std = np.full(12, 0.3)
    coupled = base.knots[0].model
    plain = MultibodyIntervalModel(
        coupled.robot,
        coupled.contacts,
        coupled.dt,
        [ImuSpecificForce(coupled.robot) if isinstance(m, ImuSpecificForce) else m for m in coupled.measurements],
    )
    running = [plain if (mixed and k % 2) else coupled for k in range(n)]

    def noise_model(knot):
        cov = knot.model.dynamics.velocity_noise_covariance(knot.data.dyn, torque_std, 0.0)
        return np.linalg.inv(cov + np.linalg.inv(knot.W_base))

    def noise_derivative(knot):
        return knot.model.dynamics.velocity_noise_covariance_derivative(knot.data.dyn, torque_std)

    prob = EstimationProblem(
        running,
        coupled,
        base.prior,
        base.param,
        np.full(base.nw, 1e4),
        base.noise_dims,
        noise_model,
        noise_derivative=noise_derivative if parametric else None,
    )
    for k, knot in enumerate(base.knots):
        prob.set_knot(k, knot.data.u, knot.data.z)
    return prob, xs_true, pi_true, torque_std


def _guess(prob, xs, rng):
    st = prob.state
    xs = [st.integrate(x, 1e-3 * rng.standard_normal(st.ndx)) for x in xs]
    ws = [1e-3 * rng.standard_normal(prob.nw) for _ in range(prob.N)]
    return xs, ws


CASES = [(True, False, False), (False, True, False), (True, True, False), (True, True, True)]
IDS = ["realised", "parametric", "both", "both-mixed"]


@pytest.mark.parametrize("realised,parametric,mixed", CASES, ids=IDS)
def test_step_iterations_marginal_and_covariance_match_python(realised, parametric, mixed):
    """One step (cost after the noise refresh, dx, dw, dθ, the expected decrease), the noise cost's θ terms, four
    iterations (steps, θ, states, cost), the marginal priors with their consider sensitivity and the terminal
    covariance: compiled = Python."""
    prob, xs_true, pi_true, torque_std = _eiv_problem(realised, parametric, mixed)
    assert any(k.coupled for k in prob.knots) == realised
    xs, ws = _guess(prob, xs_true, np.random.default_rng(10))
    theta0 = prob.param.theta(perturbed(pi_true, 1.2))
    py = MCOESolver(prob, SolverOptions())
    py.set_guess(xs, ws, theta0)
    cost = prob.calc_diff(py.xs, py.ws, py.theta) + prob.refresh_noise(py.ws)
    _, d1, d2 = py.compute_direction(1e-8)
    cs = compiled.CompiledSolver(prob, SolverOptions(), torque_noise=torque_std, parametric_noise=parametric)
    cs.set_guess(xs, ws, theta0)
    _close(cs.solve(max_iter=0).cost, cost)
    for k in (0, 3, prob.N - 1):
        _close(cs.problem.knots[k].W, prob.knots[k].W)
        terms = cs._cpp.knot_noise_terms(k)
        assert (terms is not None) == parametric
        if parametric:
            nd = prob.knots[k]
            scale = max(np.abs(nd.Lwth).max(), np.abs(nd.lth).max())
            for got, ref in zip(terms[:3], (nd.lth, nd.Lwth, nd.Lthth), strict=True):
                _close(np.asarray(got) / scale, ref / scale, 1e-8)
    cd1, cd2, _ = cs._cpp.compute_direction(1e-8)
    scale = np.abs(py.dx).max()
    _close(cs.dx / scale, py.dx / scale)
    _close(cs.dw / scale, py.dw / scale)
    _close(cs.dtheta, py.dtheta, 1e-8)
    _close([cd1, cd2], [d1, d2])
    res = MCOESolver(prob, SolverOptions(max_iter=4)).solve(xs, ws, theta0)
    cres = cs.solve(xs, ws, theta0, max_iter=4)
    assert [lg.step for lg in cres.log] == [lg.step for lg in res.log]
    assert all(lg.step > 0 for lg in res.log)
    _close(cres.theta, res.theta, 1e-8)
    _close(np.array(cres.xs), np.array(res.xs), 1e-8)
    _close(cres.cost, res.cost, 1e-8)
    # the marginal priors and the covariance at the solves' last linearisation (the Python solver of `res`)
    py = MCOESolver(prob, SolverOptions(max_iter=4))
    py.solve(xs, ws, theta0)
    for k in (1, 6, prob.N):
        p_ref = py.marginal_prior(k, relinearize=False)
        p = cs.marginal_prior(k, relinearize=False)
        scale = np.abs(p_ref.hessian).max()
        _close(p.hessian / scale, p_ref.hessian / scale, 1e-8)
        _close(p.gradient / scale, p_ref.gradient / scale, 1e-8)
        _close(p.sensitivity / scale, p_ref.sensitivity / scale, 1e-8)
    _close(cs.terminal_covariance(), py.terminal_covariance(), 1e-7)
    sens = py.consider_sensitivity
    _close(cs.consider_sensitivity / np.abs(sens).max(), sens / np.abs(sens).max(), 1e-7)


def test_the_options_change_the_compiled_solution():
    """Each option changes the compiled estimate (the terms are not silently dropped)."""
    thetas = []
    for realised, parametric in ((False, False), (True, False), (False, True)):
        prob, xs_true, pi_true, torque_std = _eiv_problem(realised, parametric, False)
        xs, ws = _guess(prob, xs_true, np.random.default_rng(10))
        cs = compiled.CompiledSolver(prob, SolverOptions(), torque_noise=torque_std, parametric_noise=parametric)
        thetas.append(cs.solve(xs, ws, prob.param.theta(perturbed(pi_true, 1.2)), max_iter=4).theta)
    assert np.abs(thetas[1] - thetas[0]).max() > 1e-6 and np.abs(thetas[2] - thetas[0]).max() > 1e-6


def test_shift_with_coupled_and_parametric_knots_matches_python():
    """Receding horizon by 3 onto a coupled and a plain interval: the marginal prior (coupled measurement and
    noise θ terms of the dropped knots), the rolled-out states and the next solve agree with the Python reference."""
    prob, xs_true, pi_true, torque_std = _eiv_problem(True, True, True, n=24, seed=2)
    xs, ws = _guess(prob, xs_true, np.random.default_rng(6))
    theta0 = prob.param.theta(perturbed(pi_true, 1.1))
    opts = SolverOptions(max_iter=3)
    py = MCOESolver(prob, opts)
    cs = compiled.CompiledSolver(prob, opts, torque_noise=torque_std, parametric_noise=True)
    py.solve(xs, ws, theta0)
    cs.solve(xs, ws, theta0)
    coupled, plain = prob.knots[0].model, prob.knots[1].model
    running = [plain, coupled, coupled]
    inputs = [(prob.knots[j].data.u, prob.knots[j].data.z) for j in (3, 4, 5)]
    terminal_input = (prob.knots[6].data.u, prob.knots[6].data.z)
    info = np.full(prob.nw, 1e4)
    cs.shift(3, running, coupled, inputs, terminal_input, info)
    py.shift(3, running, coupled, inputs, terminal_input, info)
    pp, cp = py.problem.prior, cs.problem.prior
    scale = np.abs(pp.hessian).max()
    _close(cp.hessian / scale, pp.hessian / scale, 1e-8)
    _close(cp.gradient / scale, pp.gradient / scale, 1e-8)
    _close(np.array(cs.xs), np.array(py.xs))
    res, cres = py.solve(max_iter=3), cs.solve(max_iter=3)
    _close(cres.theta, res.theta, 1e-8)
    _close(np.array(cres.xs), np.array(res.xs), 1e-8)
