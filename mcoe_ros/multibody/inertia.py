"""Inertial parameters of one rigid body: pseudo-inertia and frame changes.

Convention (Pinocchio's dynamic parameters): pi = [m, h_x, h_y, h_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]
with h = m c the first mass moment (kg m) and I the rotational inertia about the *body-frame origin*
(kg m^2), all expressed in the body frame.

Pseudo-inertia (Wensing et al. 2017): J = [[Sigma, h], [h^T, m]] with Sigma = tr(I)/2 * 1 - I the
second moment of mass. pi is fully physically consistent iff J is positive definite.

Also here: the log-det divergence D(J, J0) with its gradient/Hessian in pi (a convex, frame-invariant prior), and
the parametrizations pi = psi(theta) of the MCOE paper (Sec. III): 'exp-eigval', 'log-cholesky' (both map all of
R^10 onto consistent bodies) and 'plain' (identity). Exp-eigval singularity: with two equal principal moments
dpi/dtheta has rank 9, with three equal (isotropic I_c) rank 7, because rotating the principal axes about a
degenerate eigenspace leaves pi unchanged.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import pinocchio as pin
from scipy.linalg import lapack as _lapack

# index of (row, col) of the symmetric 3x3 inertia in pi[4:10]
_I_IDX = ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))


def inertia_matrix(pi: np.ndarray) -> np.ndarray:
    """Rotational inertia about the body origin, 3x3, from pi (10,)."""
    ixx, ixy, iyy, ixz, iyz, izz = pi[4:10]
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])


def pi_from_parts(mass: float, h: np.ndarray, inertia: np.ndarray) -> np.ndarray:
    """pi (10,) from mass, first moment h (3,) and inertia about the body origin (3, 3)."""
    out = np.empty(10)
    out[0] = mass
    out[1:4] = h
    out[4:10] = [inertia[r, c] for r, c in _I_IDX]
    return out


def pseudo_inertia(pi: np.ndarray) -> np.ndarray:
    """Pseudo-inertia J (4, 4) of pi (10,)."""
    inertia = inertia_matrix(pi)
    out = np.empty((4, 4))
    out[:3, :3] = 0.5 * np.trace(inertia) * np.eye(3) - inertia
    out[:3, 3] = pi[1:4]
    out[3, :3] = pi[1:4]
    out[3, 3] = pi[0]
    return out


def pi_from_pseudo(pseudo: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pseudo_inertia` (linear): pi (10,) from J (4, 4)."""
    sigma = 0.5 * (pseudo[:3, :3] + pseudo[:3, :3].T)
    return pi_from_parts(pseudo[3, 3], 0.5 * (pseudo[:3, 3] + pseudo[3, :3]), np.trace(sigma) * np.eye(3) - sigma)


def transform_matrix(rotation: np.ndarray, translation: np.ndarray) -> np.ndarray:
    """A (10, 10) with pi_parent = A pi_child for a body whose frame sits at (R, p) in the parent frame.

    Linear because the pseudo-inertia transforms by congruence: J_parent = T J_child T^T,
    T = [[R, p], [0, 1]]. Valid for any pi (also zero mass), unlike Inertia.FromDynamicParameters.
    """
    tmat = np.eye(4)
    tmat[:3, :3] = rotation
    tmat[:3, 3] = translation
    out = np.empty((10, 10))
    basis = np.zeros(10)
    for i in range(10):
        basis[:] = 0.0
        basis[i] = 1.0
        out[:, i] = pi_from_pseudo(tmat @ pseudo_inertia(basis) @ tmat.T)
    return out


def is_physically_consistent(pi: np.ndarray, tol: float = 0.0) -> bool:
    """True iff the pseudo-inertia is positive definite (min eigenvalue > tol)."""
    return bool(np.all(np.isfinite(pi))) and float(np.linalg.eigvalsh(pseudo_inertia(pi))[0]) > tol


