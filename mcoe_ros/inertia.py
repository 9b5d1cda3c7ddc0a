"""Inertial parameters of one rigid body: pseudo-inertia and frame changes.

Convention (Pinocchio's dynamic parameters): pi = [m, h_x, h_y, h_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]
with h = m c the first mass moment (kg m) and I the rotational inertia about the *body-frame origin*
(kg m^2), all expressed in the body frame.

Pseudo-inertia (Wensing et al. 2017): J = [[Sigma, h], [h^T, m]] with Sigma = tr(I)/2 * 1 - I the
second moment of mass. pi is fully physically consistent iff J is positive definite.
"""

from __future__ import annotations

import numpy as np

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
