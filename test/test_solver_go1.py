"""Solver on Go1 windows generated with the estimator's own model (MultibodyIntervalModel, 4 feet in contact, dt 2 ms,
exact dynamics, noise-free encoders + IMU): payload recovery from a 70 % wrong guess, dense-KKT step check on the
free-flyer manifold, and the spherical-payload nullspace vs Schur comparison."""

from __future__ import annotations

import numpy as np
import pytest

from mcoe_ros.multibody.inertia import pi_about_com, pi_from_com
from mcoe_ros.ocp.riccati import FactorizationError, arrival_system, solve_arrival
from mcoe_ros.ocp.solver import MCOESolver, SolverOptions
from mcoe_ros.testing.go1 import go1_window, payload_pi, perturbed
from mcoe_ros.testing.toy import dense_kkt_step


def _errors(res, prob, xs_true, pi_true):
    mass, com, _ = pi_about_com(res.pi)
    mass_t, com_t, _ = pi_about_com(pi_true)
    traj = max(float(np.abs(prob.state.difference(a, b)).max()) for a, b in zip(res.xs, xs_true, strict=True))
    return abs(mass - mass_t) / mass_t, float(np.abs(com - com_t).max()), traj


@pytest.mark.parametrize("param", ["exp-eigval", "log-cholesky"])
def test_go1_recovers_payload_mass_com_and_trajectory(param):
    prob, xs_true, pi_true, _ = go1_window(40, param=param)
    theta0 = prob.param.theta(perturbed(pi_true))
    res = MCOESolver(prob).solve(xs_true, None, theta0)
    assert res.converged, res.status
    mass_err, com_err, traj_err = _errors(res, prob, xs_true, pi_true)
    assert mass_err <= 5e-3 and com_err <= 2e-3 and traj_err <= 1e-6, (mass_err, com_err, traj_err)


def test_go1_step_equals_dense_kkt_with_gaps():
    """Free-flyer manifold (quaternion base), perturbed states and noises (nonzero gaps) -> Riccati = dense KKT."""
    prob, xs_true, pi_true, _ = go1_window(5)
    rng = np.random.default_rng(2)
    st = prob.state
    xs = [st.integrate(x, 1e-3 * rng.standard_normal(st.ndx)) for x in xs_true]
    ws = [1e-4 * rng.standard_normal(st.ndx) for _ in range(prob.N)]
    theta0 = prob.param.theta(perturbed(pi_true))
    solver = MCOESolver(prob, SolverOptions(arrival="schur"))
    solver.set_guess(xs, ws, theta0)
    prob.calc_diff(solver.xs, solver.ws, solver.theta)
    step, _, _ = solver.compute_direction(0.0)
    sol = np.concatenate([solver.dx.reshape(-1), solver.dw.reshape(-1), step.dtheta])
    dxs, dws, dth, _ = dense_kkt_step(prob, xs, ws, theta0)
    ref = np.concatenate([*dxs, *dws, dth])
    assert np.abs(sol - ref).max() <= 1e-8 * np.abs(ref).max()


def test_go1_spherical_payload_nullspace_converges_where_schur_fails():
    """Spherical payload (equal principal moments), exp-eigval, guess 70 % off (still spherical): dpi/domega = 0,
    so V_θθ is singular at the start. Nullspace ('auto') converges without a single failed factorisation;
    the plain Schur path cannot factorise V_θθ: without Levenberg–Marquardt it stops, with it it needs failed
    iterations and regularisation to get going."""
    prob, xs_true, pi_true, _ = go1_window(40, spherical=True)
    theta0 = prob.param.theta(perturbed(pi_true))
    null = MCOESolver(prob, SolverOptions(arrival="auto")).solve(xs_true, None, theta0)
    assert null.converged and null.log[0].arrival == "nullspace"
    assert all(lg.arrival != "failed" for lg in null.log)
    mass_err, com_err, traj_err = _errors(null, prob, xs_true, pi_true)
    assert mass_err <= 5e-3 and com_err <= 2e-3 and traj_err <= 1e-6, (mass_err, com_err, traj_err)
    # Schur at the initial point: Cholesky failure or an unbounded omega step
    solver = MCOESolver(prob, SolverOptions(arrival="schur"))
    solver.set_guess(xs_true, None, theta0)
    prob.calc_diff(solver.xs, solver.ws, solver.theta)
    with pytest.raises(FactorizationError):
        solver.compute_direction(0.0)
    _, _, grad, hess = arrival_system(prob, solver.xs[0], solver.theta, solver.riccati)
    try:
        step = solve_arrival(hess, grad, prob.ndx, 0.0, "schur")
        assert np.abs(step.dtheta[4:7]).max() > 1e6
    except FactorizationError:
        pass
    # plain Schur without LM regularisation: fails
    no_lm = MCOESolver(prob, SolverOptions(arrival="schur", reg_max=0.0)).solve(xs_true, None, theta0)
    assert not no_lm.converged and no_lm.status.startswith("regularisation")
    # Schur with LM: needs failed factorisations before it moves
    lm = MCOESolver(prob, SolverOptions(arrival="schur")).solve(xs_true, None, theta0)
    assert lm.log[0].arrival == "failed"


def test_go1_payload_helpers_are_consistent():
    pi_s = payload_pi(spherical=True)
    mass, com, inertia = pi_about_com(pi_s)
    assert np.allclose(inertia, inertia[0, 0] * np.eye(3))
    assert np.allclose(pi_from_com(mass, com, inertia), pi_s)


@pytest.mark.parametrize("max_iter", [2, 50])
def test_workspaces_hold_the_returned_estimate_linearisation(max_iter):
    """After solve (converged or stopped by the iteration cap) the problem's knots are linearised at the
    returned point, so the estimator's covariance can reuse them (marginal_prior(relinearize=False))."""
    prob, xs_true, pi_true, _ = go1_window(12)
    solver = MCOESolver(prob, SolverOptions(max_iter=max_iter))
    res = solver.solve(xs_true, None, prob.param.theta(perturbed(pi_true)))
    cheap = solver.marginal_prior(prob.N, relinearize=False)
    exact = solver.marginal_prior(prob.N, relinearize=True)
    np.testing.assert_allclose(cheap.hessian, exact.hessian, rtol=1e-9, atol=1e-9 * np.abs(exact.hessian).max())
    np.testing.assert_allclose(cheap.gradient, exact.gradient, rtol=1e-9, atol=1e-9 * np.abs(exact.gradient).max())
    assert res.cost == pytest.approx(prob.calc_diff(res.xs, res.ws, res.theta), rel=1e-12)
