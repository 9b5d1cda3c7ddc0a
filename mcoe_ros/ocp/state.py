"""State manifolds of the estimation problem: the retraction (integrate, "⊕") and its inverse (difference, "⊖").

A state manifold object provides ``nx`` (size of x), ``ndx`` (size of a tangent vector dx), ``zero()``,
``integrate(x, dx) = x ⊕ dx``, ``difference(x0, x1) = x1 ⊖ x0`` (the dx with x0 ⊕ dx = x1), and the Jacobians
``jintegrate(x, dx)`` = (d(x ⊕ dx)/dx, d(x ⊕ dx)/d(dx)) and ``jdifference(x0, x1)`` = (d(x1 ⊖ x0)/dx0,
d(x1 ⊖ x0)/dx1), each (ndx, ndx), with respect to tangent perturbations of each argument (Crocoddyl/Pinocchio
conventions).

``q_block`` = m declares that every Jacobian above is block diagonal ``blockdiag(J (m, m), ±1 (ndx - m))``: the
tangent coordinates from m on are Euclidean (a Lie group times a vector space, e.g. (q, v) of a multibody system,
:class:`mcoe_ros.multibody.state.StateMultibody`, m = nv; a vector space, m = 0; a general manifold, m = ndx). The
problem uses it to work on the (m, m) blocks only, and process noise may be restricted to Euclidean coordinates.
"""

from __future__ import annotations

import numpy as np


class StateVector:
    """Euclidean state of dimension n."""

    q_block = 0

    def __init__(self, n: int):
        self.nx = self.ndx = n

    def zero(self) -> np.ndarray:
        return np.zeros(self.nx)

    def integrate(self, x: np.ndarray, dx: np.ndarray) -> np.ndarray:
        return x + dx

    def difference(self, x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
        return x1 - x0

    def jintegrate(self, x: np.ndarray, dx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.eye(self.ndx), np.eye(self.ndx)

    def jdifference(self, x0: np.ndarray, x1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return -np.eye(self.ndx), np.eye(self.ndx)
