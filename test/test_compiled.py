"""The compiled hot path (mcoe_ros._mcoe) against the Python reference on identical problems: interval models of every
phase kind (xnext, r and every Jacobian), the parametrizations, one solver step, a converged solve, the receding
horizon shift with its marginal prior, the terminal covariance and the stop request."""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from mcoe_ros.multibody import compiled
from mcoe_ros.multibody.actuator import ActuatorModel, ParameterLayout
from mcoe_ros.multibody.inertia import ExpEigenvalue, LogCholesky, OffsetParametrization, PlainPi
from mcoe_ros.multibody.interval import IntervalModelCache, MultibodyIntervalModel
from mcoe_ros.multibody.measurements import (
    ImuAngularVelocity,
    ImuOrientation,
    ImuSpecificForce,
    JointPosition,
    JointVelocity,
)
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.ocp.problem import (
    EstimationProblem,
    EuclideanParameters,
    PositiveParameters,
    StackedParametrization,
)
from mcoe_ros.ocp.solver import MCOESolver, SolverOptions
from mcoe_ros.testing.compare import assert_close
from mcoe_ros.testing.go1 import go1_velocity_window, go1_window, payload_pi, perturbed, standing_state

pytestmark = pytest.mark.skipif(not compiled.available(), reason=f"extension not built: {compiled.IMPORT_ERROR}")

TOL = 1e-9
#: measured on the sample bag (27 estimates, 1.5 s): relative differences <= 4.4e-9 (position), 1.6e-7 (theta),
#: 1.3e-6 (payload covariance, the pseudo-inverse of a poorly conditioned information): the solves agree to ~1e-9
#: per step and drift slightly over warm-started ticks; since the compiled solver linearises after a step on the
#: accepted trial's data (its contact dynamics are not evaluated again) the two backends' proximal contact solves run
#: on different data objects, which moved theta's difference from 1.4e-8 to 1.6e-7 and the covariance's from 2.3e-7
REPLAY_TOL = 2e-6
#: the replay with the actuator model (on by default) is compared in the estimate's own uncertainty: its 19
#: parameters (payload + 9 actuator log-parameters) make the payload's inertia directions poorly conditioned, and the
#: ~1e-9 per-step differences of the two backends (the compiled linearisation after a step reuses the accepted
#: trial's proximal contact solve) grow over the 10 cold iterations of the first tick and the warm ticks to, measured
#: on the sample's 27 estimates: states <= 1.2e-5 (relative), payload pi 0.042 sigma (Mahalanobis in the Python
#: estimate's covariance), payload standard deviations within 1.9 %, pose covariance 6.2e-8 (relative).
#: (states, payload Mahalanobis distance, payload sigma ratio, pose covariance)
REPLAY_ACTUATOR_TOL = (5e-5, 0.1, 0.05, 1e-6)


def _close(a, b, tol=TOL) -> float:
    return assert_close(a, b, tol)


@pytest.fixture(scope="module")
def robot():
    return RobotModel()


def _models(robot, actuator: bool, biases: bool | str):
    """``biases``: True both IMU biases in pi, "gyro" the gyro's alone (``imu_bias.accelerometer`` false)."""
    act = ActuatorModel(robot) if actuator else None
    layout = ParameterLayout(n_actuator=act.n_params if act else 0, gyro_bias=bool(biases), acc_bias=biases is True)
    meas = [
        JointPosition(robot, std=1e-3),
        JointVelocity(robot, std=0.05),
        ImuAngularVelocity(robot, std=0.01, bias=layout.gyro),
        ImuOrientation(robot, std=0.01),
        ImuSpecificForce(robot, std=0.1, bias=layout.acc),
    ]
    return IntervalModelCache(robot, 2e-3, meas, foot_velocity_std=0.02, actuator=act, layout=layout), layout


def _pi(layout: ParameterLayout, rng) -> np.ndarray:
    pi = np.zeros(layout.size)
    pi[:10] = payload_pi()
    if layout.actuator is not None:
        pi[layout.actuator] = rng.uniform(0.01, 0.1, layout.n_actuator)
    if layout.gyro is not None:
        pi[layout.gyro] = 0.01 * rng.standard_normal(3)
    if layout.acc is not None:
        pi[layout.acc] = 0.1 * rng.standard_normal(3)
    return pi


PHASES = [
    ("free", (), (), ()),
    ("1 foot", ("FL_foot",), (), ("FL_foot",)),
    ("2 feet", ("FL_foot", "RR_foot"), (), ("FL_foot", "RR_foot")),
    ("3 feet", ("FL_foot", "FR_foot", "RL_foot"), (), ("FR_foot",)),
    ("4 feet", ("FL_foot", "FR_foot", "RL_foot", "RR_foot"), (), ("FL_foot", "FR_foot", "RL_foot", "RR_foot")),
    ("impulse", ("FL_foot", "FR_foot", "RL_foot", "RR_foot"), ("FL_foot", "FR_foot", "RL_foot", "RR_foot"), ()),
    ("impulse 2", ("FL_foot", "RR_foot"), ("FL_foot", "RR_foot"), ()),
    # a foot listed twice: J M^-1 J^T is singular, the proximal solve and its derivative stay finite
    ("redundant", ("FL_foot", "FL_foot", "FR_foot", "RL_foot", "RR_foot"), (), ("FL_foot", "FR_foot")),
]


