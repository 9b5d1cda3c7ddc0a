"""Multiple-shooting optimal-estimation problem (paper eqs. 1 and 16): data, costs and linearisation.

Decision variables: states x_0..x_N on the state manifold, process noise w_0..w_{N-1} (w_k ∈ R^nw on the tangent
coordinates ``noise_dims``, all ndx of them by default) and parameters theta with pi = psi(theta) stacked per block
(10 inertial parameters per estimated body, plus any Euclidean parameter blocks). Cost:

    ½ eᵀ H e + gᵀ e            arrival prior, e = (x_0 ⊖ x̄_0, theta − θ̄)   (:class:`ArrivalPrior`)
  + Σ_k ½ w_kᵀ W_k w_k         process noise, W_k = Σ_w^{-1} (W_k(θ) with a parametric noise model, below)
  + Σ_{k=0..N} ½ ‖r_k‖²        whitened measurement residuals of the interval models (terminal knot N included;
                               r_k + Rw_k w_k for a noise-coupled model, :mod:`mcoe_ros.ocp.interval`)

subject to the dynamics x_{k+1} = f_k(x_k; pi | u_k) ⊕ G w_k, written as a zero *gap*
    c_k = (f_k(x_k) ⊕ G w_k) ⊖ x_{k+1} = difference(x_{k+1}, integrate(f_k, G w_k)),
with G (ndx, nw) the selection of the noisy tangent coordinates.

Linearisation in tangent coordinates (x_k ⊕ δx_k, w_k + δw_k, theta + δθ, x_{k+1} ⊕ δx_{k+1}):
    c_k + D_{k+1} δx_{k+1} + L_k (Fx δx_k + Fθ δθ) + Jd1 Jint1 G δw_k = 0,
with (Jint0, Jint1) = jintegrate(f_k, G w_k), (D_{k+1}, Jd1) = jdifference(x_{k+1}, y_k), L_k = Jd1 Jint0 and
Fθ = Fp dpi/dtheta. Solving for δx_{k+1} with E = (−D_{k+1})^{-1} (= 1 when the gap is zero or the state is
Euclidean) gives the form used by the Riccati recursion:
    δx_{k+1} = f̄_k + A_k δx_k + B_k δw_k + C_k δθ,   f̄ = E c,  A = E L Fx,  B = E Jd1 Jint1 G,  C = E L Fθ.
Noise restricted to Euclidean coordinates (``noise_dims`` ≥ ``state.q_block``, e.g. the velocities of a multibody
state: a documented model choice) makes B = G exactly, whatever the gaps: the noise then enters the Riccati
recursion trivially, with nw < ndx.

The problem owns one :class:`Knot` per knot (interval data for the linearisation, a second data for line-search
trials, and the linearised blocks above), created once; models are shared between knots of the same phase. The
solver's own state (value function, policy, search direction) lives in the solver (:mod:`mcoe_ros.ocp.solver`), so
a problem can be solved by any solver.

Parametric noise (``noise_derivative``): when a state-dependent noise covariance Σ_w depends on the parameters (e.g.
the velocity noise that white joint-torque noise causes, dt² (da/dτ) Σ_τ (da/dτ)ᵀ, through the mass matrix), holding
W = Σ_w⁻¹ fixed at each linearisation (``noise_model`` alone) biases θ towards parameters that shrink the noise's
effect (errors in variables: a heavier, larger-inertia body makes the noisy input matter less). With the derivative
∂Σ_w/∂π, the cost ½ wᵀ W(θ) w = ½ ‖S(θ) w‖² (S = L⁻¹, Σ_w = L Lᵀ) is differentiated in θ as well, Gauss–Newton on
the whitened residual S(θ) w: with G (nw, ntheta), G[:, i] = (∂S/∂θ_i) w = −Φ(L⁻¹ (∂Σ_w/∂θ_i) L⁻ᵀ) S w (Φ: lower
triangle, half diagonal; the derivative of the Cholesky factor), its local model is
    ½ (w + δw)ᵀ W (w + δw) + ℓ_θᵀ δθ + δwᵀ L_wθ δθ + ½ δθᵀ L_θθ δθ,   ℓ_θ = Gᵀ S w,  L_wθ = Sᵀ G,  L_θθ = Gᵀ G,
where ℓ_θ,i = ½ wᵀ (∂W/∂θ_i) w is the exact gradient. The Riccati recursion, the direction's expected decrease
and the marginalisation take ℓ_θ, L_wθ, L_θθ as the interval's θ terms (:class:`Knot`); line-search trials evaluate
½ wᵀ (W + Σ_i δθ_i dW_i) w with dW_i = −W (∂Σ_w/∂θ_i) W. For a fully actuated robot without contacts whose only
velocity noise is the torque-induced one, ½ wᵀ W(θ) w is exactly the reported torque's residual
½ ‖τ̃ − ID(x_k, x_k+1; θ)‖²_{Σ_τ⁻¹}, whose weight does not depend on θ: no body is favoured for attenuating the noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import solve_triangular

from mcoe_ros.ocp.interval import IntervalModel
from mcoe_ros.ocp.robust import RobustCost


def _as_information(info: np.ndarray | float, n: int) -> np.ndarray:
    """(n, n) information matrix from a scalar, a diagonal (n,) or a full (n, n) matrix."""
    arr = np.asarray(info, dtype=float)
    if arr.ndim == 0:
        return float(arr) * np.eye(n)
    if arr.ndim == 1:
        return np.diag(arr)
    return 0.5 * (arr + arr.T)


class EuclideanParameters:
    """pi = theta for a block of n parameters with no constraint (e.g. friction coefficients, sensor biases)."""

    def __init__(self, n: int):
        self.size = int(n)

    def pi(self, theta: np.ndarray) -> np.ndarray:
        return np.array(theta, dtype=float)

    def jacobian(self, theta: np.ndarray) -> np.ndarray:
        return np.eye(self.size)

    def theta(self, pi: np.ndarray) -> np.ndarray:
        return np.array(pi, dtype=float)


class PositiveParameters:
    """pi = exp(theta) for a block of n parameters that must stay positive (e.g. friction coefficients, rotor
    inertias); a Gaussian prior on theta is a log-normal prior on pi."""

    def __init__(self, n: int):
        self.size = int(n)

    def pi(self, theta: np.ndarray) -> np.ndarray:
        return np.exp(theta)

    def jacobian(self, theta: np.ndarray) -> np.ndarray:
        return np.diag(np.exp(theta))

    def theta(self, pi: np.ndarray) -> np.ndarray:
        pi = np.asarray(pi, dtype=float)
        if np.any(pi <= 0.0):
            raise ValueError("positive parameters need pi > 0")
        return np.log(pi)


class StackedParametrization:
    """pi = [psi_1(theta_1), ..., psi_b(theta_b)]: one smooth map per parameter block.

    ``parts`` are objects with ``pi(theta)``, ``jacobian(theta)``, ``theta(pi)`` and ``size`` (block length; 10 if
    absent), e.g. the inertial manifolds of :mod:`mcoe_ros.multibody.inertia`, :class:`EuclideanParameters` or
    :class:`PositiveParameters`.
    """

    def __init__(self, parts: Sequence[object]):
        self.parts = list(parts)
        sizes = [int(getattr(p, "size", 10)) for p in self.parts]
        self.slices = [slice(a, a + n) for a, n in zip(np.cumsum([0, *sizes[:-1]]), sizes, strict=True)]
        self.ntheta = self.npi = int(sum(sizes))

    def pi(self, theta: np.ndarray) -> np.ndarray:
        """pi (npi,) from theta (ntheta,)."""
        return np.concatenate([p.pi(theta[sl]) for p, sl in zip(self.parts, self.slices, strict=True)])

    def jacobian(self, theta: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """dpi/dtheta (npi, ntheta), block diagonal."""
        out = np.zeros((self.npi, self.ntheta)) if out is None else out
        out[:] = 0.0
        for p, sl in zip(self.parts, self.slices, strict=True):
            out[sl, sl] = p.jacobian(theta[sl])
        return out

    def theta(self, pi: np.ndarray) -> np.ndarray:
        """theta (ntheta,) with pi(theta) = pi."""
        return np.concatenate([p.theta(pi[sl]) for p, sl in zip(self.parts, self.slices, strict=True)])


@dataclass
class ArrivalPrior:
    """Quadratic prior on the arrival knot and the parameters: cost(e) = gᵀ e + ½ eᵀ H e.

    e = (x_0 ⊖ x̄_0, theta − θ̄) (ndx + ntheta,). The classical independent priors of eq. (1) are
    H = blockdiag(Σx0^{-1}, Σθ^{-1}), g = 0 (:meth:`independent`); a zero θθ block switches the parameter prior
    off. After marginalising dropped knots (:meth:`mcoe_ros.ocp.solver.MCOESolver.shift`) H has x–θ cross terms and
    g ≠ 0 carries the first-order information of the dropped part.
    """

    x_bar: np.ndarray  #: (nx,)
    theta_bar: np.ndarray  #: (ntheta,)
    hessian: np.ndarray  #: (ndx + ntheta, ndx + ntheta)
    gradient: np.ndarray = field(default=None)  #: (ndx + ntheta,), zeros if None
    #: (ndx + ntheta, nb) ∂g/∂b: how the gradient of the marginalised past moves with the consider parameters b
    #: (unestimated sensor biases, :attr:`mcoe_ros.ocp.interval.IntervalModel.consider_jacobian`); None = zeros
    sensitivity: np.ndarray | None = None

    def __post_init__(self):
        n = self.hessian.shape[0]
        if self.gradient is None:
            self.gradient = np.zeros(n)
        self.hessian = 0.5 * (self.hessian + self.hessian.T)

    def sensitivity_or_zeros(self, nb: int) -> np.ndarray:
        """:attr:`sensitivity`, or zeros (ndx + ntheta, nb) when it is None."""
        if self.sensitivity is None:
            return np.zeros((self.hessian.shape[0], nb))
        return self.sensitivity

    @classmethod
    def independent(
        cls,
        x_bar: np.ndarray,
        info_x: np.ndarray | float,
        ndx: int,
        theta_bar: np.ndarray,
        info_theta: np.ndarray | float | None = None,
    ) -> ArrivalPrior:
        """Block-diagonal prior from information matrices Σx0^{-1} and Σθ^{-1} (None: no parameter prior)."""
        nth = len(theta_bar)
        hess = np.zeros((ndx + nth, ndx + nth))
        hess[:ndx, :ndx] = _as_information(info_x, ndx)
        if info_theta is not None:
            hess[ndx:, ndx:] = _as_information(info_theta, nth)
        return cls(np.array(x_bar, dtype=float), np.array(theta_bar, dtype=float), hess)

    def with_mean_sensitivity(self, theta_sensitivity: np.ndarray) -> ArrivalPrior:
        """The prior whose parameter mean moves with the consider parameters b as θ̄ + S_θ b (``theta_sensitivity`` S_θ
        (ntheta, nb), e.g. a belief from an earlier solve's estimate): the gradient at fixed (x̄, θ̄) becomes
        g − H[:, θ] S_θ b, so :attr:`sensitivity` gains −H[:, θ] S_θ."""
        nth = len(self.theta_bar)
        sens = np.asarray(theta_sensitivity, dtype=float)
        add = -self.hessian[:, -nth:] @ sens
        base = self.sensitivity_or_zeros(sens.shape[1])
        return ArrivalPrior(self.x_bar.copy(), self.theta_bar.copy(), self.hessian, self.gradient.copy(), base + add)

    def with_parameter_noise(self, indices: Sequence[int], variances: np.ndarray) -> ArrivalPrior:
        """The prior after independent random-walk noise of ``variances`` (k,) on the parameters theta[indices]
        (e.g. slowly drifting sensor biases between two windows): the covariance of those entries grows by the
        variances, the mean is unchanged. In information form (Woodbury, no inverse of H needed), with P the selection
        of the entries and Q = diag(variances): H' = H - H P (Q⁻¹ + Pᵀ H P)⁻¹ Pᵀ H, g' = g - H P (Q⁻¹ + Pᵀ H P)⁻¹ Pᵀ g.
        """
        idx = len(self.hessian) - len(self.theta_bar) + np.asarray(indices, dtype=int)
        hp = self.hessian[:, idx]
        inner = hp[idx] + np.diag(1.0 / np.asarray(variances, dtype=float))
        sens = self.sensitivity
        rhs = [hp.T, self.gradient[idx]] + ([] if sens is None else [sens[idx]])
        sol = np.linalg.solve(inner, np.column_stack(rhs))
        n = hp.shape[0]
        hess = self.hessian - hp @ sol[:, :n]
        grad = self.gradient - hp @ sol[:, n]
        if sens is not None:  # g is linear in the consider parameters: the same map
            sens = sens - hp @ sol[:, n + 1 :]
        return ArrivalPrior(self.x_bar.copy(), self.theta_bar.copy(), hess, grad, sens)

    def error(self, state, x0: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """e (ndx + ntheta,) at (x0, theta)."""
        return np.concatenate([state.difference(self.x_bar, x0), theta - self.theta_bar])

    def cost(self, state, x0: np.ndarray, theta: np.ndarray) -> float:
        e = self.error(state, x0, theta)
        return float(self.gradient @ e + 0.5 * e @ self.hessian @ e)

    def linearize(self, state, x0: np.ndarray, theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """(cost, gradient (ndx+ntheta,), Gauss–Newton Hessian) in the tangent coordinates (δx_0, δθ) at (x0, theta).

        With T = blockdiag(d(x_0 ⊖ x̄_0)/dx_0, 1): gradient = Tᵀ(g + H e), Hessian = Tᵀ H T (the second derivative
        of the manifold difference is dropped).
        """
        ndx = state.ndx
        e = self.error(state, x0, theta)
        jx = state.jdifference(self.x_bar, x0)[1]
        grad = self.gradient + self.hessian @ e
        hess = self.hessian.copy()
        hess[:ndx, :] = jx.T @ hess[:ndx, :]
        hess[:, :ndx] = hess[:, :ndx] @ jx
        grad[:ndx] = jx.T @ grad[:ndx]
        return float(self.gradient @ e + 0.5 * e @ self.hessian @ e), grad, hess

    def linearize_sensitivity(self, state, x0: np.ndarray, nb: int) -> np.ndarray:
        """∂(gradient of :meth:`linearize`)/∂b (ndx + ntheta, nb) at x0: Tᵀ :attr:`sensitivity` (zeros if None)."""
        sens = self.sensitivity_or_zeros(nb).copy()
        if self.sensitivity is not None:
            ndx = state.ndx
            sens[:ndx] = state.jdifference(self.x_bar, x0)[1].T @ sens[:ndx]
        return sens


class Knot:
    """Everything knot k of the problem needs across iterations, allocated once.

    model: the knot's interval model; data / trial: its IntervalData for the linearisation point and for line-search
    trials (they share the u and z arrays). W, W_sqrt (nw, nw): process-noise information of interval k and an
    upper factor (W = W_sqrtᵀ W_sqrt); W_base (nw, nw): the information the interval was given (constructor, shift),
    which a state-dependent noise model (:meth:`EstimationProblem.refresh_noise`) builds on. With a robust cost
    (:mod:`mcoe_ros.ocp.robust`) W is the IRLS-weighted information ρ'(s) W_quad of the last linearisation, W_quad
    the noise model's (W_sqrt its factor), r_weights the weights of the knot's robust residual groups; without one
    W_quad is W. Linearisation: Fth (ndx, ntheta),
    Rth (nr, ntheta), A (ndx, ndx), B (ndx, nw), C (ndx, ntheta), gap c (ndx,), fbar = E c (ndx,), y = f ⊕ G w (nx,).
    Parametric noise (module docstring; set by :meth:`EstimationProblem.refresh_noise`, None / zero otherwise):
    dW (ntheta, nw, nw) = ∂W/∂θ, and the θ terms of the noise cost at the knot's w: lth (ntheta,), Lwth (nw, ntheta),
    Lthth (ntheta, ntheta).
    """

    def __init__(
        self, model: IntervalModel, ndx: int, ntheta: int, noise_info: np.ndarray, terminal: bool, nw: int | None = None
    ):
        nw = ndx if nw is None else nw
        self.model = model
        self.terminal = terminal
        self.data = model.create_data()
        self.trial = model.create_data()
        self.trial.u = self.data.u
        self.trial.z = self.data.z
        self.W = _as_information(noise_info, nw)
        self.W_base = self.W.copy()
        self.W_sqrt = self._sqrt(self.W)
        self.W_quad = self.W
        self.r_weights = np.ones(0)
        nr = model.nr
        self.Fth = np.zeros((ndx, ntheta))
        self.Rth = np.zeros((nr, ntheta))
        self.A = np.zeros((ndx, ndx))
        self.B = np.zeros((ndx, nw))
        self.C = np.zeros((ndx, ntheta))
        self.gap = np.zeros(ndx)
        self.fbar = np.zeros(ndx)
        self.y = np.zeros(model.state.nx)
        #: (nr, nw) ∂r/∂w of a noise-coupled model (:mod:`mcoe_ros.ocp.interval`), set at each linearisation; None:
        #: the residual does not depend on the noise
        self.Rw: np.ndarray | None = np.zeros((nr, nw)) if model.noise_coupled else None
        self.dW: np.ndarray | None = None
        self.lth = np.zeros(ntheta)
        self.Lwth = np.zeros((nw, ntheta))
        self.Lthth = np.zeros((ntheta, ntheta))

    def set_noise_derivative(self, dcov: np.ndarray, w: np.ndarray) -> None:
        """Parametric noise (module docstring): from ∂Σ_w/∂θ ``dcov`` (ntheta, nw, nw) set dW and the noise cost's θ
        terms ℓ_θ, L_wθ, L_θθ at the noise w (nw,) (Cholesky factor of Σ_w = W⁻¹)."""
        self.dW = -(self.W @ dcov @ self.W)
        chol = np.linalg.cholesky(np.linalg.inv(self.W))
        sqrt_w = solve_triangular(chol, np.eye(len(w)), lower=True)  # S = L⁻¹
        y = sqrt_w @ w
        phi = np.tril(sqrt_w @ dcov @ sqrt_w.T)
        idx = np.arange(len(w))
        phi[:, idx, idx] *= 0.5
        g = -(phi @ y).T  # (nw, ntheta): column i = (∂S/∂θ_i) w
        self.lth[:] = g.T @ y
        self.Lwth[:] = solve_triangular(chol, g, lower=True, trans="T")  # Sᵀ G
        self.Lthth[:] = g.T @ g

    @property
    def coupled(self) -> bool:
        """The knot's residual depends on its interval's noise (a noise-coupled running model)."""
        return self.Rw is not None and not self.terminal

    @staticmethod
    def _sqrt(info: np.ndarray) -> np.ndarray:
        """Upper factor S with info = Sᵀ S (eigen-based if info is only semidefinite)."""
        try:
            return np.linalg.cholesky(info).T
        except np.linalg.LinAlgError:
            evals, evecs = np.linalg.eigh(info)
            return (evecs * np.sqrt(np.clip(evals, 0.0, None))).T


class EstimationProblem:
    """Horizon of N intervals (one model per interval; phases and reset maps are just other models) and a terminal
    knot (measurement only; its xnext is ignored), with an arrival prior and a parametrization.

    Args:
        running: N interval models (knots k = 0..N-1).
        terminal: model of knot N.
        prior: :class:`ArrivalPrior`.
        parametrization: :class:`StackedParametrization`, or a list of per-block parametrizations.
        noise_info: process-noise information W = Σw^{-1}: scalar, (nw,), (nw, nw) or a list of N of those.
        noise_dims: the tangent coordinates that carry process noise (None: all ndx); a proper subset must lie in the
            Euclidean coordinates of the state (index ≥ ``state.q_block``), so that B = G exactly.
        noise_model: optional ``noise_model(knot) -> W`` (nw, nw) evaluated from a knot's linearisation (and its
            given information ``knot.W_base``) by :meth:`refresh_noise` (state-dependent process noise, e.g. induced
            by joint-torque noise); W stays fixed between refreshes so that costs within one solve are comparable.
        noise_derivative: optional ``noise_derivative(knot) -> (npi, nw, nw)``, the derivative of the noise model's
            covariance W⁻¹ with respect to pi at the knot's linearisation (needs ``noise_model``, no robust cost):
            the noise cost's θ-dependence then enters the linearisation (module docstring, "Parametric noise"),
            and W is refreshed at every linearisation.
        robust: optional :class:`~mcoe_ros.ocp.robust.RobustCost` (robust losses on the process noise and on groups
            of measurement residuals, solved by IRLS: see :mod:`mcoe_ros.ocp.robust`); None = all quadratic.
    """

    def __init__(
        self,
        running: Sequence[IntervalModel],
        terminal: IntervalModel,
        prior: ArrivalPrior,
        parametrization: StackedParametrization | Sequence[object],
        noise_info: np.ndarray | float | Sequence,
        noise_dims: Sequence[int] | None = None,
        noise_model=None,
        robust: RobustCost | None = None,
        noise_derivative=None,
    ):
        if noise_derivative is not None and (noise_model is None or robust is not None):
            raise ValueError("a noise derivative needs a noise model and no robust cost")
        self.robust = robust
        self.noise_derivative = noise_derivative
        self.state = terminal.state
        self.ndx = self.state.ndx
        self._nv_block = int(getattr(self.state, "q_block", 0))  # block-diagonal manifold Jacobians (ocp.state)
        dims = np.arange(self.ndx) if noise_dims is None else np.unique(np.asarray(noise_dims, dtype=int))
        self.full_noise = dims.size == self.ndx
        if not self.full_noise and (dims.size == 0 or dims.min() < self._nv_block or dims.max() >= self.ndx):
            raise ValueError(f"noise_dims must be Euclidean tangent coordinates in [{self._nv_block}, {self.ndx})")
        self.noise_dims = dims
        self.nw = int(dims.size)
        self.noise_model = noise_model
        #: G (ndx, nw): noise coordinates -> tangent space; B = G exactly when the noise is not full
        self.noise_map = np.eye(self.ndx)[:, dims]
        if not isinstance(parametrization, StackedParametrization):
            parametrization = StackedParametrization(parametrization)
        self.param = parametrization
        self.ntheta = parametrization.ntheta
        self.npi = parametrization.npi
        if terminal.npi != self.npi:
            raise ValueError(f"interval models have npi={terminal.npi}, parametrization gives {self.npi}")
        self.prior = prior
        #: number of consider parameters b (columns of the models' ``consider_jacobian``; 0: none)
        jacs = [getattr(m, "consider_jacobian", None) for m in (*running, terminal)]
        self.n_consider = max((j.shape[1] for j in jacs if j is not None), default=0)
        infos = self._noise_list(noise_info, len(running))
        self.knots: list[Knot] = [self._knot(m, w, False) for m, w in zip(running, infos, strict=True)]
        self.knots.append(self._knot(terminal, np.eye(self.nw), True))
        self.pi = np.zeros(self.npi)
        self.dpi = np.zeros((self.npi, self.ntheta))  #: dpi/dtheta at the last linearisation
        self._eye = np.eye(self.ndx)

    def _knot(self, model: IntervalModel, noise_info, terminal: bool) -> Knot:
        if model.noise_coupled and self.robust is not None:
            raise ValueError("a noise-coupled interval model needs quadratic costs (no robust cost)")
        knot = Knot(model, self.ndx, self.ntheta, noise_info, terminal, self.nw)
        if self.robust is not None:
            knot.W_quad = knot.W.copy()
        if not self.full_noise:
            knot.B[:] = self.noise_map  # exact and constant (see module docstring)
        return knot

    def noise_tangent(self, w: np.ndarray) -> np.ndarray:
        """G w: the tangent vector (ndx,) of a noise vector w (nw,)."""
        if self.full_noise:
            return w
        out = np.zeros(self.ndx)
        out[self.noise_dims] = w
        return out

    def _noise_list(self, noise_info, n: int) -> list:
        if isinstance(noise_info, (list, tuple)):
            if len(noise_info) != n:
                raise ValueError("noise_info list must have one entry per interval")
            return list(noise_info)
        return [noise_info] * n

    @property
    def N(self) -> int:  # noqa: N802 - the paper's horizon length
        return len(self.knots) - 1

    def set_knot(self, k: int, u: np.ndarray | None = None, z: np.ndarray | None = None) -> None:
        """Write the known input u and the measurement z of knot k (in place, seen by both datas)."""
        if u is not None:
            self.knots[k].data.u[:] = u
        if z is not None:
            self.knots[k].data.z[:] = z

    # ------------------------------------------------------------------ evaluation
    def noise_cost(self, k: int, w: np.ndarray, dtheta: np.ndarray | None = None) -> float:
        """Process-noise cost ½ wᵀ W w of interval k (robust: ½ ρ(wᵀ W_quad w)); with a parametric noise model and
        ``dtheta`` (the step from the linearisation's θ), ½ wᵀ (W + Σ_i dθ_i dW_i) w."""
        if self.robust is not None:
            return self.robust.noise_cost(self.knots[k].W_quad, w)
        nd = self.knots[k]
        cost = 0.5 * float(w @ nd.W @ w)
        if nd.dW is not None and dtheta is not None:
            cost += 0.5 * float(w @ np.tensordot(dtheta, nd.dW, axes=1) @ w)
        return cost

    def add_noise_share(self, k: int, r: np.ndarray, w: np.ndarray) -> None:
        """r += Rw w in place: the noise share of knot k's residual (noise-coupled knots; nothing otherwise)."""
        nd = self.knots[k]
        if nd.coupled:
            r += nd.Rw @ w

    def measurement_cost(self, k: int, r: np.ndarray) -> float:
        """Measurement cost of knot k's whitened residual r (nr,): ½ ‖r‖² (robust: ½ Σ ρ over its groups)."""
        if self.robust is not None:
            return self.robust.measurement_cost(self.knots[k].model, r)
        return 0.5 * float(r @ r)

    def _weigh_noise(self, nd: Knot, w: np.ndarray) -> float:
        """IRLS on interval noise: W = ρ'(wᵀ W_quad w) W_quad; returns ½ ρ(wᵀ W_quad w)."""
        rob = self.robust
        np.multiply(nd.W_quad, rob.noise_weight(nd.W_quad, w), out=nd.W)
        return rob.noise_cost(nd.W_quad, w)

    def calc_diff(self, xs: Sequence[np.ndarray], ws: Sequence[np.ndarray], theta: np.ndarray) -> float:
        """Linearise at (xs (N+1, nx), ws (N, ndx), theta (ntheta,)): model Jacobians, Fθ, Rθ, gaps, A, B, C.

        dpi/dtheta is computed once. Returns the total cost (prior + noise + measurements).
        """
        self.pi[:] = self.param.pi(theta)
        self.param.jacobian(theta, out=self.dpi)
        cost = self.prior.cost(self.state, xs[0], theta)
        n = self.N
        for k in range(n + 1):
            cost += self.linearize_knot(k, xs[k], xs[k + 1] if k < n else None, ws[k] if k < n else None)
        return cost

    def linearize_knot(self, k: int, x: np.ndarray, x_next: np.ndarray | None, w: np.ndarray | None) -> float:
        """calc_diff of knot k at (x, self.pi) and its Rθ, Fθ, gap, f̄, A, B, C; returns its measurement + noise cost.

        Uses ``self.pi`` and ``self.dpi`` (set by :meth:`calc_diff` or :meth:`set_theta`).
        """
        state = self.state
        nd = self.knots[k]
        d = nd.data
        nd.model.calc_diff(d, x, self.pi)
        if nd.coupled:
            nd.Rw[:] = d.Rw[:, self.noise_dims]
            d.r += nd.Rw @ w
        np.matmul(d.Rp, self.dpi, out=nd.Rth)
        if self.robust is None:
            cost = 0.5 * float(d.r @ d.r)
        else:  # IRLS: r, Rx, Rθ of each robust group scaled by √ρ'(s) (d.Rp is left as the model wrote it)
            cost, nd.r_weights = self.robust.reweight(nd.model, d.r, d.Rx, nd.Rth)
        if nd.terminal:
            return cost
        np.matmul(d.Fp, self.dpi, out=nd.Fth)
        cost += 0.5 * float(w @ nd.W @ w) if self.robust is None else self._weigh_noise(nd, w)
        gw = self.noise_tangent(w)
        nd.y[:] = state.integrate(d.xnext, gw)
        nd.gap[:] = state.difference(x_next, nd.y)
        jint0, jint1 = state.jintegrate(d.xnext, gw)
        jd0, jd1 = state.jdifference(x_next, nd.y)
        nv = self._nv_block
        if 0 < nv < self.ndx:
            # all manifold Jacobians are blockdiag(J_q, ±1_v) -> work on the (nv, nv) q-blocks
            emat = -np.linalg.inv(jd0[:nv, :nv])
            g = emat @ jd1[:nv, :nv]
            if self.full_noise:
                nd.B[:] = self._eye
                np.matmul(g, jint1[:nv, :nv], out=nd.B[:nv, :nv])
            g = g @ jint0[:nv, :nv]
            nd.A[:] = d.Fx
            np.matmul(g, d.Fx[:nv], out=nd.A[:nv])
            nd.C[:] = nd.Fth
            np.matmul(g, nd.Fth[:nv], out=nd.C[:nv])
            nd.fbar[:] = nd.gap
            np.matmul(emat, nd.gap[:nv], out=nd.fbar[:nv])
            return cost
        emat = -np.linalg.inv(jd0)
        g = emat @ jd1
        if self.full_noise:
            np.matmul(g, jint1, out=nd.B)
        g = g @ jint0
        np.matmul(g, d.Fx, out=nd.A)
        np.matmul(g, nd.Fth, out=nd.C)
        np.matmul(emat, nd.gap, out=nd.fbar)
        return cost

    def refresh_noise(self, ws: Sequence[np.ndarray]) -> float:
        """Set every interval's W from ``noise_model`` at the current linearisation (after calc_diff), and with a
        ``noise_derivative`` its dW and θ terms at the noises ``ws``; returns the change of the total noise cost at
        ``ws`` (0 without a noise model)."""
        if self.noise_model is None:
            return 0.0
        delta = 0.0
        for k, knot in enumerate(self.knots[:-1]):
            w = ws[k]
            if self.robust is not None:
                before = self.noise_cost(k, w)
                knot.W_quad[:] = self.noise_model(knot)
                knot.W_sqrt[:] = Knot._sqrt(knot.W_quad)
                delta += self._weigh_noise(knot, w) - before
                continue
            before = float(w @ knot.W @ w)
            knot.W[:] = self.noise_model(knot)
            knot.W_sqrt[:] = Knot._sqrt(knot.W)
            if self.noise_derivative is not None:
                knot.set_noise_derivative(np.einsum("ji,jab->iab", self.dpi, self.noise_derivative(knot)), w)
            delta += 0.5 * (float(w @ knot.W @ w) - before)
        return delta

    def set_theta(self, theta: np.ndarray) -> None:
        """Set ``self.pi`` = psi(theta) and ``self.dpi`` = dpi/dtheta."""
        self.pi[:] = self.param.pi(theta)
        self.param.jacobian(theta, out=self.dpi)

    # ------------------------------------------------------------------ receding horizon
    def shift(
        self,
        k: int,
        running: Sequence[IntervalModel],
        terminal: IntervalModel,
        noise_info: np.ndarray | float | Sequence | None = None,
    ) -> None:
        """Drop the first k knots and the terminal knot, append ``running`` (k models, times N..N+k-1) and a new
        ``terminal``. Knots of dropped knots are recycled when their model matches (u, z of the recycled knots
        keep stale values: set them with :meth:`set_knot`). ``noise_info`` (one for all new intervals or a list of
        k) defaults to the given information ``W_base`` of the last kept interval.
        """
        if len(running) != k or not 0 < k <= self.N:
            raise ValueError("shift needs 0 < k <= N and k new running models")
        old = self.knots
        pool = old[:k] + [old[-1]]
        default_w = old[-2].W_base.copy()
        infos = self._noise_list(default_w if noise_info is None else noise_info, k)

        def take(model: IntervalModel, info, terminal_: bool) -> Knot:
            for i, cand in enumerate(pool):
                if cand.model is model:
                    knot = pool.pop(i)
                    knot.terminal = terminal_
                    knot.W[:] = _as_information(info, self.nw)
                    knot.W_base[:] = knot.W
                    knot.W_sqrt[:] = Knot._sqrt(knot.W)
                    knot.dW = None  # until the next refresh_noise (parametric noise)
                    knot.lth[:] = 0.0
                    knot.Lwth[:] = 0.0
                    knot.Lthth[:] = 0.0
                    if self.robust is not None:
                        knot.W_quad[:] = knot.W
                    return knot
            return self._knot(model, info, terminal_)

        new = [take(m, w, False) for m, w in zip(running, infos, strict=True)]
        self.knots = old[k:-1] + new + [take(terminal, np.eye(self.nw), True)]
