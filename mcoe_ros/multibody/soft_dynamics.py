"""Soft-contact interval dynamics with the interface of :class:`mcoe_ros.multibody.dynamics.PhaseDynamicsModel`.

Wraps :class:`mcoe_ros.multibody.soft_contact.ImplicitSoftContactModel` (the implicit-DDP paper's invertible soft
contact, one interval solved by Newton's method) so that :class:`mcoe_ros.multibody.interval.MultibodyIntervalModel`
and its measurement models can use it in place of the rigid phase dynamics: x' = F(x; pi, u) with r(x, x'; pi, u) = 0,
Fx = -R1⁻¹ R0, dF/dpi = -R1⁻¹ Rp on the payload block of the :class:`~mcoe_ros.multibody.actuator.ParameterLayout`
(zero columns for the IMU biases, which the dynamics ignore; an actuator model is rejected: its friction and rotor
inertia are not in the implicit residual).

Every foot is always in soft contact (the law's smooth activation decides), so ``contacts`` only names the phase (the
measurement side: stance feet's zero-velocity pseudo-measurements) and there is no impulse (reset) map: a landing is
absorbed by the contact law within the interval.

The data exposes what the measurement collector reads: ``a`` = (v' - v)/dt (m/s², rad/s²), ``lam`` (3 per foot, N,
world axes, stacked in ``robot.foot_names`` order of ``feet``), ``vdyn`` = v (no reset), ``da_dx`` = (Fx[v rows] - [0,
I])/dt, ``da_dpi`` = Fp[v rows]/dt, ``dvdyn_dx`` = [0, I], ``dvdyn_dpi`` = 0, and ``da_dtau`` (nv, nv) whose joint
columns are dF_v/du / dt (for :meth:`SoftPhaseDynamicsModel.velocity_noise_covariance`).

Newton failure (no convergence, singular R1, non-finite iterate) raises :class:`SoftContactNewtonError`, a
``numpy.linalg.LinAlgError``: the estimator holds the tick's solve (see ``Estimator``), it never crashes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mcoe_ros.multibody.actuator import ActuatorModel, ParameterLayout
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.multibody.soft_contact import ImplicitSoftContactModel, SoftContactModel


class SoftContactNewtonError(np.linalg.LinAlgError):
    """The implicit soft-contact step of one interval has no (converged, finite) solution."""


class SoftPhaseDynamicsModel:
    """Soft-contact dynamics of one interval (module docstring). Shared and immutable; storage in the data."""

    #: the rigid model's options the interval model reads (no Baumgarte, no reset restitution)
    kp = kd = restitution = 0.0

    def __init__(
        self,
        robot: RobotModel,
        contacts: Sequence[str] = (),
        dt: float = 2e-3,
        contact: SoftContactModel | None = None,
        actuator: ActuatorModel | None = None,
        layout: ParameterLayout | None = None,
        tol: float = 1e-9,
        max_iter: int = 50,
    ):
        if actuator is not None or (layout is not None and layout.n_actuator):
            raise ValueError("soft-contact dynamics: no actuator model (set actuator.enabled false)")
        if layout is not None and layout.leg_mass:
            raise ValueError("soft-contact dynamics: no leg mass parameter (set payload.leg_mass.enabled false)")
        self.layout = layout or ParameterLayout()
        self.implicit = ImplicitSoftContactModel(robot, dt, contact)
        for name in contacts:
            if name not in robot.foot_names:
                raise ValueError(f"unknown foot '{name}' (robot feet: {robot.foot_names})")
        self.robot, self.contacts, self.impulse, self.dt = robot, tuple(contacts), (), float(dt)
        self.actuator = None
        self.contact = self.implicit.contact
        self.tol, self.max_iter = float(tol), int(max_iter)
        self.nq, self.nv, self.nj = robot.model.nq, robot.model.nv, robot.nj
        self.ndx, self.npi = 2 * self.nv, self.layout.size
        self.nc = 3 * len(self.implicit.feet)

    def create_data(self) -> SoftPhaseDynamicsData:
        return SoftPhaseDynamicsData(self)

    def velocity_noise_covariance(
        self, data: SoftPhaseDynamicsData, torque_std: np.ndarray, floor_std: float, contact_std: float = 0.0
    ) -> np.ndarray:
        """Covariance (nv, nv) of the next velocity under white joint-torque noise of std ``torque_std`` (nj,) N m,
        (dF_v/du) diag(σ²) (dF_v/du)ᵀ, plus ``floor_std``² on every velocity: the rigid model's noise model with
        the soft step's torque sensitivity (last calc_diff). ``contact_std`` (the rigid model's constraint noise)
        must be 0: the soft contact has no constraint."""
        if contact_std > 0.0:
            raise ValueError("noise.contact_acceleration needs the rigid contact model (dynamics.model rigid)")
        a_j = data.da_dtau[:, self.nv - self.nj :] * (self.dt * np.asarray(torque_std, dtype=float))
        cov = a_j @ a_j.T
        cov[np.diag_indices(self.nv)] += floor_std**2
        return cov

    def _step(self, data: SoftPhaseDynamicsData, x: np.ndarray, u: np.ndarray, pi: np.ndarray) -> None:
        nq, nv, dt = self.nq, self.nv, self.dt
        inner = data.inner
        if data.solved:  # warm start: the last solution (the solver moves x little between calls)
            guess = data.xnext.copy()
        else:
            guess = x.copy()
            guess[:nq] = self.implicit.state.integrate(x, np.r_[dt * x[nq:], np.zeros(nv)])[:nq]
        try:
            with np.errstate(over="raise", invalid="raise"):
                xn = self.implicit.solve_next(inner, x, u, pi[:10], guess, self.tol, self.max_iter)
        except (RuntimeError, FloatingPointError, np.linalg.LinAlgError) as err:
            raise SoftContactNewtonError(f"soft-contact step failed: {err}") from None
        if not (np.all(np.isfinite(xn)) and np.all(np.isfinite(inner.Fx))):
            raise SoftContactNewtonError("soft-contact step failed: non-finite solution")
        data.xnext[:] = xn
        data.solved = True
        data.vnext[:] = xn[nq:]
        data.vdyn[:] = x[nq:]
        data.a[:] = (xn[nq:] - x[nq:]) / dt
        data.lam[:] = inner.forces.ravel()

    def calc(self, data: SoftPhaseDynamicsData, x: np.ndarray, u: np.ndarray, pi: np.ndarray) -> None:
        """x' (data.xnext), a, lam (the Newton solve also forms the derivatives; calc_diff only copies them)."""
        self._step(data, x, u, pi)

    def calc_diff(self, data: SoftPhaseDynamicsData, x: np.ndarray, u: np.ndarray, pi: np.ndarray) -> None:
        """As calc, plus Fx, Fp (ndx, npi: payload block, other columns 0), da_dx, da_dpi, da_dtau."""
        self._step(data, x, u, pi)
        nv, dt, inner = self.nv, self.dt, data.inner
        data.Fx[:] = inner.Fx
        data.Fp[:, :10] = inner.Fp
        np.divide(inner.Fx[nv:], dt, out=data.da_dx)
        data.da_dx[:, nv:] -= np.eye(nv) / dt
        data.da_dpi[:, :10] = inner.Fp[nv:] / dt
        data.da_dtau[:, nv - self.nj :] = inner.Fu[nv:] / dt