def _match(robot, model, layout, rng) -> tuple:
    """Python ``model`` and its C++ counterpart on two random states on the same datas (no stale workspace): xnext,
    r, Fx, Fp, Rx, Rp of calc_diff and xnext, r of calc to 1e-9; returns the last (data, x, pi)."""
    cmodel = compiled.compiled_interval_model(model)
    d, cd = model.create_data(), cmodel.create_data()
    for _ in range(2):
        x = standing_state(robot, rng)
        x[robot.nq :] = 0.3 * rng.standard_normal(robot.nv)
        pi = _pi(layout, rng)
        d.u[:] = cd.u = rng.standard_normal(robot.nj) * 3.0
        d.z[:] = cd.z = rng.standard_normal(model.nz)
        model.calc_diff(d, x, pi)
        cmodel.calc_diff(cd, x, pi)
        for name in ("xnext", "r", "Fx", "Fp", "Rx", "Rp"):
            _close(getattr(cd, name), getattr(d, name))
        model.calc(d, x, pi)
        cmodel.calc(cd, x, pi)
        _close(cd.xnext, d.xnext)
        _close(cd.r, d.r)
    return d, x, pi


@pytest.mark.parametrize(
    "actuator,biases", [(False, False), (True, False), (False, True), (True, True), (True, "gyro")]
)
@pytest.mark.parametrize("phase", PHASES, ids=[p[0] for p in PHASES])
def test_interval_model_matches_python(robot, phase, actuator, biases):
    """xnext, r, Fx, Fp, Rx, Rp of calc_diff and xnext, r of calc, for every phase kind, to 1e-9."""
    _, contacts, impulse, measured = phase
    cache, layout = _models(robot, actuator, biases)
    _match(robot, cache[contacts, impulse, measured], layout, np.random.default_rng(7))


HEIGHT_PHASES = [
    PHASES[2],
    PHASES[4],
    ("impulse", ("FL_foot", "FR_foot", "RL_foot", "RR_foot"), ("FL_foot", "FR_foot"), ("RL_foot", "RR_foot")),
]


@pytest.mark.parametrize("phase", HEIGHT_PHASES, ids=[p[0] for p in HEIGHT_PHASES])
def test_base_height_matches_python(robot, phase):
    """The leg-odometry base height of the measured stance feet (noise.stance_foot_height; z random): C++ = Python
    to 1e-9 on stance and impulse knots."""
    _, contacts, impulse, measured = phase
    cache, layout = _models(robot, True, False)
    heights = IntervalModelCache(
        robot,
        2e-3,
        cache.measurements,
        foot_velocity_std=0.02,
        foot_height_std=0.01,
        **cache.options,
    )
    model = heights[contacts, impulse, measured]
    assert sum(type(m).__name__ == "BaseHeight" for m in model.measurements) == len(measured)
    _match(robot, model, layout, np.random.default_rng(8))


@pytest.mark.parametrize("actuator", [False, True])
def test_damped_landing_matches_python(robot, actuator):
    """A landing over time (dynamics.landing_damping): damped contacts (a subset of the stance feet, with a
    zero-velocity foot measurement on another) give the Python model's results to 1e-9, and differ from the
    undamped model's."""
    act = ActuatorModel(robot) if actuator else None
    layout = ParameterLayout(n_actuator=act.n_params if act else 0)
    meas = [JointPosition(robot, std=1e-3), JointVelocity(robot, std=0.05), ImuSpecificForce(robot, std=0.1)]
    cache = IntervalModelCache(robot, 2e-3, meas, foot_velocity_std=0.02, actuator=act, layout=layout, kd=25.0)
    feet = tuple(robot.foot_names)
    rng = np.random.default_rng(3)
    for damped in ((feet[0], feet[3]), feet, (feet[1],)):
        measured = (feet[2],) if feet[2] not in damped else ()
        model = cache[feet, (), measured, damped]
        assert model.dynamics.damped == damped
        d, x, pi = _match(robot, model, layout, rng)
        plain = cache[feet, (), measured]  # the same stance without damping
        dp = plain.create_data()
        dp.u[:], dp.z[:] = d.u, d.z
        plain.calc(dp, x, pi)
        assert np.abs(dp.xnext - d.xnext).max() > 1e-6  # the damping acts


def test_parametrizations_match_python():
    rng = np.random.default_rng(3)
    body = ExpEigenvalue().theta(payload_pi())
    parts = [
        ExpEigenvalue(),
        LogCholesky(),
        PlainPi(),
        OffsetParametrization(ExpEigenvalue(), 0.5 * payload_pi()),
        PositiveParameters(4),
        EuclideanParameters(3),
    ]
    param = StackedParametrization(parts)
    theta = np.concatenate([body, LogCholesky().theta(payload_pi()), payload_pi(), body, rng.standard_normal(7)])
    theta += 0.05 * rng.standard_normal(theta.size)
    cparam = compiled.compiled_parametrization(param)
    _close(cparam.pi(theta), param.pi(theta), 1e-12)
    _close(cparam.jacobian(theta), param.jacobian(theta), 1e-12)


