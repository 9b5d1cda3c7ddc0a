"""The contract between interval models and the solver.

The window has knots k = 0..N (times t_k). The *interval model* of knot k owns
- the transition over interval k, x_{k+1} = f(x_k; pi | u_k) ⊕ w_k (the solver adds the noise w_k),
- a whitened measurement residual r_k(x_k; pi | u_k, z_k) of knot k, so that its measurement cost is ½‖r_k‖².
The last knot has a terminal model whose transition is ignored.

pi is the stacked *physical* parameter vector (e.g. 10 inertial parameters per estimated body, see
:mod:`mcoe_ros.multibody.inertia`); the solver maps its decision variable theta to pi through a parametrization and
applies dpi/dtheta once per iteration, so interval models only ever see pi.

Models are shared (e.g. one per contact phase) and immutable; everything that changes per knot (inputs u,
measurements z, results, Jacobians) lives in the knot's :class:`IntervalData`, created once by ``create_data``.
Jacobians are in tangent coordinates:
    f(x ⊕ dx; pi + dpi) ≈ f(x; pi) ⊕ (Fx dx + Fp dpi),      r(x ⊕ dx; pi + dpi) ≈ r + Rx dx + Rp dpi.

A model with ``noise_coupled`` = True also has a residual that depends on the interval's process noise n (tangent
coordinates of x_{k+1}, added after f), linearly: its whitened residual is r + Rw n with Rw (nr, ndx) constant (e.g. an
accelerometer that measures the realised acceleration a + n_v/dt of the interval rather than the model's a). The model
fills r and Rw; the problem adds Rw n (:mod:`mcoe_ros.ocp.problem`). The terminal knot has no noise: no coupling.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


class IntervalData:
    """Preallocated workspace of one knot's interval model. Subclasses add their own buffers.

    u (nu,) known input, z (nz,) measurement (both set by the problem builder), xnext (nx,) = f(x; pi | u),
    r (nr,) whitened residual, Fx (ndx, ndx), Fp (ndx, npi), Rx (nr, ndx), Rp (nr, npi), Rw (nr, ndx) = ∂r/∂n of a
    noise-coupled model (zero otherwise).
    """

    def __init__(self, model: IntervalModel):
        ndx, npi, nr = model.state.ndx, model.npi, model.nr
        self.u = np.zeros(model.nu)
        self.z = np.zeros(model.nz)
        self.xnext = np.zeros(model.state.nx)
        self.r = np.zeros(nr)
        self.Fx = np.zeros((ndx, ndx))
        self.Fp = np.zeros((ndx, npi))
        self.Rx = np.zeros((nr, ndx))
        self.Rp = np.zeros((nr, npi))
        self.Rw = np.zeros((nr, ndx))


class IntervalModel(ABC):
    """Dynamics of one shooting interval and the measurement model of its first knot (see module docstring).

    Attributes set by subclasses: ``state`` (a state manifold, :mod:`mcoe_ros.ocp.state`), ``npi`` (size of pi),
    ``nu`` (input size), ``nz`` (measurement vector size), ``nr`` (whitened residual size).
    """

    state: object
    npi: int
    nu: int
    nz: int
    nr: int
    #: (nr, nb) ∂r/∂b of the residual in *consider parameters* b: constant offsets of the measurements that are not
    #: estimated (e.g. the IMU biases), whose uncertainty the solver's consider analysis adds to the covariance
    #: (:meth:`mcoe_ros.ocp.solver.MCOESolver.terminal_covariance`); None = the residual does not depend on them
    consider_jacobian: np.ndarray | None = None
    #: the residual depends on the interval's process noise through ``data.Rw`` (see the module docstring)
    noise_coupled: bool = False

    def create_data(self) -> IntervalData:
        return IntervalData(self)

    @abstractmethod
    def calc(self, data: IntervalData, x: np.ndarray, pi: np.ndarray) -> None:
        """Fill data.xnext and data.r."""

    @abstractmethod
    def calc_diff(self, data: IntervalData, x: np.ndarray, pi: np.ndarray) -> None:
        """Fill data.xnext, data.r and the Jacobians Fx, Fp, Rx, Rp (calls what calc needs)."""