class SoftPhaseDynamicsData:
    """Workspace of :class:`SoftPhaseDynamicsModel`: the implicit model's data ``inner`` (own pin.Model copy with
    the payload of the last call, exposed as ``model``) and the rigid data's result buffers (module docstring)."""

    def __init__(self, dyn: SoftPhaseDynamicsModel):
        nq, nv, ndx, npi = dyn.nq, dyn.nv, dyn.ndx, dyn.npi
        self.inner = dyn.implicit.create_data()
        self.model = self.inner.model
        self.solved = False  #: xnext holds a converged step (the next call's Newton guess)
        self.anchors = None  # the rigid model's Baumgarte anchors: unused (the soft law has its own ground)
        self.zero_v = np.zeros(nv)
        self.vdyn, self.vnext, self.a = np.zeros(nv), np.zeros(nv), np.zeros(nv)
        self.lam = np.zeros(dyn.nc)
        self.xnext = np.zeros(nq + nv)
        self.Fx, self.Fp = np.zeros((ndx, ndx)), np.zeros((ndx, npi))
        self.da_dx, self.da_dpi = np.zeros((nv, ndx)), np.zeros((nv, npi))
        self.da_dtau = np.zeros((nv, nv))
        self.dvdyn_dx = np.zeros((nv, ndx))
        self.dvdyn_dx[:, nv:] = np.eye(nv)
        self.dvdyn_dpi = np.zeros((nv, npi))