def _perturbed_guess(prob, xs, rng):
    st = prob.state
    xs = [st.integrate(x, 1e-3 * rng.standard_normal(st.ndx)) for x in xs]
    ws = [1e-3 * rng.standard_normal(prob.nw) for _ in range(prob.N)]
    return xs, ws


def test_solver_step_matches_python():
    """Linearisation + Riccati + arrival + linear rollout: (dx, dw, dtheta) of one step from a perturbed guess."""
    prob, xs_true, pi_true = go1_velocity_window(20)
    xs, ws = _perturbed_guess(prob, xs_true, np.random.default_rng(1))
    theta0 = prob.param.theta(perturbed(pi_true, 1.3))
    for arrival in ("schur", "nullspace"):
        py = MCOESolver(prob, SolverOptions(arrival=arrival))
        py.set_guess(xs, ws, theta0)
        cost = prob.calc_diff(py.xs, py.ws, py.theta)
        _, d1, d2 = py.compute_direction(1e-8)
        cs = compiled.CompiledSolver(prob, SolverOptions(arrival=arrival))
        cs.set_guess(xs, ws, theta0)
        _close(cs._cpp.calc_diff(), cost)
        cd1, cd2, method = cs._cpp.compute_direction(1e-8)
        assert method == arrival
        scale = np.abs(py.dx).max()
        _close(cs.dx / scale, py.dx / scale)
        _close(cs.dw / scale, py.dw / scale)
        _close(cs.dtheta, py.dtheta)
        _close([cd1, cd2], [d1, d2])


@pytest.fixture(scope="module")
def solved():
    """Python and compiled solvers converged on the same noisy window from the same guess."""
    prob, xs_true, pi_true = go1_velocity_window(30, seed=4)
    xs, ws = _perturbed_guess(prob, xs_true, np.random.default_rng(5))
    theta0 = prob.param.theta(perturbed(pi_true, 1.2))
    opts = SolverOptions(max_iter=50)
    py = MCOESolver(prob, opts)
    res = py.solve(xs, ws, theta0)
    cs = compiled.CompiledSolver(prob, opts)
    cres = cs.solve(xs, ws, theta0)
    return prob, py, res, cs, cres


def test_converged_solve_matches_python(solved):
    prob, _, res, _, cres = solved
    assert res.converged and cres.converged, (res.status, cres.status)
    assert cres.iterations == res.iterations
    _close(cres.theta, res.theta)
    _close(cres.pi, res.pi)
    _close(np.array(cres.xs), np.array(res.xs))
    _close(np.array(cres.ws), np.array(res.ws))
    _close(cres.cost, res.cost)
    _close(
        cres.arrival_hessian / np.abs(res.arrival_hessian).max(),
        res.arrival_hessian / np.abs(res.arrival_hessian).max(),
    )
    assert [lg.step for lg in cres.log] == [lg.step for lg in res.log]


def test_terminal_covariance_and_marginal_prior_match_python(solved):
    prob, py, _, cs, _ = solved
    n = prob.N
    for k in (1, 7, n):
        p_ref = py.marginal_prior(k, relinearize=False)
        p = cs.marginal_prior(k, relinearize=False)
        scale = np.abs(p_ref.hessian).max()
        _close(p.hessian / scale, p_ref.hessian / scale)
        _close(p.gradient / scale, p_ref.gradient / scale)
        _close(p.sensitivity / scale, p_ref.sensitivity / scale)  # consider analysis (IMU biases)
        _close(p.x_bar, p_ref.x_bar)
    # the estimator's covariance of (x_N, theta) and its consider sensitivity
    _close(cs.terminal_covariance(), py.terminal_covariance(), 1e-7)
    sens_ref = py.consider_sensitivity
    _close(cs.consider_sensitivity / np.abs(sens_ref).max(), sens_ref / np.abs(sens_ref).max(), 1e-7)
    prior = py.marginal_prior(n, relinearize=False)
    hess = prior.linearize(prob.state, py.xs[n], py.theta)[2]
    knot = prob.knots[n]
    jr = np.hstack([knot.data.Rx, knot.Rth])
    ref = np.linalg.pinv(0.5 * (hess + hess.T + 2 * jr.T @ jr), rcond=1e-12, hermitian=True)
    cov = cs.terminal_covariance()
    _close(cov / np.abs(ref).max(), ref / np.abs(ref).max(), 1e-7)


