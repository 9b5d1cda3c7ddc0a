"""Multiple-shooting optimal-estimation solver (paper Section V): parametrized Riccati recursion, arrival knot by
Schur complement or nullspace, multiple-shooting / feasibility-driven / single-shooting rollouts, gap-aware merit
with nonmonotone Armijo line search and Levenberg–Marquardt regularisation, and receding-horizon warm start with
marginalisation of the dropped knots.

Iteration (all Gauss–Newton, see :mod:`mcoe_ros.ocp.riccati`):
 1. linearise (:meth:`EstimationProblem.calc_diff`), backward pass, arrival solve -> (δx_0, δθ);
 2. linear rollout δw_k = −k_k − K_k δx_k − P_k δθ, δx_{k+1} = f̄_k + A_k δx_k + B_k δw_k + C_k δθ; from it the
    directional derivative d1 = ∇costᵀ d and curvature d2 = dᵀ H_GN d of the cost, and the multipliers
    ξ_{k+1} = V'_x + V'_xx δx_{k+1} + V'_xθ δθ;
 3. stop if max|gap| ≤ tol_gap and the expected full-step cost decrease −(d1 + ½ d2) ≤ tol_stop;
 4. line search α ∈ {1, ½, ..., α_min} on the merit φ = cost + ν ‖c‖₁ (c the gaps, ν = max(ν, 1.1 ‖ξ‖_∞) so the
    direction is a descent direction of φ), with model Δm(α) = α (d1 − ν ‖c‖₁) + ½ α² d2 (the linearised gaps shrink
    to (1 − α) c); accept if φ(α) ≤ φ_ref + c₁ min(Δm(α), 0) with φ_ref the maximum merit of the last
    ``nonmonotone_memory`` accepted iterates (nonmonotone Armijo);
 5. Levenberg–Marquardt μ on Q_ww and on the arrival system: μ ← μ/ρ after a step with α ≥ 0.5 (below
    ``reg_base`` μ snaps to ``reg_min``), μ ← max(μ ρ, reg_base) after a rejected line search, a step with
    α ≤ 0.01 or a failed factorisation; the solve stops (not converged) if μ > reg_max.

Rollouts for the trial point of step α (eq. 32 for x_0 and θ in all three):
 - 'multiple' (eq. 33): x_k ⊕ α δx_k, w_k + α δw_k from the linear rollout, gaps recomputed from the nonlinear shots;
 - 'feasible' (FDDP-like): δw_k = −α(k_k + P_k δθ) − K_k (x⁺_k ⊖ x_k), x⁺_{k+1} = (f(x⁺_k) ⊕ w⁺_k) ⊕ (−(1−α) c_k),
   so the new gap is exactly (1 − α) c_k;
 - 'single': as 'feasible' with the gaps forced to zero (x⁺_{k+1} = f(x⁺_k) ⊕ w⁺_k); the initial guess is made
   feasible by a nonlinear rollout from x_0 before the first iteration.

Convergence: the Gauss–Newton model drops residual curvature, so on noisy windows with a weakly excited payload
inertia the iteration is only linearly convergent and the exp-eigval / log-Cholesky landscapes can have several
local minima (e.g. degenerate inertias at the boundary when no θ prior is used); a weak θ prior helps.

Usage::

    solver = MCOESolver(problem, SolverOptions(rollout="multiple", arrival="auto"))
    res = solver.solve(xs_guess, None, theta_guess, callback=print)
    cov_theta = res.theta_covariance(problem.ndx)
    solver.shift(k, new_models, terminal_model, [(u, z), ...], (u_N, z_N))   # receding horizon
    res = solver.solve(max_iter=3)                                          # warm start

The solver owns its workspace (the Riccati value function and policy of every knot, the search direction, the
trial trajectory); the problem only holds models, data and linearisations.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from mcoe_ros.ocp.interval import IntervalModel
from mcoe_ros.ocp.problem import ArrivalPrior, EstimationProblem
from mcoe_ros.ocp.riccati import (
    ArrivalStep,
    FactorizationError,
    RiccatiWorkspace,
    arrival_system,
    backward_pass,
    solve_arrival,
)


@dataclass
class SolverOptions:
    rollout: str = "multiple"  #: 'multiple', 'feasible' or 'single'
    arrival: str = "auto"  #: 'auto', 'schur' or 'nullspace'
    rank_tol: float = 1e-9  #: relative eigenvalue tolerance of V_θθ for the nullspace method / auto selection
    max_iter: int = 100  #: default iteration budget of :meth:`MCOESolver.solve`
    max_time: float | None = None  #: wall-time budget in seconds (checked once per iteration)
    tol_stop: float = 1e-12  #: on the expected full-step cost decrease −(d1 + ½ d2)
    tol_gap: float = 1e-9  #: on max |gap|
    reg_init: float = 0.0
    reg_min: float = 0.0
    reg_base: float = 1e-9  #: first nonzero μ
    reg_max: float = 1e12
    reg_factor: float = 10.0
    alpha_min: float = 2.0**-10
    armijo: float = 1e-4
    nonmonotone_memory: int = 2
    nu_init: float = 1.0
    #: re-evaluate a state-dependent noise model at the first linearisation of a solve (at every one with a parametric
    #: noise model, whose θ terms depend on the point: mcoe_ros.ocp.problem)
    refresh_noise: bool = True
    #: when the iteration budget is spent, still compute the direction at the returned point (the convergence flag
    #: and ``arrival_hessian`` need it; the returned estimate and its linearisation do not): False saves a backward
    #: pass per solve (the estimator's real-time iteration), the result then has converged=False and no
    #: arrival_hessian unless it converged earlier
    final_direction: bool = True
    #: consider analysis (:meth:`MCOESolver.terminal_covariance`) when the problem has consider parameters; False: the
    #: sensitivities are not computed
    consider: bool = True


@dataclass
class IterationLog:
    iteration: int
    cost: float
    merit: float
    gap: float  #: ‖c‖₁ before the step
    step: float  #: accepted α (0 if rejected)
    reg: float  #: μ used for the direction
    stop: float  #: expected full-step cost decrease
    time: float  #: seconds since the start of the solve
    arrival: str  #: 'schur' / 'nullspace' / 'failed'


@dataclass
class SolverResult:
    converged: bool
    iterations: int
    cost: float
    gap: float  #: max |gap|
    xs: list[np.ndarray]  #: (N+1) states
    ws: list[np.ndarray]  #: N process noises
    theta: np.ndarray
    pi: np.ndarray
    #: GN Hessian over (δx_0, δθ) of the whole problem (knot-0 value function + prior) at the last linearisation
    #: (the returned point if converged); its inverse is the joint (x_0, θ) covariance
    arrival_hessian: np.ndarray | None
    status: str = ""
    log: list[IterationLog] = field(default_factory=list)

    def _blocks(self, ndx: int):
        h = self.arrival_hessian
        return h[:ndx, :ndx], h[:ndx, ndx:], h[ndx:, ndx:]

    def theta_covariance(self, ndx: int) -> np.ndarray:
        """Σθ = (Hθθ − Hθx Hxx^{-1} Hxθ)^+ (pseudo-inverse: unidentifiable directions get zero variance)."""
        hxx, hxt, htt = self._blocks(ndx)
        return np.linalg.pinv(htt - hxt.T @ np.linalg.solve(hxx, hxt), rcond=1e-12, hermitian=True)

    def x0_covariance(self, ndx: int) -> np.ndarray:
        """Σx0 = (Hxx − Hxθ Hθθ^+ Hθx)^{-1} in the tangent space at x_0."""
        hxx, hxt, htt = self._blocks(ndx)
        return np.linalg.inv(hxx - hxt @ np.linalg.pinv(htt, rcond=1e-12, hermitian=True) @ hxt.T)

    def pi_covariance(self, ndx: int, dpi_dtheta: np.ndarray) -> np.ndarray:
        """Σπ = (dpi/dtheta) Σθ (dpi/dtheta)ᵀ."""
        return dpi_dtheta @ self.theta_covariance(ndx) @ dpi_dtheta.T


class MCOESolver:
    """Solver for an :class:`EstimationProblem`; keeps the current estimate (xs, ws, theta) for warm starts."""

    def __init__(self, problem: EstimationProblem, options: SolverOptions | None = None):
        self.problem = problem
        self.options = options or SolverOptions()
        if self.options.rollout not in ("multiple", "feasible", "single"):
            raise ValueError(f"unknown rollout {self.options.rollout!r}")
        if self.options.arrival not in ("auto", "schur", "nullspace"):
            raise ValueError(f"unknown arrival method {self.options.arrival!r}")
        self.xs: list[np.ndarray] = []
        self.ws: list[np.ndarray] = []
        self.theta = np.zeros(problem.ntheta)
        self.dtheta = np.zeros(problem.ntheta)
        self.step: ArrivalStep | None = None
        #: ∂(x̂_N, θ̂)/∂b of the last :meth:`terminal_covariance` (consider parameters b), None without them
        self.consider_sensitivity: np.ndarray | None = None
        #: a threading.Event (or None); when set, :meth:`solve` returns at its next iteration, status 'stopped'
        self.stop_event = None
        self._allocate()

    def _allocate(self) -> None:
        """Workspace for the problem's current N: Riccati value function and policy, direction dx (N+1, ndx),
        dw (N, nw), multipliers ξ (N+1, ndx) (row 0 unused), trial trajectory."""
        p = self.problem
        self.riccati = RiccatiWorkspace(p.N + 1, p.ndx, p.ntheta, p.nw)
        self.dx = np.zeros((p.N + 1, p.ndx))
        self.dw = np.zeros((p.N, p.nw))
        self.xs_try = [np.zeros(p.state.nx) for _ in range(p.N + 1)]
        self.ws_try = [np.zeros(p.nw) for _ in range(p.N)]
        self.theta_try = np.zeros(p.ntheta)
        self.xi = np.zeros((p.N + 1, p.ndx))

    # ------------------------------------------------------------------ initial guess
    def set_guess(self, xs: Sequence[np.ndarray], ws: Sequence[np.ndarray] | None, theta: np.ndarray) -> None:
        p = self.problem
        if len(xs) != p.N + 1:
            raise ValueError(f"need N+1 = {p.N + 1} states, got {len(xs)}")
        self.xs = [np.array(x, dtype=float) for x in xs]
        self.ws = [np.zeros(p.nw) for _ in range(p.N)] if ws is None else [np.array(w, dtype=float) for w in ws]
        self.theta = np.array(theta, dtype=float)

    def rollout_guess(self, x0: np.ndarray, theta: np.ndarray, start: int = 0) -> None:
        """Nonlinear rollout x_{k+1} = f(x_k) ⊕ w_k from knot ``start`` (x_start = x0) with the current ws."""
        p = self.problem
        pi = p.param.pi(theta)
        self.xs[start] = np.array(x0, dtype=float)
        for k in range(start, p.N):
            nd = p.knots[k]
            nd.model.calc(nd.trial, self.xs[k], pi)
            self.xs[k + 1] = p.state.integrate(nd.trial.xnext, p.noise_tangent(self.ws[k]))

    # ------------------------------------------------------------------ one direction
    def compute_direction(self, reg: float) -> tuple[ArrivalStep, float, float]:
        """Backward pass, arrival solve and linear rollout at the current linearisation (after calc_diff).

        Fills the direction dx, dw and the multipliers ξ; returns (arrival step, d1, d2).
        """
        p = self.problem
        vf = self.riccati
        backward_pass(p, self.ws, reg, vf)
        pgrad, phess, grad, hess = arrival_system(p, self.xs[0], self.theta, vf)
        step = solve_arrival(hess, grad, p.ndx, reg, self.options.arrival, self.options.rank_tol)
        dth = step.dtheta
        self.dtheta[:] = dth
        e = np.concatenate([step.dx0, dth])
        d1 = float(pgrad @ e)
        d2 = float(e @ phess @ e)
        knots = p.knots
        dx, dw = self.dx, self.dw
        dx[0] = step.dx0
        for k, nd in enumerate(knots):
            d = nd.data
            v = d.Rx @ dx[k] + nd.Rth @ dth
            if not nd.terminal:
                dw[k] = -(vf.k[k] + vf.K[k] @ dx[k] + vf.P[k] @ dth)
                if nd.coupled:
                    v += nd.Rw @ dw[k]
            d1 += float(d.r @ v)
            d2 += float(v @ v)
            if nd.terminal:
                break
            wdw = nd.W @ dw[k]
            d1 += float(self.ws[k] @ wdw)
            d2 += float(dw[k] @ wdw)
            if nd.dW is not None:  # parametric noise (ocp.problem): the noise cost's θ terms
                lwd = nd.Lwth @ dth
                d1 += float(nd.lth @ dth)
                d2 += 2.0 * float(dw[k] @ lwd) + float(dth @ nd.Lthth @ dth)
            dx[k + 1] = nd.fbar + nd.A @ dx[k] + nd.B @ dw[k] + nd.C @ dth
            self.xi[k + 1] = vf.Vx[k + 1] + vf.Vxx[k + 1] @ dx[k + 1] + vf.Vxth[k + 1] @ dth
        self.step = step
        return step, d1, d2

    # ------------------------------------------------------------------ trial point
    def try_step(self, alpha: float) -> tuple[float, float]:
        """Evaluate the trial point of step α with the selected rollout into xs_try, ws_try, theta_try.

        Returns (cost, ‖gaps‖₁)."""
        p = self.problem
        state = p.state
        mode = self.options.rollout
        knots = p.knots
        vf = self.riccati
        self.theta_try[:] = self.theta + alpha * self.dtheta
        pi = p.param.pi(self.theta_try)
        xs, ws, xt, wt = self.xs, self.ws, self.xs_try, self.ws_try
        xt[0][:] = state.integrate(xs[0], alpha * self.dx[0])
        cost = p.prior.cost(state, xt[0], self.theta_try)
        gap = 0.0
        for k, nd in enumerate(knots):
            t = nd.trial
            nd.model.calc(t, xt[k], pi)
            if nd.terminal:
                cost += p.measurement_cost(k, t.r)
                break
            if mode == "multiple":
                wt[k][:] = ws[k] + alpha * self.dw[k]
            else:
                dxk = state.difference(xs[k], xt[k])
                wt[k][:] = ws[k] - alpha * (vf.k[k] + vf.P[k] @ self.dtheta) - vf.K[k] @ dxk
            p.add_noise_share(k, t.r, wt[k])
            cost += p.measurement_cost(k, t.r)
            cost += p.noise_cost(k, wt[k], alpha * self.dtheta)
            y = state.integrate(t.xnext, p.noise_tangent(wt[k]))
            if mode == "multiple":
                xt[k + 1][:] = state.integrate(xs[k + 1], alpha * self.dx[k + 1])
                gap += float(np.abs(state.difference(xt[k + 1], y)).sum())
            elif mode == "feasible" and alpha < 1.0:
                xt[k + 1][:] = state.integrate(y, -(1.0 - alpha) * nd.gap)
                gap += (1.0 - alpha) * float(np.abs(nd.gap).sum())
            else:
                xt[k + 1][:] = y
        return cost, gap

    # ------------------------------------------------------------------ main loop
    def solve(
        self,
        xs: Sequence[np.ndarray] | None = None,
        ws: Sequence[np.ndarray] | None = None,
        theta: np.ndarray | None = None,
        callback: Callable[[IterationLog], None] | None = None,
        max_iter: int | None = None,
    ) -> SolverResult:
        """Solve from (xs, ws, theta) or, for None arguments, from the stored estimate (warm start).

        ``max_iter`` overrides ``options.max_iter`` for this call (e.g. a cold first tick gets more iterations).
        """
        o = self.options
        max_iter = o.max_iter if max_iter is None else int(max_iter)
        p = self.problem
        if xs is not None:
            self.set_guess(xs, ws, self.theta if theta is None else theta)
        else:
            if ws is not None:
                self.ws = [np.array(w, dtype=float) for w in ws]
            if theta is not None:
                self.theta = np.array(theta, dtype=float)
        if len(self.xs) != p.N + 1:
            raise ValueError("no initial guess: pass xs")
        if o.rollout == "single":
            self.rollout_guess(self.xs[0], self.theta)
        t0 = time.perf_counter()
        reg = o.reg_init
        nu = o.nu_init
        hist: deque[tuple[float, float]] = deque(maxlen=max(1, o.nonmonotone_memory))
        logs: list[IterationLog] = []
        converged = False
        status = "max_iter"
        recalc = True
        cost = gap_l1 = gap_inf = np.inf
        it = 0
        stop_event = self.stop_event
        for it in range(max_iter + 1):  # noqa: B007 - `it` is reported
            if stop_event is not None and stop_event.is_set():
                status = "stopped"
                break
            if recalc:
                cost = p.calc_diff(self.xs, self.ws, self.theta)
                # a parametric noise model (its θ terms depend on the point) is refreshed at every linearisation
                if o.refresh_noise and (it == 0 or p.noise_derivative is not None):
                    cost += p.refresh_noise(self.ws)
                gaps = np.array([nd.gap for nd in p.knots[:-1]]) if p.N else np.zeros((1, 1))
                gap_l1 = float(np.abs(gaps).sum())
                gap_inf = float(np.abs(gaps).max()) if gaps.size else 0.0
                if not hist:
                    hist.append((cost, gap_l1))
            if it == max_iter and not o.final_direction:
                self.step = None  # no direction at the returned point
                break
            try:
                step, d1, d2 = self.compute_direction(reg)
            except FactorizationError:
                reg = max(reg * o.reg_factor, o.reg_base)
                logs.append(IterationLog(it, cost, cost + nu * gap_l1, gap_l1, 0.0, reg, np.nan, _el(t0), "failed"))
                if callback:
                    callback(logs[-1])
                recalc = False
                if reg > o.reg_max:
                    status = "regularisation above reg_max"
                    break
                continue
            stop = -(d1 + 0.5 * d2)
            if gap_inf <= o.tol_gap and stop <= o.tol_stop:
                converged, status = True, "converged"
                break
            if it == max_iter:
                break
            if o.max_time is not None and _el(t0) > o.max_time:
                status = "max_time"
                break
            xi_max = float(np.abs(self.xi[1:]).max()) if p.N else 0.0
            nu = max(nu, 1.1 * xi_max)
            merit = cost + nu * gap_l1
            ref = max(c + nu * g for c, g in hist)
            alpha = 1.0
            accepted = False
            while alpha >= o.alpha_min and not (stop_event is not None and stop_event.is_set()):
                c_try, g_try = self.try_step(alpha)
                m_try = c_try + nu * g_try
                dm = alpha * (d1 - nu * gap_l1) + 0.5 * alpha**2 * d2
                if np.isfinite(m_try) and m_try - ref <= o.armijo * min(dm, 0.0):
                    accepted = True
                    break
                alpha *= 0.5
            logs.append(
                IterationLog(it, cost, merit, gap_l1, alpha if accepted else 0.0, reg, stop, _el(t0), step.method)
            )
            if callback:
                callback(logs[-1])
            if accepted:
                self.xs, self.xs_try = self.xs_try, self.xs
                self.ws, self.ws_try = self.ws_try, self.ws
                self.theta[:] = self.theta_try
                hist.append((c_try, g_try))
                recalc = True
                if alpha >= 0.5:
                    reg = reg / o.reg_factor
                    if reg < o.reg_base:
                        reg = o.reg_min
                elif alpha <= 0.01:
                    reg = max(reg * o.reg_factor, o.reg_base)
            else:
                recalc = False
                reg = max(reg * o.reg_factor, o.reg_base)
                if reg > o.reg_max:
                    status = "regularisation above reg_max"
                    break
        # Every exit follows the top-of-loop linearisation of the returned point (a step is only accepted when
        # another iteration follows), so cost, gaps and the workspaces already describe the result.
        return SolverResult(
            converged=converged,
            iterations=it,
            cost=float(cost),
            gap=gap_inf,
            xs=[x.copy() for x in self.xs],
            ws=[w.copy() for w in self.ws],
            theta=self.theta.copy(),
            pi=p.param.pi(self.theta),
            arrival_hessian=None if self.step is None else self.step.hessian.copy(),
            status=status,
            log=logs,
        )

    # ------------------------------------------------------------------ covariances
    def covariance(self, k: int) -> np.ndarray:
        """Gauss–Newton covariance of (x_k, θ) at the current estimate, ((ndx + nθ), (ndx + nθ)), x_k in tangent
        coordinates at x_k (forward–backward smoothing): the information of knots < k (:meth:`marginal_prior`, or
        the arrival prior for k = 0) plus that of knots ≥ k (the backward value-function Hessian of knot k),
        inverted (pseudo-inverse if singular). Relinearises and runs one backward pass (cost ≈ one iteration).
        """
        p = self.problem
        ndx = p.ndx
        vf = self.riccati
        p.calc_diff(self.xs, self.ws, self.theta)
        backward_pass(p, self.ws, 0.0, vf)
        if k == 0:
            hess = p.prior.linearize(p.state, self.xs[0], self.theta)[2]
        else:
            hess = self.marginal_prior(k).hessian.copy()
        hess[:ndx, :ndx] += vf.Vxx[k]
        hess[:ndx, ndx:] += vf.Vxth[k]
        hess[ndx:, :ndx] += vf.Vxth[k].T
        hess[ndx:, ndx:] += vf.Vthth[k]
        return np.linalg.pinv(0.5 * (hess + hess.T), rcond=1e-14, hermitian=True)

    # ------------------------------------------------------------------ receding horizon
    def marginal_prior(self, k: int, relinearize: bool = True) -> ArrivalPrior:
        """Prior on (x_k, θ) from marginalising knots 0..k-1 (arrival prior, their measurements and noises).

        Forward (information-filter) recursion at the current estimate, Gauss–Newton: start with the prior's
        quadratic in (δx_0, δθ), gradient g_0 and Hessian H_0 (tangent at x_0). For j = 0..k-1:
          1. add knot j's measurement: H += [Rx Rθ]ᵀ[Rx Rθ], g += [Rx Rθ]ᵀ r;
          2. add its noise with δw_j = B⁻¹(δx_{j+1} − f̄ − A δx_j − C δθ) (the linearised dynamics):
             w_j + δw_j = c0 + M z, z = (δx_j, δθ, δx_{j+1}), M = [−B⁻¹A, −B⁻¹C, B⁻¹], c0 = w_j − B⁻¹ f̄,
             H_z = pad(H) + Mᵀ W M, g_z = pad(g) + Mᵀ W c0 (a noise-coupled knot's measurement, r + Rw δw + ...,
             is added here instead of in step 1, with δw substituted);
          3. eliminate δx_j by the Schur complement: H ← H_rr − H_rx H_xx⁻¹ H_xr, g ← g_r − H_rx H_xx⁻¹ g_x.
        With noise on some coordinates only (B = G not invertible), steps 2-3 eliminate the noiseless coordinates
        through the transition's constraint rows instead (:meth:`_marginalize_knot_partial`).
        The result is the exact Gauss–Newton marginal of the dropped part over (x_k, θ), with x–θ cross terms,
        returned as ArrivalPrior(x̄ = x_k, θ̄ = θ, H, g) (the linear term g keeps the dropped part's gradient, so
        the next window's optimum is unchanged to first order). This is a forward recursion: the backward value
        function V_k summarises knots k..N (the kept part), not the dropped ones.

        ``relinearize=False`` reuses the knot linearisations already in the problem: after :meth:`solve` they
        are those of the returned estimate, so this is exact there and costs no dynamics evaluation.
        """
        p = self.problem
        xs, ws, theta = self.xs, self.ws, self.theta
        if relinearize:
            p.set_theta(theta)
        _, g, h = p.prior.linearize(p.state, xs[0], theta)
        nb = p.n_consider if self.options.consider else 0
        sens = p.prior.linearize_sensitivity(p.state, xs[0], nb) if nb else None
        for j in range(k):
            nd = p.knots[j]
            if relinearize:
                p.linearize_knot(j, xs[j], xs[j + 1], ws[j])
            d = nd.data
            jr = np.hstack([d.Rx, nd.Rth])
            if not nd.coupled:  # a coupled knot's measurement joins its noise step (it depends on δw)
                h = h + jr.T @ jr
                g = g + jr.T @ d.r
                if nb:
                    sens = sens + self._consider_gradient(nd, jr)
            if p.full_noise:
                h, g, sens = self._marginalize_knot(nd, ws[j], h, g, sens, jr)
            else:
                h, g, sens = self._marginalize_knot_partial(nd, ws[j], h, g, sens, jr)
        return ArrivalPrior(xs[k].copy(), theta.copy(), 0.5 * (h + h.T), g, sens)

    def _consider_gradient(self, nd, jr: np.ndarray) -> np.ndarray:
        """∂(Jᵀ r)/∂b = Jᵀ ∂r/∂b (ndx + ntheta, nb) of a knot's measurements, J = [Rx Rθ] (zeros without one)."""
        jac = getattr(nd.model, "consider_jacobian", None)
        return jr.T @ jac if jac is not None else np.zeros((jr.shape[1], self.problem.n_consider))

    def terminal_covariance(self) -> np.ndarray:
        """Gauss–Newton covariance of (x_N, θ) (ndx + ntheta square, x_N in tangent coordinates) from the marginal of
        the whole window at the solve's last linearisation (no dynamics evaluation), pseudo-inverse if singular.

        Consider analysis (problem with consider parameters b, :attr:`EstimationProblem.n_consider` > 0): also sets
        :attr:`consider_sensitivity` S = ∂(x̂_N, θ̂)/∂b = −Σ ∂g/∂b (ndx + ntheta, nb), the first-order change of the
        estimate with constant offsets b of the measurements that the estimate assumes zero; with Σ_b their
        covariance, Σ + S Σ_b Sᵀ is the estimate's covariance including them (else None)."""
        problem = self.problem
        n = problem.N
        prior = self.marginal_prior(n, relinearize=False)  # the solve's last linearisation (no extra cost)
        _, _, hess = prior.linearize(problem.state, self.xs[n], self.theta)
        knot = problem.knots[n]
        jr = np.hstack([knot.data.Rx, knot.Rth])
        hess = hess + jr.T @ jr
        cov = np.linalg.pinv(0.5 * (hess + hess.T), rcond=1e-12, hermitian=True)
        self.consider_sensitivity = None
        if problem.n_consider and self.options.consider:
            sens = prior.linearize_sensitivity(problem.state, self.xs[n], problem.n_consider)
            self.consider_sensitivity = -cov @ (sens + self._consider_gradient(knot, jr))
        return cov

    def _marginalize_knot(
        self,
        nd,
        w: np.ndarray,
        h: np.ndarray,
        g: np.ndarray,
        sens: np.ndarray | None = None,
        jr: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Full noise (B invertible): δw = B⁻¹(δx' − f̄ − A δx − C δθ), then eliminate δx (see marginal_prior).
        ``sens`` (ndx + ntheta, nb): ∂g/∂b, mapped as g without its constant terms (None: not propagated)."""
        p = self.problem
        ndx, nth = p.ndx, p.ntheta
        n = ndx + nth
        binv = np.linalg.inv(nd.B)
        m = np.hstack([-binv @ nd.A, -binv @ nd.C, binv])
        c0 = w - binv @ nd.fbar
        hz = m.T @ nd.W @ m
        hz[:n, :n] += h
        gz = m.T @ (nd.W @ c0)
        gz[:n] += g
        if nd.dW is not None:  # parametric noise: δw = (c0 - w) + M z, δθ = z[ndx:n]
            _add_noise_parameter_terms(nd, m, c0 - w, slice(ndx, n), hz, gz)
        sz = None
        if sens is not None:
            sz = np.zeros((hz.shape[0], sens.shape[1]))
            sz[:n] = sens
        if nd.coupled:  # the measurement r + [Rx Rθ] z[:n] + Rw δw
            jz = nd.Rw @ m
            jz[:, :n] += jr
            self._add_coupled_measurement(nd, jz, nd.data.r + nd.Rw @ (c0 - w), hz, gz, sz)
        hxx, hxr, hrr = hz[:ndx, :ndx], hz[:ndx, ndx:], hz[ndx:, ndx:]
        sol = np.linalg.solve(hxx, np.column_stack([gz[:ndx], hxr] + ([] if sz is None else [sz[:ndx]])))
        m = hxr.shape[1]
        hr = hrr - hxr.T @ sol[:, 1 : 1 + m]
        gr = gz[ndx:] - hxr.T @ sol[:, 0]
        # reorder (δθ, δx_{j+1}) -> (δx_{j+1}, δθ)
        perm = np.r_[nth : nth + ndx, 0:nth]
        sr = None if sz is None else (sz[ndx:] - hxr.T @ sol[:, 1 + m :])[perm]
        return hr[np.ix_(perm, perm)], gr[perm], sr

    def _add_coupled_measurement(self, nd, jy, r0, hy, gy, sy) -> None:
        """Add a noise-coupled knot's linearised measurement r0 + jy y to a quadratic in y (in place), and its consider
        gradient jyᵀ ∂r/∂b to ``sy`` (when not None)."""
        hy += jy.T @ jy
        gy += jy.T @ r0
        cj = getattr(nd.model, "consider_jacobian", None)
        if sy is not None and cj is not None:
            sy += jy.T @ cj

    def _marginalize_knot_partial(
        self,
        nd,
        w: np.ndarray,
        h: np.ndarray,
        g: np.ndarray,
        sens: np.ndarray | None = None,
        jr: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Noise on the coordinates S only (B = G): the other rows Q of the transition are constraints.

        With δx' = f̄ + A δx + C δθ + G δw: rows S give δw = (δx' − f̄ − A δx − C δθ)_S; rows Q give
        δx_Q = A_QQ⁻¹ ((δx' − f̄ − C δθ)_Q − A_QS δx_S) (A_QQ ≈ 1 + O(dt²) is invertible also at impulse knots,
        where A_SS is singular). In the variables y = (δx_S, δθ, δx') the prior over (δx, δθ) and the noise cost are
        quadratic; δx_S is then eliminated by its Schur complement. Exact Gauss–Newton marginal, like the full-noise
        path (which needs B⁻¹)."""
        p = self.problem
        ndx, nth = p.ndx, p.ntheta
        sdims = p.noise_dims
        qdims = np.setdiff1d(np.arange(ndx), sdims)
        ns = sdims.size
        m = ns + nth + ndx
        a, c, fbar = nd.A, nd.C, nd.fbar
        ainv = np.linalg.inv(a[np.ix_(qdims, qdims)])
        t = np.zeros((ndx, m))
        t0 = np.zeros(ndx)
        t[sdims, :ns] = np.eye(ns)
        t[np.ix_(qdims, np.arange(ns))] = -ainv @ a[np.ix_(qdims, sdims)]
        t[qdims, ns : ns + nth] = -ainv @ c[qdims]
        t[np.ix_(qdims, ns + nth + qdims)] = ainv
        t0[qdims] = -ainv @ fbar[qdims]
        z = np.zeros((ndx + nth, m))
        z[:ndx] = t
        z[ndx:, ns : ns + nth] = np.eye(nth)
        z0 = np.r_[t0, np.zeros(nth)]
        mw = -(a[sdims] @ t)
        mw[:, ns : ns + nth] -= c[sdims]
        mw[np.arange(ns), ns + nth + sdims] += 1.0
        m0 = -fbar[sdims] - a[sdims] @ t0
        wm = nd.W @ mw
        hy = z.T @ h @ z + mw.T @ wm
        gy = z.T @ (g + h @ z0) + wm.T @ (w + m0)
        if nd.dW is not None:  # parametric noise: δw = m0 + mw y, δθ = y[ns:ns + nth]
            _add_noise_parameter_terms(nd, mw, m0, slice(ns, ns + nth), hy, gy)
        sy = None if sens is None else z.T @ sens
        if nd.coupled:  # the measurement r + [Rx Rθ] (z0 + z y) + Rw δw
            self._add_coupled_measurement(nd, jr @ z + nd.Rw @ mw, nd.data.r + jr @ z0 + nd.Rw @ m0, hy, gy, sy)
        huu, hur, hrr = hy[:ns, :ns], hy[:ns, ns:], hy[ns:, ns:]
        sol = np.linalg.solve(huu, np.column_stack([gy[:ns], hur] + ([] if sy is None else [sy[:ns]])))
        mr = hur.shape[1]
        hr = hrr - hur.T @ sol[:, 1 : 1 + mr]
        gr = gy[ns:] - hur.T @ sol[:, 0]
        perm = np.r_[nth : nth + ndx, 0:nth]  # (δθ, δx') -> (δx', δθ)
        sr = None if sy is None else (sy[ns:] - hur.T @ sol[:, 1 + mr :])[perm]
        return hr[np.ix_(perm, perm)], gr[perm], sr

    def shift(
        self,
        k: int,
        running: Sequence[IntervalModel],
        terminal: IntervalModel,
        inputs: Sequence[tuple[np.ndarray | None, np.ndarray | None]],
        terminal_input: tuple[np.ndarray | None, np.ndarray | None],
        noise_info: np.ndarray | float | Sequence | None = None,
        marginalize: bool = True,
        xs_new: Sequence[np.ndarray] | None = None,
    ) -> None:
        """Receding horizon: drop the first k knots, append k interval models (``running`` with ``inputs`` = [(u, z)],
        times N..N+k-1; the old terminal's measurement must be repeated in the first of them) and a new terminal
        knot (``terminal_input`` = (u, z)). θ and the kept trajectory tail are kept, new noises are zero and new
        states are ``xs_new`` (k states for times N+1..N+k) or a nonlinear rollout from the old x_N.

        The arrival prior becomes :meth:`marginal_prior` (k) (information on θ accumulates across windows); with
        ``marginalize=False`` the old prior Hessian and gradient are kept and only x̄_0 moves to the new x_0.
        """
        p = self.problem
        n_old = p.N
        if marginalize:
            prior = self.marginal_prior(k)
        else:
            old = p.prior
            sens = None if old.sensitivity is None else old.sensitivity.copy()
            prior = ArrivalPrior(self.xs[k].copy(), old.theta_bar.copy(), old.hessian.copy(), old.gradient.copy(), sens)
        p.shift(k, running, terminal, noise_info)
        p.prior = prior
        for i, (u, z) in enumerate(inputs):
            p.set_knot(n_old - k + i, u, z)
        p.set_knot(p.N, *terminal_input)
        self.xs = self.xs[k:] + [self.xs[-1].copy() for _ in range(k)]
        self.ws = self.ws[k:] + [np.zeros(p.nw) for _ in range(k)]
        if xs_new is not None:
            for i, x in enumerate(xs_new):
                self.xs[n_old - k + 1 + i] = np.array(x, dtype=float)
        else:
            self.rollout_guess(self.xs[n_old - k], self.theta, start=n_old - k)
        if self.riccati.n_knots != p.N + 1:
            self._allocate()


def _add_noise_parameter_terms(nd, mw: np.ndarray, m0: np.ndarray, th: slice, hess: np.ndarray, grad: np.ndarray):
    """Add a parametric noise cost's θ terms (ocp.problem, "Parametric noise") to a quadratic in variables y where
    δw = m0 + mw y and δθ = y[th]: ℓ_θᵀ δθ + δwᵀ L_wθ δθ + ½ δθᵀ L_θθ δθ (in place)."""
    cross = mw.T @ nd.Lwth
    hess[:, th] += cross
    hess[th, :] += cross.T
    hess[th, th] += nd.Lthth
    grad[th] += nd.lth + nd.Lwth.T @ m0


def _el(t0: float) -> float:
    return time.perf_counter() - t0
