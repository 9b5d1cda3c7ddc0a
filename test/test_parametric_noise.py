"""Parametric process noise (``noise.joint_torque_weight: parametric``, :mod:`mcoe_ros.ocp.problem` "Parametric
noise"): a noise covariance that depends on the parameters is differentiated in θ.

* the noise cost's θ terms (ℓ_θ, L_wθ) against finite differences of the cost ½ wᵀ W(θ) w;
* the Riccati step with those terms = the dense Gauss–Newton KKT step with the same terms; covariances (forward
  marginalisation + backward value function) = the inverse dense KKT Hessian, full and velocity-only noise;
* a converged solve is a stationary point of the cost with W(θ) (finite differences), the frozen one is not;
* errors in variables on a point mass pushed by a noisy reported force: the frozen weight overestimates the mass
  (attenuation: a heavier body makes the force noise matter less), the parametric one does not;
* the Go1 dynamics' ∂Q_τ/∂π (payload, rotor inertia; free, four feet, landing impulse) against finite differences;
* the estimator: configuration checks, the compiled backend falls back with the reason, a few ticks on the sample bag.
"""

from __future__ import annotations

import numpy as np
import pytest

from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import ConfigError, node_config
from mcoe_ros.multibody import compiled
from mcoe_ros.multibody.actuator import ActuatorModel, ParameterLayout
from mcoe_ros.multibody.dynamics import PhaseDynamicsModel
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.ocp.interval import IntervalData, IntervalModel
from mcoe_ros.ocp.problem import ArrivalPrior, EstimationProblem, PositiveParameters
from mcoe_ros.ocp.solver import MCOESolver, SolverOptions
from mcoe_ros.ocp.state import StateVector
from mcoe_ros.testing.data import first_estimates
from mcoe_ros.testing.go1 import FEET, payload_pi, standing_state
from mcoe_ros.testing.toy import assert_matches_dense_kkt, dense_kkt_step

DT = 0.01
SIGMA_P = 1e-5  #: position measurement noise, m
SIGMA_V0 = 1e-4  #: velocity noise floor per step, m/s


class PointMass(IntervalModel):
    """1-D point mass, x = (p, v), pi = [m] kg, input u = reported force N: v' = v + dt u / m, p' = p + dt v'
    (semi-implicit Euler); measurement: the position, r = (p - z) / sigma_p."""

    def __init__(self, sigma_p: float = SIGMA_P):
        self.sigma_p = sigma_p
        self.state = StateVector(2)
        self.npi, self.nu, self.nz, self.nr = 1, 1, 1, 1

    def calc(self, data: IntervalData, x: np.ndarray, pi: np.ndarray) -> None:
        vn = x[1] + DT * data.u[0] / pi[0]
        data.xnext[:] = (x[0] + DT * vn, vn)
        data.r[:] = (x[0] - data.z[0]) / self.sigma_p

    def calc_diff(self, data: IntervalData, x: np.ndarray, pi: np.ndarray) -> None:
        self.calc(data, x, pi)
        dvn_dm = -DT * data.u[0] / pi[0] ** 2
        data.Fx[:] = [[1.0, DT], [0.0, 1.0]]
        data.Fp[:, 0] = (DT * dvn_dm, dvn_dm)
        data.Rx[:] = [[1.0 / self.sigma_p, 0.0]]


def force_noise(sigma_u: float, full: bool = False):
    """(noise_model, noise_derivative) of the velocity noise a white force noise σ_u causes: Σ_v = dt² σ_u² / m² +
    SIGMA_V0² on v (noise dims [1]; ``full``: noise on (p, v), with a constant SIGMA_V0 * DT on p); the mass is read
    from the problem (``holder[0]``) at its last linearisation."""
    holder: list[EstimationProblem] = []

    def noise_model(knot) -> np.ndarray:
        info_v = 1.0 / (DT**2 * sigma_u**2 / holder[0].pi[0] ** 2 + SIGMA_V0**2)
        return np.diag([(SIGMA_V0 * DT) ** -2, info_v]) if full else np.array([[info_v]])

    def noise_derivative(knot) -> np.ndarray:
        out = np.zeros((1, 2, 2) if full else (1, 1, 1))
        out[0, -1, -1] = -2.0 * DT**2 * sigma_u**2 / holder[0].pi[0] ** 3
        return out

    return holder, noise_model, noise_derivative