def test_shift_matches_python():
    """Receding horizon by k = 3 with a recycled and a new phase model: prior, rolled-out states, next solve."""
    prob, xs_true, pi_true = go1_velocity_window(24, seed=2, noise=0.5)
    xs, ws = _perturbed_guess(prob, xs_true, np.random.default_rng(6))
    theta0 = prob.param.theta(perturbed(pi_true, 1.1))
    opts = SolverOptions(max_iter=3)
    py = MCOESolver(prob, opts)
    cs = compiled.CompiledSolver(prob, opts)
    py.solve(xs, ws, theta0)
    cs.solve(xs, ws, theta0)
    model = prob.knots[0].model
    other = MultibodyIntervalModel(model.robot, ("FL_foot", "FR_foot", "RL_foot"), model.dt, model.measurements)
    # same phase, one measurement less (as a stance foot's zero-velocity pseudo-measurement comes and goes)
    lighter = MultibodyIntervalModel(model.robot, model.contacts, model.dt, model.measurements[:-1], model.impulse)
    running = [lighter, other, model]
    inputs = [(prob.knots[-1].data.u, prob.knots[-1].data.z[: lighter.nz])] + [
        (prob.knots[j].data.u, prob.knots[j].data.z) for j in (4, 5)
    ]
    terminal_input = (prob.knots[6].data.u, prob.knots[6].data.z)
    info = np.full(prob.nw, 1e4)
    allocated = cs.timings["knots_allocated"]
    cs.shift(3, running, model, inputs, terminal_input, info)
    # the dropped knots' data are recycled where the model matches or differs only in its measurements (`lighter`,
    # reset): only `other`'s knot (another contact set) is allocated
    assert cs.timings["knots_allocated"] == allocated + 1
    py.shift(3, running, model, inputs, terminal_input, info)
    pp, cp = py.problem.prior, cs.problem.prior
    scale = np.abs(pp.hessian).max()
    _close(cp.hessian / scale, pp.hessian / scale)
    _close(cp.gradient / scale, pp.gradient / scale)
    _close(cp.x_bar, pp.x_bar)
    _close(np.array(cs.xs), np.array(py.xs))
    res, cres = py.solve(max_iter=3), cs.solve(max_iter=3)
    _close(cres.theta, res.theta, 1e-8)
    _close(np.array(cres.xs), np.array(res.xs), 1e-8)


def test_shift_after_covariance_reuses_the_solves_work():
    """The estimator's tick: solve without the convergence-only final direction, terminal covariance (which stores
    the marginal of every prefix), shift (prior from the stored marginal), warm solve whose first linearisation
    reuses the kept knots: the same prior, states and next solve as the Python reference doing it all afresh."""
    prob, xs_true, pi_true = go1_velocity_window(24, seed=3, noise=0.5)
    xs, ws = _perturbed_guess(prob, xs_true, np.random.default_rng(7))
    theta0 = prob.param.theta(perturbed(pi_true, 1.1))
    opts = SolverOptions(max_iter=2, final_direction=False)
    py = MCOESolver(prob, opts)
    cs = compiled.CompiledSolver(prob, opts)
    res, cres = py.solve(xs, ws, theta0), cs.solve(xs, ws, theta0)
    assert res.arrival_hessian is None and cres.arrival_hessian is None  # no direction at the returned point
    assert not res.converged and not cres.converged and res.iterations == cres.iterations == 2
    _close(cres.theta, res.theta)
    cs.terminal_covariance()
    n, k = prob.N, 4
    for j in (1, k, n):  # the stored marginals are the recursion's (the Python reference recomputes them)
        p_ref, p = py.marginal_prior(j, relinearize=False), cs.marginal_prior(j, relinearize=False)
        scale = np.abs(p_ref.hessian).max()
        _close(p.hessian / scale, p_ref.hessian / scale)
        _close(p.gradient / scale, p_ref.gradient / scale)
    model = prob.knots[0].model
    running = [model] * k
    inputs = [(prob.knots[-1].data.u, prob.knots[-1].data.z)] + [
        (prob.knots[j].data.u, prob.knots[j].data.z) for j in range(3, 3 + k - 1)
    ]
    terminal_input = (prob.knots[8].data.u, prob.knots[8].data.z)
    cs.shift(k, running, model, inputs, terminal_input)
    py.shift(k, running, model, inputs, terminal_input)
    pp, cp = py.problem.prior, cs.problem.prior
    scale = np.abs(pp.hessian).max()
    _close(cp.hessian / scale, pp.hessian / scale)
    _close(cp.gradient / scale, pp.gradient / scale)
    _close(cp.sensitivity / scale, pp.sensitivity / scale)  # carried by the shift (consider analysis)
    _close(np.array(cs.xs), np.array(py.xs))
    for budget in (0, 1):  # 0: the reused first linearisation alone (cost), 1: a full warm step
        res, cres = py.solve(max_iter=budget), cs.solve(max_iter=budget)
        _close(cres.cost, res.cost)
        _close(cres.theta, res.theta, 1e-8)
        _close(np.array(cres.xs), np.array(res.xs), 1e-8)
    # the Python-facing calc_diff always relinearises: the same cost as the reused linearisation
    _close(cs._cpp.calc_diff(), res.cost)
    # the consider sensitivity of the shifted window, its prior's part included
    _close(cs.terminal_covariance(), py.terminal_covariance(), 1e-7)
    sens_ref = py.consider_sensitivity
    _close(cs.consider_sensitivity / np.abs(sens_ref).max(), sens_ref / np.abs(sens_ref).max(), 1e-7)