def pi_about_com(pi: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """(mass kg, CoM c (3,) m, inertia about the CoM (3, 3) kg m^2) from pi; needs m > 0."""
    mass = float(pi[0])
    com = pi[1:4] / mass
    skew = np.array([[0.0, -com[2], com[1]], [com[2], 0.0, -com[0]], [-com[1], com[0], 0.0]])
    return mass, com, inertia_matrix(pi) + mass * skew @ skew


def pi_from_com(mass: float, com: np.ndarray, inertia_com: np.ndarray) -> np.ndarray:
    """pi (10,) of a body of given mass, CoM (3,) and inertia about its CoM (3, 3) (parallel-axis)."""
    com = np.asarray(com, dtype=float)
    skew = np.array([[0.0, -com[2], com[1]], [com[2], 0.0, -com[0]], [-com[1], com[0], 0.0]])
    return pi_from_parts(mass, mass * com, np.asarray(inertia_com, dtype=float) - mass * skew @ skew)


# ----------------------------------------------------------------------------------------------------------------------
# Log-det (Burg) divergence between pseudo-inertias
# ----------------------------------------------------------------------------------------------------------------------


def _pseudo_basis() -> np.ndarray:
    """K (16, 10): column n is vec(E_n), E_n = pseudo_inertia(e_n) (row-major vec; E_n is symmetric)."""
    out = np.empty((16, 10))
    for n in range(10):
        out[:, n] = pseudo_inertia(np.eye(10)[n]).ravel()
    return out


PSEUDO_BASIS = _pseudo_basis()
_TRIL4 = np.tri(4, dtype=bool)
"""K (16, 10) with vec(pseudo_inertia(pi)) = K @ pi."""


def pseudo_inertia_inv(pi: np.ndarray) -> np.ndarray:
    """J(pi)^{-1} (4, 4) via Cholesky; raises ValueError if J is not positive definite."""
    factor, info = _lapack.dpotrf((PSEUDO_BASIS @ np.asarray(pi, dtype=float)).reshape(4, 4), lower=1)
    if info != 0:
        raise ValueError("pseudo-inertia is not positive definite")
    inv, info = _lapack.dpotri(factor, lower=1)
    if info != 0:
        raise ValueError("pseudo-inertia is singular")
    return np.where(_TRIL4, inv, inv.T)


def logdet_divergence(pi: np.ndarray, pi0: np.ndarray) -> float:
    """D(J, J0) = -log(|J|/|J0|) + tr(J0^{-1} J) - 4 (dimensionless, >= 0), J = pseudo_inertia(pi).

    Returns +inf if J is not positive definite; raises ValueError if J0 is not.
    Invariant under congruence J -> T J T^T (any change of body frame). Evaluated as sum_i (l_i - 1) - log1p(l_i - 1)
    over the eigenvalues l_i of S = L0^{-1} J L0^{-T} (J0 = L0 L0^T), which has no cancellation near J = J0
    (D ~ ½ ||S - 1||²; the direct formula loses ~1e-9 there).
    """
    j0 = pseudo_inertia(pi0)
    try:
        chol0 = np.linalg.cholesky(j0)
    except np.linalg.LinAlgError as err:
        raise ValueError("prior pseudo-inertia is not positive definite") from err
    half = np.linalg.solve(chol0, pseudo_inertia(pi))
    whitened = np.linalg.solve(chol0, half.T)
    evals = np.linalg.eigvalsh(0.5 * (whitened + whitened.T))
    if evals[0] <= 0.0:
        return float("inf")
    dev = evals - 1.0
    return float(np.sum(dev - np.log1p(dev)))


def logdet_divergence_grad(pi: np.ndarray, pi0: np.ndarray) -> np.ndarray:
    """dD/dpi (10,): dD/dpi_n = tr[(J0^{-1} - J^{-1}) E_n] = K^T vec(J0^{-1} - J^{-1}). ValueError if J or J0 not PD."""
    return PSEUDO_BASIS.T @ (pseudo_inertia_inv(pi0) - pseudo_inertia_inv(pi)).ravel()


def logdet_divergence_hess(pi: np.ndarray) -> np.ndarray:
    """d^2D/dpi^2 (10, 10) = K^T (J^{-1} kron J^{-1}) K, independent of pi0; SPD iff J is PD (else ValueError)."""
    j_inv = pseudo_inertia_inv(pi)
    hess = PSEUDO_BASIS.T @ (j_inv[:, None, :, None] * j_inv[None, :, None, :]).reshape(16, 16) @ PSEUDO_BASIS
    return 0.5 * (hess + hess.T)


# ----------------------------------------------------------------------------------------------------------------------
# Parametrizations pi = psi(theta)
# ----------------------------------------------------------------------------------------------------------------------

_ROW = np.array([r for r, _ in _I_IDX])
_COL = np.array([c for _, c in _I_IDX])
_P = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
_P_INV = 0.5 * np.array([[-1.0, 1.0, 1.0], [1.0, -1.0, 1.0], [1.0, 1.0, -1.0]])
_EXCHANGE = np.eye(4)[::-1]
_DIAG6 = (_ROW == _COL).astype(float)
_ONEHOT_R = np.eye(3)[_ROW]
_ONEHOT_C = np.eye(3)[_COL]
_CYC_I = np.array([1, 2, 0])
_CYC_J = np.array([2, 0, 1])


def _vech(sym: np.ndarray) -> np.ndarray:
    """The 6 entries of a symmetric 3x3 matrix in pi[4:10] order (xx, xy, yy, xz, yz, zz)."""
    return sym[_ROW, _COL]


def _proper_rotations() -> list[np.ndarray]:
    """The 24 signed permutation matrices with det +1 (symmetries of an eigenbasis)."""
    out = []
    for perm in ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)):
        for signs in np.array(np.meshgrid([1, -1], [1, -1], [1, -1])).T.reshape(-1, 3):
            mat = np.eye(3)[:, perm] * signs
            if np.linalg.det(mat) > 0:
                out.append(mat)
    return out


