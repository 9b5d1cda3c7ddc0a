"""State manifold x = (q, v) of a Pinocchio model (the state interface of :mod:`mcoe_ros.ocp.state`).

q lives on the model's configuration Lie group (free flyer: position, unit quaternion x, y, z, w, joints), v is
Euclidean; tangent vectors dx = (dq, dv) have size ``ndx = 2 nv``. All Jacobians are blockdiag(J_q, ±1_v), declared
through ``q_block = nv``.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin


class StateMultibody:
    """x = (q, v) of a Pinocchio model; q on the configuration Lie group, v Euclidean."""

    def __init__(self, model: pin.Model):
        self.model = model
        self.nq, self.nv = model.nq, model.nv
        self.nx, self.ndx = model.nq + model.nv, 2 * model.nv
        self.q_block = model.nv

    def zero(self) -> np.ndarray:
        return np.concatenate([pin.neutral(self.model), np.zeros(self.nv)])

    def integrate(self, x: np.ndarray, dx: np.ndarray) -> np.ndarray:
        nq, nv = self.nq, self.nv
        return np.concatenate([pin.integrate(self.model, x[:nq], dx[:nv]), x[nq:] + dx[nv:]])

    def difference(self, x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
        nq = self.nq
        return np.concatenate([pin.difference(self.model, x0[:nq], x1[:nq]), x1[nq:] - x0[nq:]])

    def jintegrate(self, x: np.ndarray, dx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(d(x ⊕ dx)/dx, d(x ⊕ dx)/d(dx)), each (ndx, ndx)."""
        nq, nv = self.nq, self.nv
        jx, jd = np.eye(self.ndx), np.eye(self.ndx)
        jx[:nv, :nv] = pin.dIntegrate(self.model, x[:nq], dx[:nv], pin.ArgumentPosition.ARG0)
        jd[:nv, :nv] = pin.dIntegrate(self.model, x[:nq], dx[:nv], pin.ArgumentPosition.ARG1)
        return jx, jd

    def jdifference(self, x0: np.ndarray, x1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(d(x1 ⊖ x0)/dx0, d(x1 ⊖ x0)/dx1), each (ndx, ndx)."""
        nq, nv = self.nq, self.nv
        j0, j1 = -np.eye(self.ndx), np.eye(self.ndx)
        j0[:nv, :nv] = pin.dDifference(self.model, x0[:nq], x1[:nq], pin.ArgumentPosition.ARG0)
        j1[:nv, :nv] = pin.dDifference(self.model, x0[:nq], x1[:nq], pin.ArgumentPosition.ARG1)
        return j0, j1