def test_threads_give_identical_results():
    """The knot loops (linearisations, line-search trials) run on 1 or 3 OpenMP threads with bit-identical results:
    every knot is evaluated on its own data and the sums over knots are taken in knot order afterwards."""
    prob, xs_true, pi_true = go1_velocity_window(24, seed=3, noise=0.5)
    xs, ws = _perturbed_guess(prob, xs_true, np.random.default_rng(8))
    theta0 = prob.param.theta(perturbed(pi_true, 1.2))
    opts = SolverOptions(max_iter=4, final_direction=False)
    model = prob.knots[0].model
    inputs = [(prob.knots[j].data.u, prob.knots[j].data.z) for j in (1, 2, 3)]
    terminal_input = (prob.knots[4].data.u, prob.knots[4].data.z)
    out = []
    for threads in (1, 3):
        cs = compiled.CompiledSolver(prob, opts, threads=threads)
        assert cs._cpp.threads == threads
        res = cs.solve(xs, ws, theta0)
        cov = cs.terminal_covariance()
        cs.shift(3, [model] * 3, model, inputs, terminal_input)
        warm = cs.solve(max_iter=1)
        out.append((res.cost, [lg.step for lg in res.log], np.array(res.xs), res.theta, cov, warm.cost, warm.theta))
    for a, b in zip(out[0], out[1], strict=True):
        np.testing.assert_array_equal(a, b)


def test_knot_threads_auto():
    """0 = auto: 2 threads on a machine with at least 4 usable cores, else 1 (offline, a replay: with at least 2); a
    requested count is kept."""
    cores = len(os.sched_getaffinity(0))
    assert compiled.knot_threads(3) == compiled.knot_threads(3, offline=True) == 3
    assert compiled.knot_threads(0) == (2 if cores >= 4 else 1)
    assert compiled.knot_threads(0, offline=True) == (2 if cores >= 2 else 1)
    prob, _, _ = go1_velocity_window(3)
    assert compiled.CompiledSolver(prob, threads=0)._cpp.threads == compiled.knot_threads(0)


def test_request_stop():
    """A pending stop request ends the solve before its first line search; clear_stop re-enables solving."""
    prob, xs_true, pi_true = go1_velocity_window(10)
    cs = compiled.CompiledSolver(prob, SolverOptions(max_iter=20))
    theta0 = prob.param.theta(perturbed(pi_true, 1.2))
    cs.request_stop()
    res = cs.solve(xs_true, None, theta0)
    assert res.status == "stopped" and res.iterations == 0
    np.testing.assert_array_equal(res.theta, theta0)
    cs.clear_stop()
    # from another thread while solving (the solve releases the GIL): with an unreachable stopping tolerance the
    # solve would run 500 iterations (or stop on the regularisation limit, after seconds)
    long = compiled.CompiledSolver(prob, SolverOptions(max_iter=500, tol_stop=-1.0))
    timer = threading.Timer(0.005, long.request_stop)
    timer.start()
    res = long.solve(xs_true, None, theta0)
    timer.join()
    assert res.status == "stopped" and res.iterations < 500, (res.status, res.iterations)


def test_unsupported_problems_are_named():
    prob, _, _, _ = go1_window(3)  # full process noise
    assert "velocities" in compiled.unsupported_problem(prob, SolverOptions())
    with pytest.raises(ValueError, match="does not support"):
        compiled.CompiledSolver(prob)


def _replay(backend: str, end: float = 1.5, actuator: bool = True) -> list:
    """The estimates of the sample bag's first ``end`` seconds with ``backend`` (the replay's feed loop), with or
    without the actuator model."""
    from mcoe_ros.io.bag import bag_topics, iter_messages
    from mcoe_ros.io.feed import SensorFeed
    from mcoe_ros.io.params import NodeConfig

    sample = str(Path(__file__).resolve().parents[1] / "mcoe_ros" / "data" / "go1_sample")
    base = NodeConfig()
    est = base.estimator
    act = replace(est.actuator, enabled=actuator)
    config = replace(base, estimator=replace(est, solver=replace(est.solver, backend=backend), actuator=act))
    feed = SensorFeed(config)
    topic = next(name for name, info in bag_topics(sample).items() if info.msgtype.endswith("LowState"))
    out, t0 = [], None
    for _, t_ns, msg in iter_messages(sample, [topic]):
        t0 = t_ns if t0 is None else t0
        if (t_ns - t0) * 1e-9 > end:
            break
        feed.low_state(msg, t_ns * 1e-9)
        out += feed.poll()
    assert isinstance(feed.estimator.solver, compiled.CompiledSolver) == (backend == "compiled")
    return out


