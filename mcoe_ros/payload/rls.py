"""Recursive least squares for linear models y_k = Gamma_k theta + noise, with a physical-consistency prior.

theta (n,) = [pi_1, ..., pi_nb, psi]: n_b bodies' inertial parameters (10 each, inertia.py convention) and
dim(psi) extra linear parameters (e.g. force biases). Gamma_k (m, n), y_k (m,), weight W_k (m, m) SPD.

RlsLogdet (Cho, Lee, Shin, "RLS with log-det divergence regularisation") minimises at every step k exactly
  J_k(theta) = 1/2 sum_j |y_j - Gamma_j theta|^2_W - 1/2 sum_{j<k} (theta - theta_j)^T G_j (theta - theta_j)
               + alpha [sum_i D(L(pi_i), L(pi0_i)) + beta/2 |psi - psi0|^2]
with D the log-det divergence of pseudo-inertias and G_j the directional-forgetting matrices (eq. 28). It keeps only
the information matrix Omega (n, n) and b = sum Gamma^T W y - sum G theta_j (n,) (drift-free form, O(n^2) memory):
grad J_k = Omega theta - b + alpha grad R(theta), Hessian Omega + alpha hess R (eq. 19 with the missing alpha).
Every iterate keeps all pseudo-inertias positive definite (Cholesky-checked backtracking).

RlsL2 is the l2-regularised baseline (R = 1/2 |pi - pi0|^2 + beta/2 |psi - psi0|^2, Kalman/Woodbury form, eq. 30); it
gives no consistency guarantee and is not invariant under a change of body frame.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack

from mcoe_ros.multibody.inertia import PSEUDO_BASIS

_ARMIJO_C = 1e-4
_TRIL4 = np.tri(4, dtype=bool)
_MAX_HALVINGS = 60
# Newton decrement^2/alpha below this: inside the quadratic-convergence region of the self-concordant f/alpha,
# so the full step is taken (still Cholesky-checked) and Armijo is skipped (it is dominated by round-off there)
_PURE_NEWTON_DECREMENT = 1.0 / 16.0


def _weight(weight: np.ndarray | float | None, m: int) -> np.ndarray:
    """W (m, m) from None (identity), a scalar, a diagonal (m,) or a full (m, m) matrix."""
    if weight is None:
        return np.eye(m)
    weight = np.asarray(weight, dtype=float)
    if weight.ndim == 0:
        return float(weight) * np.eye(m)
    if weight.ndim == 1:
        return np.diag(weight)
    return weight


def _chol_lower(mat: np.ndarray) -> np.ndarray | None:
    """Lower Cholesky factor of an SPD matrix, or None if it is not positive definite."""
    factor, info = lapack.dpotrf(mat, lower=1, clean=1)
    return factor if info == 0 else None


class RlsLogdet:
    """RLS with log-det divergence regulariser, exact Newton per step and directional forgetting.

    Args:
        theta0: prior (n,) = [pi0_1 .. pi0_nb, psi0]; each pi0_i must be physically consistent. theta_0 = theta0.
        n_bodies: n_b (n = 10 n_b + dim psi).
        alpha: regularisation strength (absolute, i.e. relative to W; with W = I / (N_ref m) it is the paper's alpha).
        beta: weight of the psi prior (relative to alpha).
        mu: directional forgetting factor in (0, 1]; 1 = no forgetting.
        forget_eps: forgetting is applied only if |Omega Gamma^T|_F > forget_eps (eq. 28 threshold).
        max_iter: Newton iteration cap per update; rtol: stop when |delta|_inf <= rtol |theta|_inf;
        atol: stop when the Newton decrement lambda^2 / 2 <= atol.
    """

    def __init__(
        self,
        theta0: np.ndarray,
        n_bodies: int = 1,
        alpha: float = 1.0,
        beta: float = 1e-3,
        mu: float = 1.0,
        forget_eps: float = 1e-10,
        max_iter: int = 10,
        rtol: float = 1e-12,
        atol: float = 1e-20,
    ):
        if not (alpha > 0 and beta > 0 and 0 < mu <= 1 and max_iter >= 1):
            raise ValueError("need alpha > 0, beta > 0, 0 < mu <= 1, max_iter >= 1")
        self.alpha, self.beta, self.mu = float(alpha), float(beta), float(mu)
        self.forget_eps, self.max_iter = float(forget_eps), int(max_iter)
        self.rtol, self.atol = float(rtol), float(atol)
        self.n_bodies = int(n_bodies)
        self.reset(theta0)

    # ------------------------------------------------------------------------------------------------------- state
    def _set_prior(self, theta0: np.ndarray) -> None:
        prior = np.array(theta0, dtype=float)
        n_extra = prior.size - 10 * self.n_bodies
        if n_extra < 0 or prior.ndim != 1:
            raise ValueError(f"theta0 must be (10 n_bodies + n_extra,), got {prior.shape}")
        prior_inv = np.empty((self.n_bodies, 16))  # vec(L(pi0_i)^{-1})
        for i in range(self.n_bodies):
            j_inv = self._pseudo_inv(prior[10 * i : 10 * i + 10])
            if j_inv is None:
                raise ValueError(f"prior of body {i} is not physically consistent")
            prior_inv[i] = j_inv.ravel()
        self._prior, self._prior_inv, self.n, self.n_extra = prior, prior_inv, prior.size, n_extra
        self._hess_r = np.zeros((self.n, self.n))  # hess R; the psi block is the constant beta I
        self._hess_r[10 * self.n_bodies :, 10 * self.n_bodies :] = self.beta * np.eye(n_extra)
        self._grad_r = np.empty(self.n)

    def reset(self, theta0: np.ndarray | None = None) -> None:
        """Forget all data: theta = prior (or a new consistent prior theta0), Omega = 0, b = 0."""
        if theta0 is not None:
            self._set_prior(theta0)
        self._theta = self._prior.copy()
        self._omega = np.zeros((self.n, self.n))
        self._b = np.zeros(self.n)
        self._iterations = 0
        self.n_updates = 0

    @property
    def theta(self) -> np.ndarray:
        """Current estimate theta_k (n,) (a copy)."""
        return self._theta.copy()

    @property
    def Omega(self) -> np.ndarray:  # noqa: N802 (paper symbol)
        """Information matrix of the data, sum Gamma^T W Gamma - sum G (n, n) (a copy)."""
        return self._omega.copy()

    @property
    def b(self) -> np.ndarray:
        """b_k = sum Gamma^T W y - sum G_j theta_j (n,) (a copy)."""
        return self._b.copy()

    @property
    def iterations(self) -> int:
        """Newton steps applied in the last update."""
        return self._iterations

    def hessian(self) -> np.ndarray:
        """Omega + alpha hess R(theta_k) (n, n): curvature of J_k at the estimate (e.g. for an arrival cost)."""
        self._grad_hess_r(self._theta)
        return self._omega + self.alpha * self._hess_r

    def covariance(self) -> np.ndarray:
        """(Omega + alpha hess R(theta_k))^{-1} (n, n), for reporting (Laplace approximation with W = noise^-1)."""
        return np.linalg.inv(self.hessian())

    # ----------------------------------------------------------------------------------------------- regulariser
    @staticmethod
    def _pseudo_inv(pi: np.ndarray) -> np.ndarray | None:
        factor = _chol_lower((PSEUDO_BASIS @ pi).reshape(4, 4))
        if factor is None:
            return None
        inv, info = lapack.dpotri(factor, lower=1)
        if info != 0:
            return None
        return np.where(_TRIL4, inv, inv.T)

    def _grad_hess_r(self, theta: np.ndarray) -> bool:
        """Fill self._grad_r, self._hess_r at theta (notes eqs. 26-27, Kron form). False if a body is infeasible."""
        for i in range(self.n_bodies):
            sl = slice(10 * i, 10 * i + 10)
            j_inv = self._pseudo_inv(theta[sl])
            if j_inv is None:
                return False
            self._grad_r[sl] = PSEUDO_BASIS.T @ (self._prior_inv[i] - j_inv.ravel())
            hess = PSEUDO_BASIS.T @ (j_inv[:, None, :, None] * j_inv[None, :, None, :]).reshape(16, 16) @ PSEUDO_BASIS
            self._hess_r[sl, sl] = 0.5 * (hess + hess.T)
        nb = 10 * self.n_bodies
        self._grad_r[nb:] = self.beta * (theta[nb:] - self._prior[nb:])
        return True

    def _objective(self, theta: np.ndarray) -> float:
        """J_k(theta) up to a constant: 1/2 theta^T Omega theta - b^T theta + alpha R(theta); +inf if infeasible."""
        reg = 0.0
        for i in range(self.n_bodies):
            pseudo = (PSEUDO_BASIS @ theta[10 * i : 10 * i + 10]).reshape(4, 4)
            factor = _chol_lower(pseudo)
            if factor is None:
                return float("inf")
            reg += -2.0 * float(np.sum(np.log(np.diag(factor)))) + float(self._prior_inv[i] @ pseudo.ravel())
        dpsi = theta[10 * self.n_bodies :] - self._prior[10 * self.n_bodies :]
        reg += 0.5 * self.beta * float(dpsi @ dpsi)
        return float(0.5 * theta @ self._omega @ theta - self._b @ theta + self.alpha * reg)

    def _feasible(self, theta: np.ndarray) -> bool:
        return all(
            _chol_lower((PSEUDO_BASIS @ theta[10 * i : 10 * i + 10]).reshape(4, 4)) is not None
            for i in range(self.n_bodies)
        )

    # ---------------------------------------------------------------------------------------------------- update
    def _forget(self, gamma: np.ndarray) -> None:
        """Directional forgetting (eq. 28): Omega -= G, b -= G theta_{k-1}.

        G = (1 - mu) v (Gamma v)^+ v^T with v = Omega_{k-1} Gamma^T (n, m); skipped if |v|_F <= forget_eps.
        """
        v = self._omega @ gamma.T
        if np.linalg.norm(v) <= self.forget_eps:
            return
        gram = gamma @ v  # Gamma Omega Gamma^T (m, m), may be singular: regularised Cholesky solve, pinv fallback
        gram = 0.5 * (gram + gram.T)
        gram[np.diag_indices_from(gram)] += 1e-12 * max(float(np.trace(gram)), np.finfo(float).tiny)
        _, solved, info = lapack.dposv(gram, v.T, lower=1)
        if info != 0:
            solved = np.linalg.pinv(gram, rcond=1e-12, hermitian=True) @ v.T
        g_mat = (1.0 - self.mu) * v @ solved
        self._omega -= g_mat
        self._b -= g_mat @ self._theta

    def update(self, Gamma: np.ndarray, y: np.ndarray, W: np.ndarray | float | None = None) -> np.ndarray:  # noqa: N803
        """Add one measurement y (m,) = Gamma (m, n) theta + noise with weight W; return theta_k (n,) (a copy)."""
        gamma = np.atleast_2d(np.asarray(Gamma, dtype=float))
        y = np.atleast_1d(np.asarray(y, dtype=float))
        if gamma.shape[1] != self.n or y.shape != (gamma.shape[0],):
            raise ValueError(f"Gamma must be (m, {self.n}) and y (m,), got {gamma.shape} and {y.shape}")
        weight = _weight(W, gamma.shape[0])
        if self.mu < 1.0:
            self._forget(gamma)
        gw = gamma.T @ weight
        self._omega += gw @ gamma
        self._omega += self._omega.T
        self._omega *= 0.5
        self._b += gw @ y
        self.n_updates += 1
        self._newton()
        return self._theta.copy()

    def _newton(self) -> None:
        """Exact Newton on grad J_k = Omega theta - b + alpha grad R = 0 from theta_{k-1}, feasibility-safeguarded."""
        theta = self._theta
        f_val = None
        steps = 0
        for _ in range(self.max_iter):
            if not self._grad_hess_r(theta):  # cannot happen for feasible iterates; guard against round-off
                break
            grad = self._omega @ theta - self._b + self.alpha * self._grad_r
            hess = self._omega + self.alpha * self._hess_r
            _, delta, info = lapack.dposv(hess, -grad, lower=1)
            if info != 0:  # Omega slightly indefinite after forgetting round-off: least-squares step
                delta = np.linalg.lstsq(0.5 * (hess + hess.T), -grad, rcond=None)[0]
            decrement2 = -float(grad @ delta)
            if decrement2 <= 0.0 or 0.5 * decrement2 <= self.atol:
                break
            step = 1.0
            pure = decrement2 / self.alpha <= _PURE_NEWTON_DECREMENT
            for _ in range(_MAX_HALVINGS):
                trial = theta + step * delta
                if pure:
                    if self._feasible(trial):
                        break
                else:
                    if f_val is None:
                        f_val = self._objective(theta)
                    f_trial = self._objective(trial)
                    if f_trial <= f_val - _ARMIJO_C * step * decrement2:
                        f_val = f_trial
                        break
                step *= 0.5
            else:
                break
            if pure:
                f_val = None
            theta = trial
            steps += 1
            if np.max(np.abs(step * delta)) <= self.rtol * np.max(np.abs(theta)):
                break
        self._theta = theta
        self._iterations = steps


class RlsL2:
    """l2-regularised RLS baseline (notes eq. 30): P_k = (Omega_k + W_R)^{-1}, W_R = alpha diag(1_{10 nb}, beta 1).

    Same argument conventions as :class:`RlsLogdet`; the prior need not be consistent and estimates may not be.
    """

    def __init__(self, theta0: np.ndarray, n_bodies: int = 1, alpha: float = 50.0, beta: float = 1e-3):
        self._prior = np.array(theta0, dtype=float)
        self.n = self._prior.size
        self.n_bodies = int(n_bodies)
        if self.n < 10 * self.n_bodies or not (alpha > 0 and beta > 0):
            raise ValueError("need n >= 10 n_bodies, alpha > 0, beta > 0")
        self.alpha, self.beta = float(alpha), float(beta)
        self._w_r = self.alpha * np.concatenate(
            [np.ones(10 * self.n_bodies), np.full(self.n - 10 * self.n_bodies, beta)]
        )
        self.reset()

    def reset(self) -> None:
        """theta = prior, P = W_R^{-1}."""
        self._theta = self._prior.copy()
        self._p = np.diag(1.0 / self._w_r)
        self.n_updates = 0

    @property
    def theta(self) -> np.ndarray:
        """Current estimate (n,) (a copy)."""
        return self._theta.copy()

    @property
    def Omega(self) -> np.ndarray:  # noqa: N802 (paper symbol)
        """sum Gamma^T W Gamma = P^{-1} - W_R (n, n)."""
        return np.linalg.inv(self._p) - np.diag(self._w_r)

    @property
    def iterations(self) -> int:
        """Always 1 (closed form)."""
        return 1

    def covariance(self) -> np.ndarray:
        """P_k = (Omega_k + W_R)^{-1} (n, n) (a copy)."""
        return self._p.copy()

    def update(self, Gamma: np.ndarray, y: np.ndarray, W: np.ndarray | float | None = None) -> np.ndarray:  # noqa: N803
        """Kalman form: K = P Gamma^T (W^{-1} + Gamma P Gamma^T)^{-1}, theta += K (y - Gamma theta), P -= K Gamma P."""
        gamma = np.atleast_2d(np.asarray(Gamma, dtype=float))
        y = np.atleast_1d(np.asarray(y, dtype=float))
        if gamma.shape[1] != self.n or y.shape != (gamma.shape[0],):
            raise ValueError(f"Gamma must be (m, {self.n}) and y (m,), got {gamma.shape} and {y.shape}")
        pg = self._p @ gamma.T
        innovation_cov = np.linalg.inv(_weight(W, gamma.shape[0])) + gamma @ pg
        gain = np.linalg.solve(innovation_cov, pg.T).T
        self._theta += gain @ (y - gamma @ self._theta)
        self._p -= gain @ pg.T
        self._p += self._p.T
        self._p *= 0.5
        self.n_updates += 1
        return self._theta.copy()