def point_mass_problem(
    n: int,
    sigma_u: float,
    parametric: bool,
    seed: int = 4,
    m_true: float = 2.0,
    sigma_p: float = SIGMA_P,
    full_noise: bool = False,
):
    """A window of n intervals of a point mass pushed by a known force, with the reported force noisy (σ_u) and the
    position measured with noise σ_p (noise on v, or on (p, v) with ``full_noise``); returns (problem, true states,
    initial guess (xs, ws, theta))."""
    rng = np.random.default_rng(seed)
    t = DT * np.arange(n)
    force = 3.0 * np.sin(2.1 * t) + 2.0 * np.cos(5.3 * t + 0.4)
    xs = [np.array([0.1, -0.2])]
    for k in range(n):
        vn = xs[-1][1] + DT * force[k] / m_true
        xs.append(np.array([xs[-1][0] + DT * vn, vn]))
    holder, noise_model, noise_derivative = force_noise(sigma_u, full_noise)
    model = PointMass(sigma_p)
    prior = ArrivalPrior.independent(xs[0] + [1e-3, 1e-2], np.array([1e2, 1e2]), 2, np.log([1.5]), 1e-2)
    prob = EstimationProblem(
        [model] * n,
        model,
        prior,
        [PositiveParameters(1)],
        np.ones(2 if full_noise else 1),
        None if full_noise else [1],
        noise_model,
        None,
        noise_derivative if parametric else None,
    )
    holder.append(prob)
    for k in range(n + 1):
        u = force[k] + sigma_u * rng.standard_normal() if k < n else 0.0
        prob.set_knot(k, u=np.array([u]), z=np.array([xs[k][0] + sigma_p * rng.standard_normal()]))
    guess = [x + [2e-3, 0.05] for x in xs]
    return prob, xs, (guess, [np.zeros(prob.nw) for _ in range(n)], np.log([1.5]))


def _solve(prob, guess, iterations=30):
    solver = MCOESolver(prob, SolverOptions(max_iter=iterations))
    res = solver.solve(*guess)
    return solver, res


def _cost_with_model_weights(prob, xs, theta) -> float:
    """The problem's cost at states xs and parameters theta with w_k = x_{k+1} ⊖ f(x_k) and W(θ) evaluated by the
    noise model at theta (not the weights frozen in the knots)."""
    prob.set_theta(theta)
    cost = prob.prior.cost(prob.state, xs[0], theta)
    noise_model = prob.noise_model
    for k, nd in enumerate(prob.knots):
        d = nd.model.create_data()
        d.u[:], d.z[:] = nd.data.u, nd.data.z
        nd.model.calc(d, xs[k], prob.pi)
        cost += 0.5 * float(d.r @ d.r)
        if k < prob.N:
            w = (xs[k + 1] - d.xnext)[prob.noise_dims]  # = the solver's w_k where the gaps are closed
            cost += 0.5 * float(w @ noise_model(nd) @ w)
    return cost


def test_noise_theta_terms_match_finite_differences():
    prob, _, (xs, _, theta) = point_mass_problem(6, 0.8, parametric=True)
    ws = [np.array([0.01 * (k + 1)]) for k in range(prob.N)]
    prob.calc_diff(xs, ws, theta)
    prob.refresh_noise(ws)
    nd, w = prob.knots[2], ws[2]

    def noise_cost(th):
        prob.set_theta(th)
        return 0.5 * float(w @ prob.noise_model(nd) @ w)

    def noise_grad_w(th):
        prob.set_theta(th)
        return prob.noise_model(nd) @ w

    h = 1e-6
    fd_lth = (noise_cost(theta + h) - noise_cost(theta - h)) / (2 * h)
    fd_lwth = (noise_grad_w(theta + h) - noise_grad_w(theta - h)) / (2 * h)
    assert nd.lth[0] == pytest.approx(fd_lth, rel=1e-6)
    # Gauss–Newton of the whitened residual S(θ) w, S = √W: L_wθ = S ∂S w = ½ ∂(W w)/∂θ, L_θθ = (∂S w)²
    assert nd.Lwth[0, 0] == pytest.approx(0.5 * fd_lwth[0], rel=1e-6)
    assert nd.Lthth[0, 0] == pytest.approx(nd.Lwth[0, 0] ** 2 / nd.W[0, 0], rel=1e-12)
    # the line-search trial cost is the first-order model of W(θ): its θ-slope is ℓ_θ
    prob.set_theta(theta)
    slope = (prob.noise_cost(2, w, np.array([h])) - prob.noise_cost(2, w, np.array([-h]))) / (2 * h)
    assert slope == pytest.approx(fd_lth, rel=1e-6)