@pytest.mark.parametrize("actuator", [False, True])
def test_sample_replay_same_estimates_with_both_backends(actuator):
    """The estimator on the sample bag (first 1.5 s: cold start, shifts with phase changes and landing impulses,
    torque-induced noise, payload + pose covariances) gives the same estimates with the compiled solver."""
    ref, est = _replay("python", actuator=actuator), _replay("compiled", actuator=actuator)
    assert len(est) == len(ref) >= 10
    for a, b in zip(est, ref, strict=True):
        assert a.t == b.t and a.contacts == b.contacts and a.solve["iterations"] == b.solve["iterations"]
        if actuator:  # in the estimate's uncertainty (see REPLAY_ACTUATOR_TOL)
            tol_x, tol_maha, tol_sigma, tol_cov = REPLAY_ACTUATOR_TOL
            for va, vb in (
                (a.position, b.position),
                (a.quat_xyzw, b.quat_xyzw),
                (a.linear_velocity, b.linear_velocity),
            ):
                _close(va, vb, tol_x)
            d = a.payload_pi - b.payload_pi
            assert float(np.sqrt(d @ np.linalg.pinv(b.payload_cov, rcond=1e-12, hermitian=True) @ d)) <= tol_maha
            sa, sb = np.sqrt(np.diag(a.payload_cov)), np.sqrt(np.diag(b.payload_cov))
            assert float(np.abs(sa / sb - 1.0).max()) <= tol_sigma
            _close(a.pose_cov / np.abs(b.pose_cov).max(), b.pose_cov / np.abs(b.pose_cov).max(), tol_cov)
            continue
        _close(a.position, b.position, REPLAY_TOL)
        _close(a.quat_xyzw, b.quat_xyzw, REPLAY_TOL)
        _close(a.linear_velocity, b.linear_velocity, REPLAY_TOL)
        _close(a.payload_pi, b.payload_pi, REPLAY_TOL)
        _close(a.theta, b.theta, REPLAY_TOL)
        _close(a.pose_cov / np.abs(b.pose_cov).max(), b.pose_cov / np.abs(b.pose_cov).max(), REPLAY_TOL)
        _close(a.payload_cov / np.abs(b.payload_cov).max(), b.payload_cov / np.abs(b.payload_cov).max(), REPLAY_TOL)


