"""The contract between node models (dynamics + measurements of one shooting interval) and the solver.

A node k of the estimation problem owns:
- a transition x_{k+1} = f(x_k; pi | u_k) ⊕ w_k (the solver adds the noise w_k and its Jacobian),
- a whitened measurement residual r_k(x_k; pi | u_k, z_k) so that the node's measurement cost is ½‖r_k‖².

pi is the stacked *physical* parameter vector of the estimated bodies (10 per body, see
:mod:`mcoe_ros.inertia`); the solver maps its decision variable theta to pi through a parametrization
and applies dpi/dtheta once per iteration, so node models only ever see pi.

Models are shared (one per contact phase); everything that changes per node (inputs u, measurements z,
the results and Jacobians) lives in the node's :class:`NodeData`, created once by ``create_data``.
Jacobians are in tangent coordinates:
    f(x ⊕ dx; pi + dpi) ≈ f(x; pi) ⊕ (Fx dx + Fp dpi),      r(x ⊕ dx; pi + dpi) ≈ r + Rx dx + Rp dpi.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


class NodeData:
    """Preallocated per-node workspace. Subclasses add their own buffers."""

    def __init__(self, model: NodeModel):
        ndx, npi, nr = model.state.ndx, model.npi, model.nr
        self.u = np.zeros(model.nu)  #: known input (e.g. joint torques), set by the problem builder
        self.z = np.zeros(model.nz)  #: measurement vector, set by the problem builder
        self.xnext = np.zeros(model.state.nx)  #: f(x; pi | u)
        self.r = np.zeros(nr)  #: whitened residual
        self.Fx = np.zeros((ndx, ndx))
        self.Fp = np.zeros((ndx, npi))
        self.Rx = np.zeros((nr, ndx))
        self.Rp = np.zeros((nr, npi))


class NodeModel(ABC):
    """Dynamics and measurement model of one shooting interval (see module docstring).

    Attributes set by subclasses: ``state`` (a manifold from :mod:`mcoe_ros.manifold`), ``npi`` (size of
    pi), ``nu`` (input size), ``nz`` (measurement vector size), ``nr`` (whitened residual size).
    """

    state: object
    npi: int
    nu: int
    nz: int
    nr: int

    def create_data(self) -> NodeData:
        return NodeData(self)

    @abstractmethod
    def calc(self, data: NodeData, x: np.ndarray, pi: np.ndarray) -> None:
        """Fill data.xnext and data.r."""

    @abstractmethod
    def calc_diff(self, data: NodeData, x: np.ndarray, pi: np.ndarray) -> None:
        """Fill data.xnext, data.r and the Jacobians Fx, Fp, Rx, Rp (calls what calc needs)."""
