"""Parametrized Riccati recursion (paper eqs. 21-27) and the arrival-knot solve (eqs. 28-31).

Gauss–Newton throughout: the Hessians keep only first-derivative products, i.e. the terms V'_x·f_xx, V'_x·f_xw,
V'_x·f_xθ, V'_x·f_θθ of eq. (21) (dynamics curvature, including that of the manifold retraction) and the residual
curvature Σ r_i ∇²r_i of the measurements are dropped. Hence ℓ_xx = Rxᵀ Rx, ℓ_xθ = Rxᵀ Rθ, ℓ_θθ = Rθᵀ Rθ,
ℓ_ww = W and ℓ_xw = 0; ℓ_wθ = 0 too, unless the noise cost depends on θ (a parametric noise model, see
:mod:`mcoe_ros.ocp.problem`: then the knot's ℓ_θ, ℓ_wθ = L_wθ and ℓ_θθ = L_θθ join Q_θ, Q_wθ and Q_θθ). A
noise-coupled knot (residual r + Rw w, :mod:`mcoe_ros.ocp.interval`) adds ℓ_w += Rwᵀ r, ℓ_ww += Rwᵀ Rw,
ℓ_xw = Rxᵀ Rw and ℓ_wθ += Rwᵀ Rθ (r there includes Rw w).

Recursion (knot k, primes = knot k+1, linearised dynamics δx' = f̄ + A δx + B δw + C δθ, see
:mod:`mcoe_ros.ocp.problem`):
    V⁺_x = V'_x + V'_xx f̄,    V⁺_θ = V'_θ + V'_xθᵀ f̄                         (gap-deflected gradients)
    Q_x = ℓ_x + Aᵀ V⁺_x,   Q_w = W w + Bᵀ V⁺_x,   Q_θ = ℓ_θ + V⁺_θ + Cᵀ V⁺_x
    Q_xx = ℓ_xx + Aᵀ V'_xx A,   Q_xw = Aᵀ V'_xx B,   Q_ww = W + Bᵀ V'_xx B + μ 1
    Q_xθ = ℓ_xθ + Aᵀ (V'_xθ + V'_xx C),   Q_wθ = Bᵀ (V'_xθ + V'_xx C)
    Q_θθ = ℓ_θθ + V'_θθ + Cᵀ V'_xθ + V'_xθᵀ C + Cᵀ V'_xx C
    policy δw = −k − K δx − P δθ with [k K P] = Q_ww^{-1} [Q_w  Q_xwᵀ  Q_wθ]
    V_x = Q_x − Q_xw k,  V_θ = Q_θ − Q_wθᵀ k,  V_xx = Q_xx − Q_xw K,  V_xθ = Q_xθ − Q_xw P,  V_θθ = Q_θθ − Q_wθᵀ P.

The value function and the policy of every knot live in a :class:`RiccatiWorkspace` owned by the solver.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from mcoe_ros.ocp.problem import EstimationProblem


class FactorizationError(RuntimeError):
    """A matrix that must be positive definite (Q_ww or the arrival system) is not."""


class RiccatiWorkspace:
    """Value function and policy of knots 0..n-1, stacked: Vx (n, ndx), Vth (n, nθ), Vxx (n, ndx, ndx),
    Vxth (n, ndx, nθ), Vthth (n, nθ, nθ); policy k (n, nw), K (n, nw, ndx), P (n, nw, nθ) (terminal row unused)."""

    def __init__(self, n_knots: int, ndx: int, ntheta: int, nw: int | None = None):
        nw = ndx if nw is None else nw
        self.n_knots = n_knots
        self.Vx = np.zeros((n_knots, ndx))
        self.Vth = np.zeros((n_knots, ntheta))
        self.Vxx = np.zeros((n_knots, ndx, ndx))
        self.Vxth = np.zeros((n_knots, ndx, ntheta))
        self.Vthth = np.zeros((n_knots, ntheta, ntheta))
        self.k = np.zeros((n_knots, nw))
        self.K = np.zeros((n_knots, nw, ndx))
        self.P = np.zeros((n_knots, nw, ntheta))
        self._rhs = np.empty((nw, 1 + ndx + ntheta))


def backward_pass(problem: EstimationProblem, ws: list[np.ndarray], reg: float, vf: RiccatiWorkspace) -> None:
    """Fill every knot's value function and policy in ``vf`` from the current linearisation (after ``calc_diff``).

    ``reg`` (μ ≥ 0) is the Levenberg–Marquardt term added to Q_ww. Raises :class:`FactorizationError`.
    """
    ndx = problem.ndx
    knots = problem.knots
    n = len(knots) - 1
    term = knots[-1]
    d = term.data
    np.matmul(d.Rx.T, d.r, out=vf.Vx[n])
    np.matmul(term.Rth.T, d.r, out=vf.Vth[n])
    np.matmul(d.Rx.T, d.Rx, out=vf.Vxx[n])
    np.matmul(d.Rx.T, term.Rth, out=vf.Vxth[n])
    np.matmul(term.Rth.T, term.Rth, out=vf.Vthth[n])
    rhs = vf._rhs
    for k in range(n - 1, -1, -1):
        nd = knots[k]
        d = nd.data
        vxx = vf.Vxx[k + 1]
        vxth = vf.Vxth[k + 1]
        vxp = vf.Vx[k + 1] + vxx @ nd.fbar
        vthp = vf.Vth[k + 1] + vxth.T @ nd.fbar
        va = vxx @ nd.A
        vb = vxx @ nd.B
        vc = vxth + vxx @ nd.C
        at, bt = nd.A.T, nd.B.T
        # Q terms
        qx = d.Rx.T @ d.r + at @ vxp
        qw = nd.W @ ws[k] + bt @ vxp
        qth = nd.Rth.T @ d.r + vthp + nd.C.T @ vxp
        qxx = d.Rx.T @ d.Rx + at @ va
        qxw = at @ vb
        qww = nd.W + bt @ vb
        qxth = d.Rx.T @ nd.Rth + at @ vc
        qwth = bt @ vc
        cv = nd.C.T @ vxth
        qthth = nd.Rth.T @ nd.Rth + vf.Vthth[k + 1] + cv + cv.T + nd.C.T @ (vxx @ nd.C)
        if nd.coupled:  # the residual r + Rw w depends on the noise: ℓ_w, ℓ_ww, ℓ_xw, ℓ_wθ
            rw = nd.Rw
            qw += rw.T @ d.r
            qww += rw.T @ rw
            qxw += d.Rx.T @ rw
            qwth += rw.T @ nd.Rth
        if nd.dW is not None:  # parametric noise: the noise cost's θ terms
            qth += nd.lth
            qwth += nd.Lwth
            qthth += nd.Lthth
        if reg > 0.0:
            qww[np.diag_indices(qww.shape[0])] += reg
        try:
            fac = cho_factor(qww, lower=True, check_finite=False)
        except np.linalg.LinAlgError as err:
            raise FactorizationError(f"Q_ww not positive definite at knot {k}") from err
        rhs[:, 0] = qw
        rhs[:, 1 : 1 + ndx] = qxw.T
        rhs[:, 1 + ndx :] = qwth
        sol = cho_solve(fac, rhs, check_finite=False)
        if not np.all(np.isfinite(sol)):
            raise FactorizationError(f"non-finite policy at knot {k}")
        vf.k[k] = sol[:, 0]
        vf.K[k] = sol[:, 1 : 1 + ndx]
        vf.P[k] = sol[:, 1 + ndx :]
        vf.Vx[k] = qx - qxw @ vf.k[k]
        vf.Vth[k] = qth - qwth.T @ vf.k[k]
        vxx_new = qxx - qxw @ vf.K[k]
        vf.Vxx[k] = 0.5 * (vxx_new + vxx_new.T)
        vf.Vxth[k] = qxth - qxw @ vf.P[k]
        vthth_new = qthth - qwth.T @ vf.P[k]
        vf.Vthth[k] = 0.5 * (vthth_new + vthth_new.T)


@dataclass
class ArrivalStep:
    """Solution of the arrival system (eq. 28) and what the stopping test and covariances need."""

    dx0: np.ndarray  #: (ndx,)
    dtheta: np.ndarray  #: (ntheta,)
    hessian: np.ndarray  #: (ndx + ntheta, ndx + ntheta) arrival-knot Hessian [[Vxx, Vxθ], [Vxθᵀ, Vθθ]] incl. prior
    gradient: np.ndarray  #: (ndx + ntheta,)
    method: str  #: 'schur' or 'nullspace'
    null_dim: int  #: dimension of the numerical nullspace of V_θθ (0 for Schur)


def arrival_system(
    problem: EstimationProblem, x0: np.ndarray, theta: np.ndarray, vf: RiccatiWorkspace
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Arrival knot: (prior gradient, prior Hessian, gradient, Hessian), the last two = knot-0 value function plus
    the linearised prior, each over (δx_0, δθ) of size ndx + ntheta."""
    ndx = problem.ndx
    _, pgrad, phess = problem.prior.linearize(problem.state, x0, theta)
    grad = pgrad.copy()
    hess = phess.copy()
    grad[:ndx] += vf.Vx[0]
    grad[ndx:] += vf.Vth[0]
    hess[:ndx, :ndx] += vf.Vxx[0]
    hess[:ndx, ndx:] += vf.Vxth[0]
    hess[ndx:, :ndx] += vf.Vxth[0].T
    hess[ndx:, ndx:] += vf.Vthth[0]
    return pgrad, phess, grad, 0.5 * (hess + hess.T)