_EIGENBASIS_SYMMETRIES = np.array(_proper_rotations())


class Parametrization(ABC):
    """Smooth map theta (10,) -> pi (10,) of one body (pi in this module's convention)."""

    name: str

    @abstractmethod
    def pi(self, theta: np.ndarray) -> np.ndarray:
        """pi (10,) from theta (10,)."""

    @abstractmethod
    def jacobian(self, theta: np.ndarray) -> np.ndarray:
        """dpi/dtheta (10, 10), row = pi entry, column = theta entry."""

    @abstractmethod
    def theta(self, pi: np.ndarray) -> np.ndarray:
        """A theta (10,) with pi(theta) = pi; ValueError if pi is not fully physically consistent."""


class PlainPi(Parametrization):
    """theta = pi (identity); no physical-consistency guarantee (baseline)."""

    name = "plain"

    def pi(self, theta: np.ndarray) -> np.ndarray:
        return np.array(theta, dtype=float)

    def jacobian(self, theta: np.ndarray) -> np.ndarray:
        return np.eye(10)

    def theta(self, pi: np.ndarray) -> np.ndarray:
        return np.array(pi, dtype=float)


class LogCholesky(Parametrization):
    """theta = [alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3]; J = U U^T (Rucker & Wensing 2022, paper eqs. 9-10).

    U = e^alpha [[e^d1, s12, s13, t1], [0, e^d2, s23, t2], [0, 0, e^d3, t3], [0, 0, 0, 1]] (upper triangular; the
    paper's eq. 9 prints s23 in the (3,3) slot, a typo). Forward map and Jacobian are Pinocchio's
    ``LogCholeskyParameters`` (same pi ordering as here). Every theta in R^10 gives J > 0.
    """

    name = "log-cholesky"

    def pi(self, theta: np.ndarray) -> np.ndarray:
        return pin.LogCholeskyParameters(np.asarray(theta, dtype=float)).toDynamicParameters()

    def jacobian(self, theta: np.ndarray) -> np.ndarray:
        return pin.LogCholeskyParameters(np.asarray(theta, dtype=float)).calculateJacobian()

    def theta(self, pi: np.ndarray) -> np.ndarray:
        """Inverse via the upper-lower factor U = E chol(E J E) E (E the 4x4 exchange matrix)."""
        try:
            lower = np.linalg.cholesky(_EXCHANGE @ pseudo_inertia(np.asarray(pi, dtype=float)) @ _EXCHANGE)
        except np.linalg.LinAlgError as err:
            raise ValueError("pi is not physically consistent (pseudo-inertia not PD)") from err
        upper = _EXCHANGE @ lower @ _EXCHANGE
        scale = upper[3, 3]
        upper = upper / scale
        diag = np.log(np.diag(upper)[:3])
        return np.array(
            [np.log(scale), *diag, upper[0, 1], upper[1, 2], upper[0, 2], upper[0, 3], upper[1, 3], upper[2, 3]]
        )


