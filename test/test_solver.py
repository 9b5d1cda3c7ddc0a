"""Solver core on small problems: one step = dense Gauss–Newton KKT step, converged cost = scipy least_squares,
Schur and nullspace arrival paths, the three rollouts, marginalisation / window shift and covariances."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from scipy.optimize import least_squares

from mcoe_ros.multibody.inertia import make_parametrization, pi_from_com
from mcoe_ros.ocp import numdiff
from mcoe_ros.ocp.problem import ArrivalPrior, EstimationProblem
from mcoe_ros.ocp.riccati import FactorizationError, range_basis, solve_arrival
from mcoe_ros.ocp.solver import MCOESolver, SolverOptions
from mcoe_ros.testing.toy import (
    EuclidToyInterval,
    PinocchioInterval,
    arm_model,
    build_problem,
    dense_kkt_step,
    freebody_model,
    lsq_residuals,
)

PI_EUCLID = pi_from_com(1.5, np.array([0.05, 0.02, -0.3]), np.diag([0.03, 0.02, 0.012]))


#: process noise on the velocity-like (Euclidean) coordinates only, per toy kind (the estimator's model choice)
VELOCITY_NOISE = {"euclid": [2, 3], "arm": [2, 3], "free": list(range(6, 12))}


def _setup(  # noqa: N803
    kind: str, param: str, N: int = 8, noise: float = 0.02, info_theta=1.0, spherical=False, seed=3, partial=False
):
    """(problem, true xs, perturbed xs, perturbed ws, theta0) for a toy kind 'euclid', 'arm' or 'free'; with
    ``partial`` the process noise sits on the velocity-like coordinates only."""
    rng = np.random.default_rng(seed)
    if kind == "euclid":
        node = EuclidToyInterval()
        pi_true = PI_EUCLID
        x0 = np.array([0.3, -0.2, 0.1, 0.5])
    elif kind == "arm":
        model, j, pi_true = arm_model()
        node = PinocchioInterval(model, j, 0.01, np.arange(4), 0.01)
        x0 = np.array([0.3, -0.4, 0.5, 0.2])
    else:
        model, j, pi_true = freebody_model()
        if spherical:
            pi_true = pi_from_com(2.0, np.array([0.02, -0.01, 0.03]), 0.04 * np.eye(3))
        node = PinocchioInterval(model, j, 0.01, np.arange(12), 0.01)
        quat = rng.standard_normal(4)
        x0 = np.concatenate([rng.uniform(-1, 1, 3), quat / np.linalg.norm(quat), rng.standard_normal(6)])
    st = node.state
    us = [3.0 * rng.standard_normal(node.nu) for _ in range(N)]
    dims = VELOCITY_NOISE[kind] if partial else None
    prob, xt = build_problem(node, N, pi_true, param, us, x0, noise=noise, info_theta=info_theta, noise_dims=dims)
    theta0 = prob.param.theta(1.3 * pi_true)
    xs = [st.integrate(x, 0.05 * rng.standard_normal(st.ndx)) for x in xt]
    ws = [0.01 * rng.standard_normal(prob.nw) for _ in range(N)]
    return prob, xt, xs, ws, theta0


def _direction(prob, xs, ws, theta, method="auto"):
    solver = MCOESolver(prob, SolverOptions(arrival=method))
    solver.set_guess(xs, ws, theta)
    prob.calc_diff(solver.xs, solver.ws, solver.theta)
    step, _, _ = solver.compute_direction(0.0)
    dx = solver.dx.reshape(-1)
    dw = solver.dw.reshape(-1)
    return step, np.concatenate([dx, dw, step.dtheta])


def _fd_jacobians(model, x, pi, u, z):
    st = model.state
    d = model.create_data()
    d.u[:], d.z[:] = u, z

    def evaluate(xx, pp):
        model.calc(d, xx, pp)
        return d.xnext.copy(), d.r.copy()

    out = {}
    out["Fx"], out["Rx"] = numdiff.jacobian(lambda xx: evaluate(xx, pi), x, state=st, output_states=[st, None])
    out["Fp"], out["Rp"] = numdiff.jacobian(lambda pp: evaluate(x, pp), pi, output_states=[st, None])
    model.calc_diff(d, x, pi)
    return out, d


@pytest.mark.parametrize("kind", ["euclid", "arm", "free"])
def test_toy_interval_jacobians_match_finite_differences(kind):
    prob, xt, xs, _, _ = _setup(kind, "plain")
    knot = prob.knots[2]
    fd, d = _fd_jacobians(knot.model, xs[2], prob.param.pi(prob.prior.theta_bar), knot.data.u, knot.data.z)
    for key in ("Fx", "Fp", "Rx", "Rp"):
        assert numdiff.relative_error(getattr(d, key), fd[key]) <= 1e-5, key


@pytest.mark.parametrize(
    "kind,param",
    [
        ("euclid", "plain"),
        ("euclid", "exp-eigval"),
        ("euclid", "log-cholesky"),
        ("arm", "exp-eigval"),
        ("free", "plain"),
        ("free", "exp-eigval"),
        ("free", "log-cholesky"),
    ],
)
@pytest.mark.parametrize("method", ["schur", "nullspace"])
@pytest.mark.parametrize("partial", [False, True], ids=["full-noise", "velocity-noise"])
def test_step_equals_dense_gauss_newton_kkt(kind, param, method, partial):
    """Riccati step (with nonzero gaps and noise) = dense KKT step of the same linearised problem."""
    prob, _, xs, ws, theta0 = _setup(kind, param, partial=partial)
    step, sol = _direction(prob, xs, ws, theta0, method)
    assert step.method == method and step.null_dim == 0
    dxs, dws, dth, _ = dense_kkt_step(prob, xs, ws, theta0)
    ref = np.concatenate([*dxs, *dws, dth])
    rel = np.abs(sol - ref).max() / np.abs(ref).max()
    assert rel <= 1e-8, rel


def test_nullspace_step_solves_the_singular_kkt():
    """Spherical body with exp-eigval: dpi/domega = 0, V_θθ has a 3-D nullspace (omega). The Schur Cholesky fails,
    the nullspace step solves the (singular, consistent) dense KKT system and has no omega component; the Schur
    path fails (Cholesky error) or returns an unbounded omega step."""
    prob, _, xs, ws, _ = _setup("free", "exp-eigval", info_theta=None, spherical=True)
    pi0 = 1.3 * pi_from_com(2.0, np.array([0.02, -0.01, 0.03]), 0.04 * np.eye(3))
    theta0 = prob.param.theta(pi0)
    step, sol = _direction(prob, xs, ws, theta0, "auto")
    assert step.method == "nullspace" and step.null_dim == 3
    y, _, null_dim = range_basis(step.hessian[prob.ndx :, prob.ndx :], 1e-9)
    assert null_dim == 3 and np.allclose(y[4:7], 0.0)
    assert np.abs(step.dtheta[4:7]).max() == 0.0
    _, _, _, (kkt, rhs) = dense_kkt_step(prob, xs, ws, theta0)
    n = sol.size
    resid = rhs - kkt[:, :n] @ sol
    lam = np.linalg.lstsq(kkt[:, n:], resid, rcond=None)[0]
    assert np.abs(resid - kkt[:, n:] @ lam).max() <= 1e-8 * np.abs(rhs).max()
    try:  # Schur: Cholesky of an (exactly or numerically) singular V_θθ -> failure or a meaningless omega step
        schur = solve_arrival(step.hessian, step.gradient, prob.ndx, 0.0, "schur")
        assert np.abs(schur.dtheta[4:7]).max() > 1e6
    except FactorizationError:
        pass


def _lsq_cost(prob, xref, theta0):
    fun, nvar, sparsity = lsq_residuals(prob, xref)
    z0 = np.concatenate([np.zeros(nvar - prob.ntheta), theta0])
    res = least_squares(fun, z0, jac_sparsity=sparsity, xtol=1e-10, ftol=1e-10, gtol=1e-10, method="trf")
    return res.cost


@pytest.mark.parametrize(
    "kind,param,method",
    [
        ("euclid", "plain", "schur"),
        ("euclid", "exp-eigval", "auto"),
        ("free", "exp-eigval", "schur"),
        ("free", "exp-eigval", "nullspace"),
        ("free", "log-cholesky", "auto"),
    ],
)
def test_converged_cost_equals_least_squares(kind, param, method):
    prob, xt, xs, ws, theta0 = _setup(kind, param)
    res = MCOESolver(prob, SolverOptions(arrival=method)).solve(xs, ws, theta0)
    assert res.converged and res.gap <= 1e-9
    ref = _lsq_cost(prob, xt, theta0)
    assert abs(res.cost - ref) <= 1e-6 * ref, (res.cost, ref)


def test_spherical_body_converges_through_nullspace_to_least_squares_cost():
    prob, xt, xs, ws, _ = _setup("free", "exp-eigval", info_theta=None, spherical=True, noise=0.01)
    theta0 = prob.param.theta(1.3 * pi_from_com(2.0, np.array([0.02, -0.01, 0.03]), 0.04 * np.eye(3)))
    res = MCOESolver(prob, SolverOptions(arrival="auto")).solve(xs, ws, theta0)
    assert res.converged
    assert res.log[0].arrival == "nullspace"
    ref = _lsq_cost(prob, xt, theta0)
    assert abs(res.cost - ref) <= 1e-6 * ref


@pytest.mark.parametrize("rollout", ["multiple", "feasible", "single"])
def test_rollouts_reach_the_same_optimum(rollout):
    prob, xt, xs, ws, theta0 = _setup("free", "exp-eigval", N=10)
    logs = []
    res = MCOESolver(prob, SolverOptions(rollout=rollout)).solve(xs, ws, theta0, callback=logs.append)
    assert res.converged, res.status
    assert len(logs) >= res.iterations and all(np.isfinite(lg.cost) for lg in logs)
    ref = _lsq_cost(prob, xt, theta0)
    assert abs(res.cost - ref) <= 1e-6 * ref
    if rollout != "multiple":
        assert all(lg.gap <= 1e-9 for lg in logs[1:]) if rollout == "single" else True


def test_stop_flag_ends_the_solve_between_iterations():
    """A set stop_event (the node's shutdown) ends the solve at the next iteration with status 'stopped'."""
    import threading

    prob, _xt, xs, ws, theta0 = _setup("free", "exp-eigval", N=10)
    solver = MCOESolver(prob)
    solver.stop_event = threading.Event()
    seen = []

    def callback(log):
        seen.append(log.iteration)
        solver.stop_event.set()  # arrives during the first iteration

    result = solver.solve(xs, ws, theta0, callback=callback)
    assert result.status == "stopped" and len(seen) == 1 and result.iterations == 1
    solver.stop_event.clear()
    assert solver.solve().converged


@pytest.mark.parametrize("partial", [False, True], ids=["full-noise", "velocity-noise"])
def test_covariances_match_the_inverse_dense_kkt(partial):
    """θ covariance from the arrival Hessian (Schur complement in θ) = θθ block of the inverse dense KKT."""
    prob, _, xs, ws, theta0 = _setup("free", "exp-eigval", N=6, partial=partial)
    res = MCOESolver(prob).solve(xs, ws, theta0)
    _, _, _, (kkt, _) = dense_kkt_step(prob, res.xs, res.ws, res.theta)
    inv = np.linalg.inv(kkt)
    nvar = (prob.N + 1) * prob.ndx + prob.N * prob.nw + prob.ntheta
    cov_ref = inv[nvar - prob.ntheta : nvar, nvar - prob.ntheta : nvar]
    cov = res.theta_covariance(prob.ndx)
    assert np.abs(cov - cov_ref).max() <= 1e-6 * np.abs(cov_ref).max()
    cov_x0 = res.x0_covariance(prob.ndx)
    assert np.abs(cov_x0 - inv[: prob.ndx, : prob.ndx]).max() <= 1e-6 * np.abs(cov_x0).max()


def _linear_toy(N, seed=5, noise_dims=None):  # noqa: N803
    node = EuclidToyInterval(linear=True)
    rng = np.random.default_rng(seed)
    us = [rng.standard_normal(node.nu) for _ in range(N)]
    x0 = np.array([0.3, -0.2, 0.1, 0.5])
    prob, xt = build_problem(node, N, PI_EUCLID, "plain", us, x0, noise=0.05, info_theta=1.0, noise_dims=noise_dims)
    return node, prob, xt, us


@pytest.mark.parametrize("noise_dims", [None, [2, 3]], ids=["full-noise", "velocity-noise"])
def test_shift_with_marginalisation_is_exact_on_a_linear_problem(noise_dims):
    """Solving N+k knots at once = solving N knots, shifting by k (marginal prior) and solving again (linear case)."""
    n, k = 8, 3
    node, full, xt, _ = _linear_toy(n + k, noise_dims=noise_dims)
    theta0 = full.prior.theta_bar + 0.3
    ref = MCOESolver(full).solve(xt, None, theta0)
    assert ref.converged
    win = EstimationProblem([node] * n, node, full.prior, full.param, full.knots[0].W, noise_dims)
    for j in range(n + 1):
        win.set_knot(j, u=full.knots[j].data.u, z=full.knots[j].data.z)
    solver = MCOESolver(win)
    first = solver.solve(xt[: n + 1], None, theta0)
    assert first.converged
    info_before = np.trace(np.linalg.pinv(first.theta_covariance(win.ndx)))
    inputs = [(full.knots[j].data.u, full.knots[j].data.z) for j in range(n, n + k)]
    solver.shift(k, [node] * k, node, inputs, (None, full.knots[n + k].data.z))
    assert win.N == n and np.any(win.prior.hessian[: win.ndx, win.ndx :])  # exact x–θ cross terms
    second = solver.solve()
    assert second.converged
    scale = np.abs(ref.theta).max()
    assert np.abs(second.theta - ref.theta).max() <= 1e-8 * scale
    for j in range(n + 1):
        assert np.abs(second.xs[j] - ref.xs[j + k]).max() <= 1e-8 * max(1.0, np.abs(ref.xs[j + k]).max())
    # information about θ accumulates: the second window's θ covariance is that of the full problem
    cov2, cov_ref = second.theta_covariance(win.ndx), ref.theta_covariance(full.ndx)
    assert np.abs(cov2 - cov_ref).max() <= 1e-6 * np.abs(cov_ref).max()
    assert np.trace(np.linalg.pinv(cov2)) > info_before


def test_shift_recycles_workspaces_and_rolls_out_new_states():
    n, k = 6, 2
    node, full, xt, _ = _linear_toy(n + k)
    win = EstimationProblem([node] * n, node, full.prior, full.param, full.knots[0].W)
    for j in range(n + 1):
        win.set_knot(j, u=full.knots[j].data.u, z=full.knots[j].data.z)
    solver = MCOESolver(win)
    solver.solve(xt[: n + 1], None, full.prior.theta_bar)
    old_ids = {id(knot) for knot in win.knots}
    inputs = [(full.knots[j].data.u, full.knots[j].data.z) for j in range(n, n + k)]
    solver.shift(k, [node] * k, node, inputs, (None, full.knots[n + k].data.z), marginalize=False)
    assert {id(knot) for knot in win.knots} == old_ids
    assert len(solver.xs) == n + 1 and len(solver.ws) == n
    assert np.allclose(win.prior.x_bar, solver.xs[0])
    res = solver.solve()
    assert res.converged


def test_options_budget_and_validation():
    prob, _, xs, ws, theta0 = _setup("euclid", "exp-eigval")
    res = MCOESolver(prob, SolverOptions(max_iter=1)).solve(xs, ws, theta0)
    assert not res.converged and res.iterations == 1 and res.status == "max_iter"
    res = MCOESolver(prob, SolverOptions(max_time=0.0)).solve(xs, ws, theta0)
    assert res.status == "max_time"
    with pytest.raises(ValueError):
        MCOESolver(prob, SolverOptions(rollout="bogus"))
    with pytest.raises(ValueError):
        plain = [make_parametrization("plain")] * 2
        EstimationProblem([prob.knots[0].model] * 2, prob.knots[0].model, prob.prior, plain, 1.0)


def test_prior_linearisation_matches_finite_differences():
    model, j, _ = freebody_model()
    node = PinocchioInterval(model, j, 0.01, np.arange(12), 0.01)
    rng = np.random.default_rng(0)
    st = node.state
    xbar = np.concatenate([pin.randomConfiguration(model, -np.ones(7), np.ones(7)), rng.standard_normal(6)])
    a = rng.standard_normal((st.ndx + 10, st.ndx + 10))
    prior = ArrivalPrior(xbar, rng.standard_normal(10), a @ a.T, rng.standard_normal(st.ndx + 10))
    x0 = st.integrate(xbar, 0.2 * rng.standard_normal(st.ndx))
    th = rng.standard_normal(10)
    _, grad, _ = prior.linearize(st, x0, th)
    fd_x = numdiff.jacobian(lambda xx: np.array([prior.cost(st, xx, th)]), x0, state=st)[0]
    fd_th = numdiff.jacobian(lambda tt: np.array([prior.cost(st, x0, tt)]), th)[0]
    fd = np.concatenate([fd_x, fd_th])
    assert np.abs(grad - fd).max() <= 1e-6 * np.abs(fd).max()


def test_stacked_parametrization_two_bodies():
    from mcoe_ros.ocp.problem import StackedParametrization

    par = StackedParametrization([make_parametrization("exp-eigval"), make_parametrization("log-cholesky")])
    pis = np.concatenate([PI_EUCLID, pi_from_com(0.7, np.array([0.1, 0.0, -0.05]), np.diag([0.01, 0.012, 0.015]))])
    theta = par.theta(pis)
    assert np.allclose(par.pi(theta), pis)
    jac = par.jacobian(theta)
    assert par.ntheta == 20 and np.all(jac[:10, 10:] == 0.0) and np.all(jac[10:, :10] == 0.0)
    fd = numdiff.jacobian(par.pi, theta)
    assert np.abs(jac - fd).max() <= 1e-6 * np.abs(fd).max()


@pytest.mark.parametrize("partial", [False, True], ids=["full-noise", "velocity-noise"])
def test_smoothed_covariances_match_the_inverse_dense_kkt(partial):
    """covariance(k) (forward marginal + backward value function) = (x_k, θ) blocks of the inverse dense KKT."""
    prob, _, xs, ws, theta0 = _setup("free", "exp-eigval", N=6, partial=partial)
    solver = MCOESolver(prob)
    res = solver.solve(xs, ws, theta0)
    _, _, _, (kkt, _) = dense_kkt_step(prob, res.xs, res.ws, res.theta)
    inv = np.linalg.inv(kkt)
    ndx, nth = prob.ndx, prob.ntheta
    nvar = (prob.N + 1) * ndx + prob.N * prob.nw + nth
    for k in (0, 3, prob.N):
        idx = np.r_[k * ndx : (k + 1) * ndx, nvar - nth : nvar]
        ref = inv[np.ix_(idx, idx)]
        cov = solver.covariance(k)
        assert np.abs(cov - ref).max() <= 1e-6 * np.abs(ref).max(), k


def test_paper_quadrotor_jacobians_match_finite_differences():
    """The quadrotor interval model of the paper benchmarks (analytic ABA/regressor/SO(3) Jacobians) against
    central differences on the free-flyer manifold."""
    from mcoe_ros.testing.paper import QuadrotorInterval, quadrotor_pi

    model = QuadrotorInterval()
    rng = np.random.default_rng(7)
    analytic, reference = model.create_data(), model.create_data()
    for d in (analytic, reference):
        d.u[:] = [15.0, 0.1, -0.2, 0.05]
        d.z[:] = np.r_[0.1, -0.2, 1.0, 1.0, 0.0, 0.0, 0.0, 0.3, -0.1, 0.2, 0.5, -0.4, 9.7]
    quat = rng.standard_normal(4)
    x = np.concatenate([rng.uniform(-1, 1, 3), quat / np.linalg.norm(quat), rng.standard_normal(6)])
    pi = quadrotor_pi()
    model.calc_diff(analytic, x, pi)
    model.calc_diff_fd(reference, x, pi)
    for key in ("Fx", "Fp", "Rx", "Rp"):
        assert numdiff.relative_error(getattr(analytic, key), getattr(reference, key)) <= 1e-5, key


def test_noise_dims_must_be_euclidean_coordinates():
    prob, *_ = _setup("free", "plain")
    model = prob.knots[0].model
    with pytest.raises(ValueError, match="noise_dims"):
        EstimationProblem([model] * 2, model, prob.prior, prob.param, 1.0, noise_dims=[0, 6])  # 0: a rotation
    partial = EstimationProblem([model] * 2, model, prob.prior, prob.param, 1.0, noise_dims=[6, 7])
    assert partial.nw == 2 and not partial.full_noise and np.array_equal(partial.knots[0].B, np.eye(12)[:, [6, 7]])


def test_euclidean_parameter_blocks_stack_with_an_inertial_body():
    from mcoe_ros.ocp.problem import EuclideanParameters, StackedParametrization

    par = StackedParametrization([make_parametrization("exp-eigval"), EuclideanParameters(3)])
    pis = np.concatenate([PI_EUCLID, [0.1, -0.2, 0.3]])
    theta = par.theta(pis)
    assert par.ntheta == 13 and np.allclose(par.pi(theta), pis) and np.allclose(theta[10:], pis[10:])
    assert numdiff.relative_error(par.jacobian(theta), numdiff.jacobian(par.pi, theta)) <= 1e-6


def test_parameter_random_walk_grows_the_covariance_and_keeps_the_mean():
    rng = np.random.default_rng(3)
    n = 12
    a = rng.standard_normal((n, n))
    prior = ArrivalPrior(np.zeros(6), np.zeros(6), a @ a.T + np.eye(n), rng.standard_normal(n))
    variances = np.array([0.3, 0.05])
    walked = prior.with_parameter_noise([1, 4], variances)
    grow = np.zeros((n, n))
    grow[[7, 10], [7, 10]] = variances
    np.testing.assert_allclose(np.linalg.inv(walked.hessian), np.linalg.inv(prior.hessian) + grow, atol=1e-12)
    mean = np.linalg.solve(prior.hessian, prior.gradient)
    np.testing.assert_allclose(np.linalg.solve(walked.hessian, walked.gradient), mean, atol=1e-12)