def _chol(mat: np.ndarray, what: str):
    try:
        fac = cho_factor(mat, lower=True, check_finite=False)
    except np.linalg.LinAlgError as err:
        raise FactorizationError(f"{what} not positive definite") from err
    if not np.all(np.isfinite(fac[0])):
        raise FactorizationError(f"{what}: non-finite factor")
    return fac


def range_basis(vthth: np.ndarray, rank_tol: float) -> tuple[np.ndarray, np.ndarray, int]:
    """Basis Y of the complement of the numerical nullspace of V_θθ, with Yᵀ V_θθ Y = diag(λ_y).

    Scale-invariant rank decision (θ mixes log-mass, kg m, rad and log second moments): with D = diag(V_θθ),
    coordinates with D_ii ≤ rank_tol · max(D) are null; the rest is Jacobi-scaled, S = D^{-1/2} V_θθ D^{-1/2} (unit
    diagonal), eigen-decomposed S = U Λ Uᵀ, and eigenvectors with λ ≤ rank_tol · λ_max(S) are null. Returns
    (Y = D^{-1/2} U_kept (nθ, ny), λ_y (ny,), nullspace dimension nθ − ny).
    """
    nth = vthth.shape[0]
    diag = np.diag(vthth).copy()
    dmax = float(diag.max()) if nth else 0.0
    active = diag > rank_tol * dmax if dmax > 0.0 else np.zeros(nth, dtype=bool)
    idx = np.flatnonzero(active)
    if idx.size == 0:
        return np.zeros((nth, 0)), np.zeros(0), nth
    inv_sqrt = 1.0 / np.sqrt(diag[idx])
    scaled = vthth[np.ix_(idx, idx)] * inv_sqrt[:, None] * inv_sqrt[None, :]
    evals, evecs = np.linalg.eigh(0.5 * (scaled + scaled.T))
    keep = evals > rank_tol * max(float(evals[-1]), 0.0)
    y = np.zeros((nth, int(keep.sum())))
    y[idx] = inv_sqrt[:, None] * evecs[:, keep]
    return y, evals[keep], nth - y.shape[1]