class ExpEigenvalue(Parametrization):
    """theta = [sigma_m, h_x, h_y, h_z, omega_x, omega_y, omega_z, sigma_x, sigma_y, sigma_z] (paper eqs. 11-15).

    m = e^sigma_m (kg), h (kg m) as is, second moments about the CoM along the principal axes L = e^sigma (kg m^2),
    principal moments D = P L, I_c = R diag(D) R^T with R = Exp(omega) (columns = principal axes in the body frame),
    I = I_c + S(h) S(h)^T / m about the body origin (paper eq. 5).

    Singularity: if two second moments are equal (L_i = L_j, i.e. D_i = D_j), rotations about the third principal
    axis leave I_c unchanged, so dpi/dtheta has rank 9; if all three are equal (I_c = k 1_3) it has rank 7. The
    inverse :meth:`theta` still works there (any eigenbasis is valid) but the parametrization is not locally
    injective, so Gauss-Newton solvers need damping in the omega directions near isotropic bodies.
    """

    name = "exp-eigval"

    def _parts(self, theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        theta = np.asarray(theta, dtype=float)
        mass = float(np.exp(theta[0]))
        second = np.exp(theta[7:10])
        return mass, theta[1:4], pin.exp3(theta[4:7]), second, _P @ second

    def pi(self, theta: np.ndarray) -> np.ndarray:
        mass, h, rot, _, principal = self._parts(theta)
        inertia = (rot * principal) @ rot.T + (h @ h * np.eye(3) - np.outer(h, h)) / mass
        out = np.empty(10)
        out[0] = mass
        out[1:4] = h
        out[4:10] = _vech(inertia)
        return out

    def jacobian(self, theta: np.ndarray) -> np.ndarray:
        """Exact dpi/dtheta (10, 10). For omega: Exp(w + dw) = Exp(w) Exp(Jr(w) dw), Jr = pin.Jexp3 (right Jacobian).

        Rank 9 (two equal principal moments) or 7 (three equal): see the class docstring.
        """
        mass, h, rot, second, principal = self._parts(theta)
        out = np.zeros((10, 10))
        parallel = (h @ h * np.eye(3) - np.outer(h, h)) / mass
        out[0, 0] = mass
        out[1:4, 1:4] = np.eye(3)
        out[4:10, 0] = -_vech(parallel)  # parallel ∝ 1/m = e^{-sigma_m}
        # d vech(|h|^2 1 - h h^T)/dh_k = 2 h_k delta_rc - delta_rk h_c - h_r delta_ck
        out[4:10, 1:4] = (
            2.0 * _DIAG6[:, None] * h[None, :] - _ONEHOT_R * h[_COL][:, None] - h[_ROW][:, None] * _ONEHOT_C
        ) / mass
        # dI_c along a body-frame rotation increment v (R -> R Exp(v)): column k is
        # (D_i - D_j) vech(r_i r_j^T + r_j r_i^T), (i, j, k) cyclic; it vanishes when D_i = D_j (the singularity)
        rot_r, rot_c = rot[_ROW, :], rot[_COL, :]
        dwv = (rot_r[:, _CYC_I] * rot_c[:, _CYC_J] + rot_r[:, _CYC_J] * rot_c[:, _CYC_I]) * (
            principal[_CYC_I] - principal[_CYC_J]
        )
        out[4:10, 4:7] = dwv @ pin.Jexp3(np.asarray(theta[4:7], dtype=float))
        # dI_c/dsigma_k = R diag(P[:, k] L_k) R^T = Q (P[:, k] L_k), Q[:, j] = vech(r_j r_j^T)
        out[4:10, 7:10] = (rot_r * rot_c) @ (_P * second)
        return out

    def theta(self, pi: np.ndarray) -> np.ndarray:
        """Inverse via eigh(I_c); the eigenbasis is replaced by the proper rotation closest to identity (among the 24
        signed column permutations with det +1), so omega = Log(R) stays away from the |omega| = pi cut."""
        pi = np.asarray(pi, dtype=float)
        if not is_physically_consistent(pi):
            raise ValueError("pi is not physically consistent (pseudo-inertia not PD)")
        mass, h = float(pi[0]), pi[1:4]
        inertia_c = inertia_matrix(pi) - (h @ h * np.eye(3) - np.outer(h, h)) / mass
        principal, basis = np.linalg.eigh(inertia_c)
        if np.linalg.det(basis) < 0:
            basis[:, 0] = -basis[:, 0]
        best = _EIGENBASIS_SYMMETRIES[np.argmax(np.einsum("ij,kji->k", basis, _EIGENBASIS_SYMMETRIES))]
        rot = basis @ best
        principal = np.abs(best.T) @ principal
        second = _P_INV @ principal
        out = np.empty(10)
        out[0] = np.log(mass)
        out[1:4] = h
        out[4:7] = pin.log3(rot)
        out[7:10] = np.log(second)
        return out


_PARAMETRIZATIONS = {cls.name: cls for cls in (ExpEigenvalue, LogCholesky, PlainPi)}


class OffsetParametrization(Parametrization):
    """pi = psi(theta) - offset: a body estimated as a whole (psi physically consistent, e.g. trunk + payload) and
    reported relative to a known part of it (``offset`` (10,), e.g. the nominal trunk), which may come out with a
    negative mass (a robot lighter than its URDF)."""

    def __init__(self, inner: Parametrization, offset: np.ndarray):
        self.inner = inner
        self.offset = np.array(offset, dtype=float)
        self.name = inner.name

    def pi(self, theta: np.ndarray) -> np.ndarray:
        return self.inner.pi(theta) - self.offset

    def jacobian(self, theta: np.ndarray) -> np.ndarray:
        return self.inner.jacobian(theta)

    def theta(self, pi: np.ndarray) -> np.ndarray:
        return self.inner.theta(np.asarray(pi, dtype=float) + self.offset)


def make_parametrization(name: str) -> Parametrization:
    """Parametrization by name: 'exp-eigval', 'log-cholesky' or 'plain'."""
    try:
        return _PARAMETRIZATIONS[name]()
    except KeyError:
        raise ValueError(f"unknown parametrization {name!r}; valid: {sorted(_PARAMETRIZATIONS)}") from None