@pytest.mark.parametrize("noise_dims", [[1], None], ids=["velocity-noise", "full-noise"])
def test_riccati_step_and_covariances_equal_the_dense_kkt_with_the_noise_theta_terms(noise_dims):
    # a well-conditioned window (the dense KKT is solved directly)
    prob, _, (xs, _, theta) = point_mass_problem(8, 0.8, True, sigma_p=1e-2, full_noise=noise_dims is None)
    rng = np.random.default_rng(1)
    ws = [0.02 * rng.standard_normal(prob.nw) for _ in range(prob.N)]
    solver = MCOESolver(prob, SolverOptions())
    solver.set_guess(xs, ws, theta)
    prob.calc_diff(solver.xs, solver.ws, solver.theta)
    prob.refresh_noise(solver.ws)
    assert all(nd.dW is not None and np.any(nd.Lwth) for nd in prob.knots[:-1])
    step, _, _ = solver.compute_direction(0.0)
    # dense reference with the same θ terms (hess[w, θ] = L_wθ, hess[θ, θ] += L_θθ, grad[θ] += ℓ_θ)
    dxs, dws, dth, (kkt, rhs) = dense_kkt_step(prob, xs, ws, theta)
    n, ndx, nw = prob.N, prob.ndx, prob.nw
    nvar = (n + 1) * ndx + n * nw + prob.ntheta
    ith = slice(nvar - prob.ntheta, nvar)
    for k, nd in enumerate(prob.knots[:-1]):
        iw = slice((n + 1) * ndx + k * nw, (n + 1) * ndx + (k + 1) * nw)
        kkt[iw, ith] += nd.Lwth
        kkt[ith, iw] += nd.Lwth.T
        kkt[ith, ith] += nd.Lthth
        rhs[ith] -= nd.lth
    assert_matches_dense_kkt(solver, step, kkt, rhs, (0, 3, n))


def test_converged_estimate_is_stationary_for_the_parameter_dependent_weights():
    """With the noise's θ terms the fixed point is a stationary point of ½ Σ wᵀ W(θ) w + ... (the cost whose
    weights follow θ); with frozen weights it is not (its θ-gradient there is the errors-in-variables pull)."""
    grads = {}
    for parametric in (True, False):
        # noise on (p, v): every state is free, so the cost with w_k = x_k+1 - f(x_k) is a function of (xs, θ)
        prob, _, guess = point_mass_problem(60, 0.8, parametric, full_noise=True)
        _, res = _solve(prob, guess)
        assert res.converged, res.status
        h = 1e-6
        up = _cost_with_model_weights(prob, res.xs, res.theta + h)
        down = _cost_with_model_weights(prob, res.xs, res.theta - h)
        # w_k follows from the states: the θ-derivative at fixed states of the eliminated cost
        grads[parametric] = (up - down) / (2 * h)
        scale = _cost_with_model_weights(prob, res.xs, res.theta)
        grads[parametric] /= max(scale, 1.0)
    assert abs(grads[True]) <= 1e-3 * abs(grads[False]), grads
    assert abs(grads[False]) >= 1e-2, grads


def test_errors_in_variables_frozen_weight_overestimates_the_mass_parametric_does_not():
    """Point mass (2 kg) pushed by a known force whose reported value carries white noise of 1 N: the frozen
    weight's estimate is attenuated towards a heavier body (the noisy force explains less motion on a heavier
    mass); the parametric weight is the force residual's own likelihood and is unbiased."""
    masses = {}
    for parametric in (True, False):
        prob, _, guess = point_mass_problem(400, 1.0, parametric)
        _, res = _solve(prob, guess)
        assert res.converged, res.status
        masses[parametric] = float(np.exp(res.theta[0]))
    assert abs(masses[True] - 2.0) <= 0.04 * 2.0, masses
    assert masses[False] >= 1.12 * 2.0, masses