def solve_arrival(
    hess: np.ndarray, grad: np.ndarray, ndx: int, reg: float, method: str = "auto", rank_tol: float = 1e-9
) -> ArrivalStep:
    """Solve [[Vxx, Vxθ], [Vxθᵀ, Vθθ]] (δx_0, δθ) = −(V_x, V_θ) (eq. 28) with μ = ``reg`` added to the diagonal.

    method 'schur' (eqs. 29-30): δθ = −k_θ − K_θ δx_0 with k_θ = Vθθ^{-1} V_θ, K_θ = Vθθ^{-1} Vxθᵀ (Cholesky), then
    (Vxx − Vxθ K_θ) δx_0 = −(V_x − Vxθ k_θ).
    method 'nullspace' (eq. 31): δθ = Y δθ_y with Y from :func:`range_basis` (relative rank tolerance ``rank_tol``
    on the Jacobi-scaled V_θθ) and (Yᵀ Vθθ Y + μ) δθ_y = −Yᵀ V_θ − Yᵀ Vxθᵀ δx_0, i.e. the Schur formulas with
    Vθθ^{-1} replaced by Y (Λ_y + μ)^{-1} Yᵀ; the step has no component along the nullspace Z (Vθθ Z ≈ 0).
    method 'auto': nullspace if V_θθ has a numerical nullspace (near singular), else Schur.
    """
    vxx = hess[:ndx, :ndx]
    vxth = hess[:ndx, ndx:]
    vthth = hess[ndx:, ndx:]
    vx, vth = grad[:ndx], grad[ndx:]
    nth = vthth.shape[0]
    eye_x = np.eye(ndx)
    use_null = method == "nullspace"
    if method == "auto" or use_null:
        y, lam_y, null_dim = range_basis(vthth, rank_tol)
        if method == "auto":
            use_null = null_dim > 0
    if use_null:
        inv_lam = 1.0 / (lam_y + reg)
        # Vθθ^+ applied through the range basis Y
        yt_vth = y.T @ vth
        yt_vxtht = y.T @ vxth.T
        k_y = inv_lam * yt_vth
        kk_y = inv_lam[:, None] * yt_vxtht
        vx0 = vx - vxth @ (y @ k_y)
        vxx0 = vxx - vxth @ (y @ kk_y)
        fac = _chol(0.5 * (vxx0 + vxx0.T) + reg * eye_x, "arrival Schur complement (nullspace)")
        dx0 = -cho_solve(fac, vx0, check_finite=False)
        dtheta = -(y @ (k_y + kk_y @ dx0))
        name = "nullspace"
    else:
        if nth:
            fac_t = _chol(vthth + reg * np.eye(nth), "V_θθ")
            rhs = np.column_stack([vth, vxth.T])
            sol = cho_solve(fac_t, rhs, check_finite=False)
            k_t, kk_t = sol[:, 0], sol[:, 1:]
            vx0 = vx - vxth @ k_t
            vxx0 = vxx - vxth @ kk_t
        else:
            k_t, kk_t = np.zeros(0), np.zeros((0, ndx))
            vx0, vxx0 = vx, vxx
        fac = _chol(0.5 * (vxx0 + vxx0.T) + reg * eye_x, "arrival Schur complement")
        dx0 = -cho_solve(fac, vx0, check_finite=False)
        dtheta = -(k_t + kk_t @ dx0)
        null_dim = 0
        name = "schur"
    if not (np.all(np.isfinite(dx0)) and np.all(np.isfinite(dtheta))):
        raise FactorizationError("non-finite arrival step")
    return ArrivalStep(dx0, dtheta, hess, grad, name, null_dim)