def test_spare_knots_stop_allocation_and_change_nothing():
    """A gait cycling through contact phases: the knots a shift drops and no new knot takes are kept as spares
    (``spare_knots``), so the later shifts of a phase take them instead of allocating; the results are bit-identical
    to a solver that keeps none (a used data of the same model gives a fresh data's results)."""
    prob, xs_true, pi_true = go1_velocity_window(24, seed=4, noise=0.5)
    xs, ws = _perturbed_guess(prob, xs_true, np.random.default_rng(9))
    theta0 = prob.param.theta(perturbed(pi_true, 1.1))
    opts = SolverOptions(max_iter=2, final_direction=False)
    model = prob.knots[0].model
    phases = [
        model,
        MultibodyIntervalModel(model.robot, ("FL_foot", "RR_foot"), model.dt, model.measurements),
        MultibodyIntervalModel(model.robot, ("FR_foot", "RL_foot"), model.dt, model.measurements),
    ]
    k = 3
    inputs = [(prob.knots[j].data.u, prob.knots[j].data.z) for j in range(1, 1 + k)]
    terminal_input = (prob.knots[5].data.u, prob.knots[5].data.z)
    runs = {}
    for spare in (-1, 0):
        cs = compiled.CompiledSolver(prob, opts)
        cs._cpp.spare_knots = spare
        cs.solve(xs, ws, theta0)
        out, allocated = [], []
        for i in range(1, 13):  # the window (8 shifts) drops another phase than the new one from shift 9 on
            before = cs.timings["knots_allocated"]
            cs.shift(k, [phases[i % 3]] * k, model, inputs, terminal_input)
            allocated.append(cs.timings["knots_allocated"] - before)
            res = cs.solve(max_iter=1)
            out.append((res.cost, res.theta, np.array(res.xs)))
        runs[spare] = (out, allocated, cs._cpp.spare_count)
    (kept, alloc_kept, n_spare), (none, alloc_none, n_none) = runs[-1], runs[0]
    for a, b in zip(kept, none, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    assert n_none == 0 and 0 < n_spare <= prob.N + 1
    # once the window has cycled (8 shifts) the dropped knots of every phase are spares: no shift allocates any more,
    # while without spares each of them allocates its new knots (another phase than the dropped one)
    assert sum(alloc_kept[8:]) == 0 and sum(alloc_none[8:]) == 4 * k


def _per_knot_problem(prob, infos, noise_model=None):
    """``prob`` (a velocity-noise window) with per-interval diagonal noise information ``infos`` (N of (nv,))."""
    knots = prob.knots
    out = EstimationProblem(
        [k.model for k in knots[:-1]],
        knots[-1].model,
        prob.prior,
        prob.param,
        list(infos),
        prob.noise_dims,
        noise_model,
    )
    for k, knot in enumerate(knots):
        out.set_knot(k, knot.data.u, knot.data.z)
    return out


def _loose_tight(n: int, nv: int, loose: set[int]) -> list[np.ndarray]:
    """Per-interval information: 0.02^-2 on every velocity, the joints 0.06^-2 on the intervals ``loose``."""
    infos = []
    for k in range(n):
        w = np.full(nv, 0.02**-2.0)
        if k in loose:
            w[6:] = 0.06**-2.0
        infos.append(w)
    return infos


@pytest.mark.parametrize("torque", [False, True])
def test_per_knot_noise_matches_python(torque):
    """Per-interval noise information (looser joint velocities on some intervals, as on a touch-down transient), with
    and without the torque-noise model on top of it: one step and four iterations agree with the Python reference,
    and every knot holds its own information."""
    base, xs_true, pi_true = go1_velocity_window(20, seed=9, noise=0.5)
    nv = base.nw
    infos = _loose_tight(base.N, nv, {3, 4, 5, 11})
    torque_std = np.full(12, 0.3) if torque else None

    def noise_model(knot):  # the estimator's (ProblemBuilder): torque noise on top of the interval's own
        cov = knot.model.dynamics.velocity_noise_covariance(knot.data.dyn, torque_std, 0.0)
        return np.linalg.inv(cov + np.linalg.inv(knot.W_base))

    prob = _per_knot_problem(base, infos, noise_model if torque else None)
    xs, ws = _perturbed_guess(prob, xs_true, np.random.default_rng(10))
    theta0 = prob.param.theta(perturbed(pi_true, 1.2))
    cs = compiled.CompiledSolver(prob, SolverOptions(), torque_noise=torque_std)
    for k in range(prob.N):
        np.testing.assert_array_equal(cs._cpp.knot_noise_info(k), infos[k])
    # one step: linearisation (+ the noise model's refresh) and direction
    py = MCOESolver(prob, SolverOptions())
    py.set_guess(xs, ws, theta0)
    cost = prob.calc_diff(py.xs, py.ws, py.theta) + prob.refresh_noise(py.ws)
    _, d1, d2 = py.compute_direction(1e-8)
    cs.set_guess(xs, ws, theta0)
    res0 = cs.solve(max_iter=0)
    _close(res0.cost, cost)
    for k in (0, 3, 11, prob.N - 1):
        _close(cs.problem.knots[k].W, prob.knots[k].W)
    assert torque == (not np.allclose(prob.knots[3].W, np.diag(infos[3])))
    cd1, cd2, _ = cs._cpp.compute_direction(1e-8)
    scale = np.abs(py.dx).max()
    _close(cs.dx / scale, py.dx / scale)
    _close(cs.dw / scale, py.dw / scale)
    _close([cd1, cd2], [d1, d2])
    # a few full iterations (line search, re-linearisation)
    res = MCOESolver(prob, SolverOptions(max_iter=4)).solve(xs, ws, theta0)
    cres = cs.solve(xs, ws, theta0, max_iter=4)
    assert [lg.step for lg in cres.log] == [lg.step for lg in res.log]
    _close(cres.theta, res.theta, 1e-8)
    _close(np.array(cres.xs), np.array(res.xs), 1e-8)
    _close(cres.cost, res.cost, 1e-8)
    # the loose intervals matter: the same problem with one information everywhere solves differently
    uniform = compiled.CompiledSolver(_per_knot_problem(base, [infos[0]] * base.N), torque_noise=torque_std)
    assert np.abs(uniform.solve(xs, ws, theta0, max_iter=4).cost - cres.cost) > 1e-6 * abs(cres.cost)


def test_shift_with_per_knot_noise_matches_python():
    """A shift whose new intervals each get their own information (a loose one between tight ones): the new knots
    hold it, the prior, states and next solve agree with the Python reference; without noise_info the new intervals
    take the last kept interval's information."""
    base, xs_true, pi_true = go1_velocity_window(24, seed=11, noise=0.5)
    nv = base.nw
    prob = _per_knot_problem(base, _loose_tight(base.N, nv, {20, 21, 22, 23}))
    xs, ws = _perturbed_guess(prob, xs_true, np.random.default_rng(12))
    theta0 = prob.param.theta(perturbed(pi_true, 1.1))
    opts = SolverOptions(max_iter=3)
    py, cs = MCOESolver(prob, opts), compiled.CompiledSolver(prob, opts)
    py.solve(xs, ws, theta0)
    cs.solve(xs, ws, theta0)
    model = prob.knots[0].model
    inputs = [(prob.knots[j].data.u, prob.knots[j].data.z) for j in (23, 4, 5)]
    terminal_input = (prob.knots[6].data.u, prob.knots[6].data.z)
    new = _loose_tight(3, nv, {1})
    cs.shift(3, [model] * 3, model, inputs, terminal_input, new)
    py.shift(3, [model] * 3, model, inputs, terminal_input, new)
    n = prob.N
    for j in range(3):
        np.testing.assert_array_equal(cs._cpp.knot_noise_info(n - 3 + j), new[j])
        np.testing.assert_array_equal(np.diag(py.problem.knots[n - 3 + j].W), new[j])
    np.testing.assert_array_equal(cs._cpp.knot_noise_info(n - 4), _loose_tight(24, nv, {20})[20])  # kept, loose
    pp, cp = py.problem.prior, cs.problem.prior
    scale = np.abs(pp.hessian).max()
    _close(cp.hessian / scale, pp.hessian / scale)
    _close(cp.gradient / scale, pp.gradient / scale)
    _close(np.array(cs.xs), np.array(py.xs))
    res, cres = py.solve(max_iter=3), cs.solve(max_iter=3)
    _close(cres.theta, res.theta, 1e-8)
    _close(np.array(cres.xs), np.array(res.xs), 1e-8)
    # default: the last kept interval's information (new[2], the last interval of the shift above)
    cs.shift(2, [model] * 2, model, inputs[:2], terminal_input)
    py.shift(2, [model] * 2, model, inputs[:2], terminal_input)
    for j in (n - 2, n - 1):
        np.testing.assert_array_equal(cs._cpp.knot_noise_info(j), new[2])
        np.testing.assert_array_equal(np.diag(py.problem.knots[j].W), new[2])
    with pytest.raises(ValueError, match="noise information"):
        cs.shift(2, [model] * 2, model, inputs[:2], terminal_input, new)


#: rolling feet (dynamics.rolling_radius): stance (2 and 4 feet), landing impulses (all feet; two feet landing while two
#: measured feet stand) and a landing over time (kd 25 on two feet), each with measured stance feet
ROLLING_PHASES = [
    PHASES[2],
    PHASES[4],
    PHASES[5],
    HEIGHT_PHASES[2],
    ("damped", ("FL_foot", "FR_foot", "RL_foot", "RR_foot"), (), ("FR_foot",), ("FL_foot", "RR_foot")),
]


def _random_knot(robot, model, layout, rng) -> tuple:
    """A random knot (x with a tilted base and random velocities, pi, tau (nj,), z)."""
    x = standing_state(robot, rng)
    x = model.state.integrate(x, np.concatenate([0.1 * rng.standard_normal(robot.nv), np.zeros(robot.nv)]))
    x[robot.nq :] = 0.3 * rng.standard_normal(robot.nv)
    return x, _pi(layout, rng), rng.standard_normal(robot.nj) * 3.0, rng.standard_normal(model.nz)


@pytest.mark.parametrize("rolling_contacts", [True, False], ids=["contacts", "measured-only"])
@pytest.mark.parametrize("phase", ROLLING_PHASES, ids=[p[0] for p in ROLLING_PHASES])
def test_rolling_feet_match_python(robot, phase, rolling_contacts):
    """Rolling feet (u = [tau; p_k per foot], the measured contact velocities and, with rolling contacts, the contacts
    at the points p_k of the foot frames, |p_k| ~ 0.02 m): C++ = Python (xnext, r, Fx, Fp, Rx, Rp of calc_diff, xnext,
    r of calc) to 1e-9 with the actuator model and IMU biases in pi, nu = nj + 3 nf; other points give other results
    (the next state only with rolling contacts)."""
    _, contacts, impulse, measured, *damped = phase
    cache, layout = _models(robot, True, True)
    cache = IntervalModelCache(
        robot,
        2e-3,
        cache.measurements,
        foot_velocity_std=0.02,
        kd=25.0,
        rolling_feet=True,
        rolling_contacts=rolling_contacts,
        **cache.options,
    )
    model = cache[(contacts, impulse, measured, *damped)]
    cmodel = compiled.compiled_interval_model(model)
    nf = len(robot.foot_names)
    assert cmodel.nu == model.nu == robot.nj + 3 * nf
    assert sum(getattr(m, "point_index", None) is not None for m in model.measurements) == len(measured)
    d, cd = model.create_data(), cmodel.create_data()
    rng = np.random.default_rng(17)
    for _ in range(2):
        x, pi, tau, d.z[:] = _random_knot(robot, model, layout, rng)
        d.u[:] = np.concatenate([tau, 0.02 * rng.standard_normal(3 * nf)])
        cd.u, cd.z = d.u, d.z
        for diff in (True, False):
            (model.calc_diff if diff else model.calc)(d, x, pi)
            (cmodel.calc_diff if diff else cmodel.calc)(cd, x, pi)
            for name in ("xnext", "r", "Fx", "Fp", "Rx", "Rp") if diff else ("xnext", "r"):
                _close(getattr(cd, name), getattr(d, name))
        cd.u = np.concatenate([tau, np.zeros(3 * nf)])  # the frame origins
        cmodel.calc(cd, x, pi)
        assert (np.abs(cd.xnext - d.xnext).max() > 1e-7) == rolling_contacts
        assert not measured or np.abs(cd.r - d.r).max() > 1e-3
    with pytest.raises(ValueError, match="nu = "):
        cd.u = tau
        cmodel.calc(cd, x, pi)


@pytest.mark.parametrize("rolling_contacts", [False, True])
def test_estimator_with_rolling_feet_same_estimates_with_both_backends(rolling_contacts):
    """The estimator with rolling feet on the sample bag (a short window: cold start and shifts, u with the feet's
    points from the builder): the compiled solver runs it and gives the Python reference's estimates."""
    from mcoe_ros.io.feed import SensorFeed
    from mcoe_ros.io.params import node_config
    from mcoe_ros.testing.data import first_estimates

    over = {"estimator.window": 0.06, "estimator.tick_period": 0.02, "dynamics.rolling_radius": 0.02}
    over["dynamics.rolling_contacts"] = rolling_contacts
    out = {}
    for backend in ("python", "compiled"):
        feed = SensorFeed(node_config({**over, "solver.backend": backend}))
        out[backend] = first_estimates(feed, 3)
        assert isinstance(feed.estimator.solver, compiled.CompiledSolver) == (backend == "compiled")
        assert all(np.size(k.data.u) == 24 for k in feed.estimator.solver.problem.knots)
    for a, b in zip(out["compiled"], out["python"], strict=True):
        _close(a.position, b.position, REPLAY_TOL)
        _close(a.payload_pi, b.payload_pi, REPLAY_TOL)