# ---------------------------------------------------------------------------------------------------- Go1
@pytest.mark.parametrize(
    "contacts,impulse",
    [((), ()), (FEET, ()), (FEET[:3], FEET[:1])],
    ids=["free", "four-feet", "landing"],
)
def test_go1_torque_noise_covariance_derivative_matches_finite_differences(contacts, impulse):
    """∂Q/∂π of PhaseDynamicsModel (torque and contact-constraint noise; payload body, rotor inertia; zero for friction
    and IMU biases) against central differences of velocity_noise_covariance; worst relative error reported."""
    robot = RobotModel()
    act = ActuatorModel(robot)
    layout = ParameterLayout(n_actuator=act.n_params, gyro_bias=True, acc_bias=True)
    dyn = PhaseDynamicsModel(robot, contacts, 2e-3, impulse, actuator=act, layout=layout)
    data = dyn.create_data()
    rng = np.random.default_rng(7)
    x = standing_state(robot, rng)
    x[robot.model.nq :] += 0.3 * rng.standard_normal(robot.nv)
    u = 2.0 * rng.standard_normal(robot.nj)
    pi = np.zeros(layout.size)
    pi[:10] = payload_pi()
    pi[layout.actuator] = np.r_[np.full(3, 1.0), np.full(3, 0.2), np.full(3, 0.01)]
    std, contact_std = np.full(robot.nj, 0.1), 5.0
    dyn.calc_diff(data, x, u, pi)
    analytic = dyn.velocity_noise_covariance_derivative(data, std, contact_std)
    worst, scale_all = 0.0, np.abs(analytic).max()
    for j in range(layout.size):
        h = 1e-6 * max(1.0, abs(pi[j]))
        cov = []
        for sign in (1.0, -1.0):
            p = pi.copy()
            p[j] += sign * h
            dyn.calc_diff(data, x, u, p)
            cov.append(dyn.velocity_noise_covariance(data, std, 0.0, contact_std))
        fd = (cov[0] - cov[1]) / (2.0 * h)
        err = np.abs(fd - analytic[j]).max()
        worst = max(worst, err / max(np.abs(fd).max(), 1e-6 * scale_all))
    print(f"{'+'.join(contacts) or 'free'} impulse {impulse}: worst relative error {worst:.1e}")
    assert worst <= 1e-5
    zero = [*range(10, 10 + 2 * act.n_groups), *range(10 + act.n_params, layout.size)]  # friction, biases
    assert not np.any(analytic[zero]) and np.any(analytic[:10]) and np.any(analytic[10 + 2 * act.n_groups : 10 + 9])


def test_estimator_parametric_torque_weight_runs_both_solvers():
    """noise.joint_torque_weight parametric: the config refuses what it cannot honour (no torque noise, robust loss,
    leg mass scale); the Python solver's knots carry the noise cost's θ terms, 'auto' runs the compiled solver (whose
    knots carry them too) and both give the same finite estimates."""
    base = {"noise.joint_torque_weight": "parametric", "noise.joint_torque": 0.1}
    bad = [
        ({"noise.joint_torque": 0.0}, "noise.joint_torque or noise.contact_acceleration > 0"),
        ({"robust.loss": "huber"}, "robust.loss"),
        ({"payload.leg_mass.enabled": True}, "payload.leg_mass"),
    ]
    for extra, text in bad:
        with pytest.raises(ConfigError, match=f"noise.joint_torque_weight.*{text}"):
            node_config({**base, **extra})
    with pytest.raises(ConfigError, match="noise.joint_torque_weight"):
        node_config({"noise.joint_torque_weight": "exact"})
    over = {**base, "estimator.window": 0.06, "estimator.tick_period": 0.02}
    feed = SensorFeed(node_config({**over, "solver.backend": "python"}))
    out = first_estimates(feed, 3)
    est = feed.estimator
    assert type(est.solver).__name__ == "MCOESolver" and all(e.is_finite() for e in out)
    knots = est.solver.problem.knots[:-1]
    assert all(k.dW is not None for k in knots) and any(np.any(k.Lwth[:, :10]) for k in knots)
    if not compiled.available():
        return
    cfeed = SensorFeed(node_config(over))
    cout = first_estimates(cfeed, 3)
    solver = cfeed.estimator.solver
    assert type(solver).__name__ == "CompiledSolver" and all(e.is_finite() for e in cout)
    terms = [solver._cpp.knot_noise_terms(k) for k in range(solver._cpp.N)]
    assert all(t is not None for t in terms) and any(np.any(np.asarray(t[1])[:, :10]) for t in terms)
    for e, ce in zip(out, cout, strict=True):
        np.testing.assert_allclose(ce.payload_pi, e.payload_pi, rtol=1e-5, atol=1e-8)
