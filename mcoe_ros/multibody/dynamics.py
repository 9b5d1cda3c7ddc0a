"""Discrete phase dynamics x' = f_p(x; pi | u) of a legged robot with analytic Jacobians in x and pi.

State x = (q, v) (Pinocchio conventions, tangent dx = (dq, dv), size 2 nv). A *phase* p is the set of
feet in rigid 3D point contact (any subset of ``robot.foot_names``); an optional *impulse* set holds
the feet that land at the start of the step (contact-gain reset map Delta, paper eq. 16/19).

One step of length dt (seconds), in this order:

1. reset (only if ``impulse`` is non-empty): v+ = Delta(q, v; pi), impulse dynamics with restitution
   ``restitution`` (default 0) on the landing feet, ``pin.impulseDynamics``. Without impulse v+ = v.
   Design: a "reset interval" applies the impulse *and then* the new phase's contact dynamics for dt, so
   every interval keeps the same step length and the reset needs no extra knot / state copy; the
   builder uses it for the first interval of a phase whose feet just landed (``impulse`` = landing feet;
   passing the whole post-impact stance set also keeps the stance feet still through the impact).
2. acceleration a = FD_p(q, v+, tau; pi): ABA without contact, else proximal ``pin.constraintDynamics``
   (M a + h = tau + J^T lambda, J a = -gamma - Kd J v+ [- Kp e_p]), lambda (3 per foot, N) = force
   *on the robot* in the contact frame (LOCAL: foot frame; LOCAL_WORLD_ALIGNED: world axes).
3. semi-implicit Euler on the Lie group: v' = v+ + dt a, q' = q ⊕ dt v'. Chosen because it is explicit
   (one dynamics call per interval, exact and cheap Jacobian), clearly more stable than explicit Euler for
   the same cost (symplectic for the unconstrained rigid-body part), and the scheme used by the
   contact-dynamics estimation/control literature (Crocoddyl's Euler integrator, the LCABA paper).
   Because q' uses the *updated* velocity, the post-impact / constrained foot velocities (J v+ = 0,
   J a = -gamma) carry over to the positions: stance feet do not slide within a step (O(dt^2)).

Contacts: world-anchored points. Baumgarte gains (kp 1/s^2, kd 1/s) default 0 (pure acceleration-level
constraint J a = -gamma, no drift correction: the estimator's states are free to drift by w anyway and
gains would add stiffness to f_x). kd acts on the foot velocity of the ``damped`` contacts (default: every contact):
J_i a = -gamma_i - kd J_i v, a foot whose velocity decays at the rate kd (1/s) -- a *landing over time*, the
estimator's alternative to the impulse (``dynamics.landing_damping``). kp acts only when the builder sets
explicit world anchors ``data.anchors`` (n_contacts, 3); without anchors the contact is anchored at
the foot's current position, whose position error is identically zero, so kp is (exactly) dropped.

Rolling feet (``rolling_feet``): the contact of foot k is not the foot frame's origin but a point p_k (m, foot-frame
coordinates) given with the input, u = [tau (nj); p_0; ...; p_{nf-1}] (nf = the robot's feet, ``robot.foot_names``
order): the round foot's contact at the knot, ``dynamics.rolling_radius`` straight below the foot frame, which the
problem builder computes from the knot's encoders and IMU (a knot input, not a function of the state, so the Jacobians
are those of a point contact at a fixed point of the foot). With ``rolling_contacts`` (default) the ground force acts
there, and that material point is held: a rolling sphere's contact, not its centre. Without, the contacts stay at the
foot frames and the points only serve the measurements that read them (the stance foot's velocity at its rolling
point, :class:`~mcoe_ros.multibody.measurements.ContactVelocity`).

Torques: tau = [0_6, u_tau - loss(v+)] for a floating base (tau = u_tau - loss for a fixed base); u_tau (nj,) reported
joint torques in model joint order, loss the actuator friction of :class:`mcoe_ros.multibody.actuator.ActuatorModel`
(zero without an actuator model); its rotor inertia adds to the model copy's ``armature``.

Parameters pi: the blocks of :class:`mcoe_ros.multibody.actuator.ParameterLayout` (payload body 10, actuator n,
IMU biases, which the dynamics ignore). Actuator derivatives: the inverse-dynamics residual is linear in the actuator
parameters with regressor Y_act (joint rows), so da/dp = -(da/dtau) Y_act like the payload's; the friction's velocity
dependence adds (da/dtau)(-dloss/dv) to da/dv; the rotor inertia enters the impulse map like the payload
(Y_imp,act = I_r columns times (v+ - v)).

Leg mass scale (``layout.leg_mass``): pi's last entry k multiplies the URDF parameters of every body but the payload's
parent (``robot.leg_joints``): pi_legs(k) = k pi_legs,URDF. The inverse dynamics sum_j Y_j pi_j is linear in k with the
regressor column y_leg = sum_legs Y_j pi_j,URDF, so da/dk = -(da/dtau) y_leg and dlambda/dk = -(dlambda/dtau) y_leg
like the payload's, and the impulse map's column is -(I + ddq_dv / (1 + r)) M^-1 y_imp,leg with
y_imp,leg = sum_legs (Y_j(q, 0, v+ - v) - Y_j(q, 0, 0)) pi_j,URDF.

Derivatives: f_x via ``pin.computeConstraintDynamicsDerivatives`` / ``computeABADerivatives`` /
``computeImpulseDynamicsDerivatives`` chained with ``pin.dIntegrate``. f_pi (payload pi, 10 params in
the payload-frame convention of :mod:`mcoe_ros.multibody.inertia`) from the joint-torque regressor of the
payload's parent joint times ``robot.payload_to_joint``:
* free: da/dpi = -M^-1 Y(q, v, a)                                                        (eq. 17)
* contact: d[a; -lambda]/dpi = -KKT^-1 [Y; 0]; only the first block column of KKT^-1 is needed and
  it *is* d[a; -lambda]/dtau = (da/dtau, -dlambda/dtau), which Pinocchio returns for the same
  ProximalSettings by replaying the proximal iterations. So da/dpi = -(da/dtau) Y and
  dlambda/dpi = -(dlambda/dtau) Y are the exact derivatives of what the forward pass computed (no
  damping bias, unlike one solve with the damped factorisation ``constraint_chol``, error O(mu)). (eq. 18)
* impulse: impulseDynamics does a single damped solve, i.e. it solves exactly the damped KKT
  [[M, J^T], [J, -mu I]] [v+; -Lambda] = [M v; 0] (r = 0). Its first block column is
  M^-1 - M^-1 J^T (J M^-1 J^T + mu I)^-1 J M^-1 = (I + ddq_dv / (1 + r)) M^-1, with ddq_dv = d(v+ - v)/dv
  from ``computeImpulseDynamicsDerivatives``, so dv+/dpi = -(I + ddq_dv / (1 + r)) M^-1 Y_imp with
  Y_imp = Y(q, 0, v+ - v) - Y(q, 0, 0) (eq. 19) -- FD-exact for any mu.

Damping: ``ProximalSettings(accuracy, mu, max_iter)`` with mu = 1e-8 by default (Pinocchio's mu is
1/mu_paper). The contact solve iterates to the rigid solution (bias ~1e-12); the impulse is biased
by ~mu in v+ (2.8e-8 m/s). mu > 0 keeps redundant contact sets finite (mu = 0 gives NaN).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.actuator import ActuatorModel, ParameterLayout
from mcoe_ros.multibody.robot import RobotModel

_REF_FRAMES = (pin.ReferenceFrame.LOCAL, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)


def _spatial_inertia_basis() -> np.ndarray:
    """(10, 6, 6): the spatial inertia matrix is linear in Pinocchio's dynamic parameters (m, m c, I about the
    origin), I(π) = Σ_l π_l E_l; E_l = ∂I/∂π_l."""
    ref = np.array([1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0])  # a physical body, about which to difference
    base = pin.Inertia.FromDynamicParameters(ref).matrix()
    return np.array([pin.Inertia.FromDynamicParameters(ref + e).matrix() - base for e in np.eye(10)])


_SPATIAL_INERTIA_BASIS = _spatial_inertia_basis()


class PhaseDynamicsModel:
    """Discrete dynamics of one phase (contact set) with optional contact-gain reset (see module doc).

    Shared and immutable after construction; all per-evaluation storage is in :class:`PhaseDynamicsData`.
    """

    def __init__(
        self,
        robot: RobotModel,
        contacts: Sequence[str] = (),
        dt: float = 2e-3,
        impulse: Sequence[str] = (),
        reference_frame: pin.ReferenceFrame = pin.ReferenceFrame.LOCAL,
        kp: float = 0.0,
        kd: float = 0.0,
        mu: float = 1e-8,
        accuracy: float = 1e-10,
        max_iter: int = 10,
        restitution: float = 0.0,
        actuator: ActuatorModel | None = None,
        layout: ParameterLayout | None = None,
        damped: Sequence[str] | None = None,
        rolling_feet: bool = False,
        rolling_contacts: bool = True,
    ):
        layout = layout or ParameterLayout(n_actuator=actuator.n_params if actuator else 0)
        if (actuator.n_params if actuator else 0) != layout.n_actuator:
            raise ValueError("parameter layout and actuator model disagree on the actuator block")
        for name in (*contacts, *impulse):
            if name not in robot.foot_names:
                raise ValueError(f"unknown foot '{name}' (robot feet: {robot.foot_names})")
        if reference_frame not in _REF_FRAMES:
            raise ValueError("reference_frame must be LOCAL or LOCAL_WORLD_ALIGNED")
        if mu < 0.0 or dt <= 0.0:
            raise ValueError("need mu >= 0 and dt > 0")
        self.robot = robot
        self.contacts = tuple(contacts)
        self.impulse = tuple(impulse)
        #: contacts whose constraint has the velocity gain kd (None: every contact)
        self.damped = self.contacts if damped is None else tuple(damped)
        if not set(self.damped) <= set(self.contacts):
            raise ValueError(f"damped feet {self.damped} must be contacts {self.contacts}")
        self.dt = float(dt)
        self.reference_frame = reference_frame
        self.kp, self.kd = float(kp), float(kd)
        self.mu, self.accuracy, self.max_iter = float(mu), float(accuracy), int(max_iter)
        self.restitution = float(restitution)
        model = robot.model
        self.nq, self.nv, self.nj = model.nq, model.nv, robot.nj
        #: contact points p_k from the input (rolling feet): u = [tau (nj); p (3 per foot)], else u = tau
        self.rolling_feet = bool(rolling_feet)
        #: the rigid contacts at the points p_k (False: at the foot frames; the points are the measurements')
        self.rolling_contacts = self.rolling_feet and bool(rolling_contacts)
        self.nu = self.nj + (3 * len(robot.foot_names) if self.rolling_feet else 0)
        foot_index = {name: i for i, name in enumerate(robot.foot_names)}
        self.contact_feet = [foot_index[name] for name in self.contacts]  #: each contact's foot index
        self.impulse_feet = [foot_index[name] for name in self.impulse]
        self.actuator, self.layout = actuator, layout
        self.nx, self.ndx, self.npi = self.nq + self.nv, 2 * self.nv, layout.size
        self.nominal_armature = robot.model.armature.copy()
        self.nc = 3 * len(self.contacts)  #: contact force size
        self.ni = 3 * len(self.impulse)  #: impulse size
        self.payload_joint = robot.payload_joint
        #: payload on a body fixed to the world (fixed base): pi has no effect on f (f_pi = 0)
        self.payload_on_universe = robot.payload_joint == 0
        cols = 10 * max(robot.payload_joint - 1, 0)
        self.regressor_cols = slice(cols, cols + 10)  #: payload parent-joint columns of the regressor
        self.payload_to_joint = robot.payload_to_joint.copy()
        self.nominal_pi = robot.nominal_inertias[robot.payload_joint].toDynamicParameters().copy()
        #: leg mass scale: the scaled joints, their regressor columns and URDF parameters (stacked 10 per joint)
        self.leg_joints = robot.leg_joints if layout.leg_mass else []
        self.leg_cols = np.array([10 * (j - 1) + i for j in self.leg_joints for i in range(10)], dtype=int)
        self.leg_nominal_pi = np.concatenate(
            [robot.nominal_inertias[j].toDynamicParameters() for j in self.leg_joints] or [np.zeros(0)]
        )

    def velocity_noise_covariance(
        self, data: PhaseDynamicsData, torque_std: np.ndarray, floor_std: float, contact_std: float = 0.0
    ) -> np.ndarray:
        """Covariance (nv, nv) of the next velocity caused by white joint-torque noise of std ``torque_std`` (nj,)
        N m over the step, dt² (da/dtau_j) diag(σ²) (da/dtau_j)ᵀ, plus ``floor_std``² (m/s or rad/s) on every velocity
        (unmodelled forces), plus white noise w of std ``contact_std`` (m/s², isotropic, per stance foot) on the
        contact constraint J a = -γ + w (feet that move though held: a soft ground's sinking, a round foot's
        rolling), dt² σ_c² (da/dw)(da/dw)ᵀ. Uses da/dtau and da/dw of the last calc_diff (constrained in contact
        phases; no contact term without contacts)."""
        a_j = data.da_dtau[:, self.nv - self.nj :] * (self.dt * np.asarray(torque_std, dtype=float))
        cov = a_j @ a_j.T
        if contact_std > 0.0 and self.contacts:
            a_w = data.da_dw * (self.dt * contact_std)
            cov += a_w @ a_w.T
        cov[np.diag_indices(self.nv)] += floor_std**2
        return cov

    def velocity_noise_covariance_derivative(
        self, data: PhaseDynamicsData, torque_std: np.ndarray, contact_std: float = 0.0
    ) -> np.ndarray:
        """Derivative (npi, nv, nv) of the dynamics part of :meth:`velocity_noise_covariance` (torque noise and contact
        constraint noise; the floor is constant), Q = D Dᵀ with D = dt [da/dτ_j diag(σ_τ), σ_c da/dw], with respect to
        pi at the last calc_diff.

        Both blocks of D are blocks of the contact KKT matrix's inverse (da/dτ = A, its first block, or M⁻¹ without
        contacts; da/dw its off-diagonal block), which depends on pi through the joint-space inertia M only:
        ∂D/∂π = −A (∂M/∂π) D, so ∂Q/∂π = −(A (∂M/∂π) Q + Q (∂M/∂π) Aᵀ). ∂M/∂π: the payload's parent body enters M as
        J_pᵀ I_p J_p (J_p its joint's LOCAL Jacobian, I_p its spatial inertia, linear in the joint-frame parameters
        T π + π_URDF), the rotor inertia as the joints' armature. The friction parameters and IMU biases do not change
        M (zero slices); a leg mass scale is not supported."""
        if self.layout.leg_mass:
            raise ValueError("the torque-noise covariance derivative does not support a leg mass scale")
        nv = self.nv
        a_mat = data.da_dtau
        cov = self.velocity_noise_covariance(data, torque_std, 0.0, contact_std)
        out = np.zeros((self.npi, nv, nv))
        if not self.payload_on_universe:
            jac = pin.computeJointJacobian(data.model, data.aux, data.q, self.payload_joint)  # (6, nv) LOCAL
            aj = a_mat @ jac.T  # (nv, 6)
            jq = jac @ cov  # (6, nv)
            basis = np.tensordot(self.payload_to_joint.T, _SPATIAL_INERTIA_BASIS, axes=1)  # (10, 6, 6)
            out[:10] = aj @ basis @ jq
        if self.actuator is not None:
            rows = self.layout.actuator.start + 2 * self.actuator.n_groups  # rotor-inertia parameters
            for g in range(self.actuator.n_groups):
                sel = nv - self.nj + np.flatnonzero(self.actuator.groups[:, g])
                out[rows + g] = a_mat[:, sel] @ cov[sel]
        out += out.transpose(0, 2, 1)
        out *= -1.0
        return out

    def _constraint_models(self, model: pin.Model, feet: Sequence[str], kp: float) -> pin.StdVec_RigidConstraintModel:
        cms = pin.StdVec_RigidConstraintModel()
        for name in feet:
            frame = model.frames[self.robot.foot_frame_ids[self.robot.foot_names.index(name)]]
            cm = pin.RigidConstraintModel(
                pin.ContactType.CONTACT_3D,
                model,
                frame.parentJoint,
                frame.placement,
                0,
                pin.SE3.Identity(),
                self.reference_frame,
            )
            cm.name = name
            cm.m_baumgarte_parameters.Kp = kp
            cm.m_baumgarte_parameters.Kd = self.kd if name in self.damped else 0.0
            cms.append(cm)
        return cms

    def create_data(self) -> PhaseDynamicsData:
        return PhaseDynamicsData(self)

    def set_payload(self, data: PhaseDynamicsData, pi: np.ndarray) -> None:
        """Write parent body + payload (pi's payload block), the rotor inertia (actuator block) and the scaled leg
        bodies (leg mass block) into the data's own pin.Model copy (robot.model untouched)."""
        if self.actuator is not None:
            data.p_act[:] = pi[self.layout.actuator]
            data.model.armature[self.nv - self.nj :] = self.nominal_armature[self.nv - self.nj :]
            data.model.armature[self.nv - self.nj :] += self.actuator.rotor_inertia(data.p_act)
        if self.layout.leg_mass:
            scale = float(pi[self.layout.leg][0])
            if scale != data.leg_scale:
                for i, j in enumerate(self.leg_joints):
                    nominal = self.leg_nominal_pi[10 * i : 10 * i + 10]
                    data.model.inertias[j] = pin.Inertia.FromDynamicParameters(scale * nominal)
                data.leg_scale = scale
        if self.payload_on_universe:
            return
        np.dot(self.payload_to_joint, pi[:10], out=data.pi_joint)
        data.pi_joint += self.nominal_pi
        data.model.inertias[self.payload_joint] = pin.Inertia.FromDynamicParameters(data.pi_joint)

    def _set_anchors(self, data: PhaseDynamicsData, q: np.ndarray) -> None:
        """Explicit anchors -> kp active; none -> anchored at the current foot (kp dropped, exact)."""
        if self.kp == 0.0:  # cmodels were created with Kp = 0
            return
        use = data.anchors is not None
        kp = self.kp if use else 0.0
        for i, cm in enumerate(data.cmodels):
            if cm.m_baumgarte_parameters.Kp != kp:
                cm.m_baumgarte_parameters.Kp = kp
            if use:
                cm.joint2_placement = pin.SE3(np.eye(3), np.asarray(data.anchors[i], dtype=float))

    def _set_points(self, data: PhaseDynamicsData, u: np.ndarray) -> None:
        """Rolling feet: each constraint at its foot's point p_k = u[nj + 3k : nj + 3k + 3] of the foot frame."""
        data.points[:] = u[self.nj :].reshape(-1, 3)
        if not self.rolling_contacts:
            return
        for cms, feet in ((data.cmodels, self.contact_feet), (data.cmodels_imp, self.impulse_feet)):
            for cm, k in zip(cms, feet, strict=True):
                frame = data.model.frames[self.robot.foot_frame_ids[k]]
                cm.joint1_placement = frame.placement * pin.SE3(np.eye(3), data.points[k])

    def _forward(self, data: PhaseDynamicsData, x: np.ndarray, u: np.ndarray, pi: np.ndarray, diff: bool) -> None:
        model, nq, nb = data.model, self.nq, self.nv - self.nj
        self.set_payload(data, pi)
        q, v = x[:nq], x[nq:]
        data.q[:] = q
        if self.rolling_feet:
            self._set_points(data, u)
        if self.impulse:
            data.vdyn[:] = pin.impulseDynamics(
                model, data.pdata_imp, q, v, data.cmodels_imp, data.cdatas_imp, self.restitution, data.settings_imp
            )
            data.impulse_c[:] = data.pdata_imp.impulse_c
        else:
            data.vdyn[:] = v
        data.tau[nb:] = u[: self.nj]
        if self.actuator is not None:
            data.tau[nb:] -= self.actuator.loss(data.vdyn[nb:], data.p_act)
        if self.contacts:
            self._set_anchors(data, q)
            data.a[:] = pin.constraintDynamics(
                model, data.pdata, q, data.vdyn, data.tau, data.cmodels, data.cdatas, data.settings
            )
            data.lam[:] = data.pdata.lambda_c
        elif diff:
            pin.computeABADerivatives(model, data.pdata, q, data.vdyn, data.tau)
            data.a[:] = data.pdata.ddq
        else:
            data.a[:] = pin.aba(model, data.pdata, q, data.vdyn, data.tau)
        np.multiply(self.dt, data.a, out=data.vnext)
        data.vnext += data.vdyn
        np.multiply(self.dt, data.vnext, out=data.dq)
        data.xnext[:nq] = pin.integrate(model, q, data.dq)
        data.xnext[nq:] = data.vnext

    def calc(self, data: PhaseDynamicsData, x: np.ndarray, u: np.ndarray, pi: np.ndarray) -> None:
        """Fill data.xnext (nx,), data.a (nv,), data.vdyn (= v+, nv), data.lam (nc,), data.impulse_c (ni,)."""
        self._forward(data, x, u, pi, diff=False)

    def calc_diff(self, data: PhaseDynamicsData, x: np.ndarray, u: np.ndarray, pi: np.ndarray) -> None:
        """calc plus Fx (ndx, ndx), Fp (ndx, npi) and the intermediate Jacobians (tangent coordinates).

        Also fills da_dx (nv, ndx), da_dtau (nv, nv), da_dpi (nv, npi), dvdyn_dx (nv, ndx), dvdyn_dpi (nv, npi),
        dlam_dx (nc, ndx), dlam_dpi (nc, npi) for the measurement models (bias columns stay zero).
        """
        self._forward(data, x, u, pi, diff=True)
        model, nv, dt, cols, A = data.model, self.nv, self.dt, self.regressor_cols, self.payload_to_joint
        nb, act = nv - self.nj, self.layout.actuator
        q, v = x[: self.nq], x[self.nq :]
        data.dvdyn_dpi[:] = 0.0
        # reset map v+ = Delta(q, v; pi)
        if self.impulse:
            pdi = data.pdata_imp
            # computeImpulseDynamicsDerivatives reads data.dvc_dq before writing all of it (Pinocchio 4.1): left from
            # the previous call it makes the Jacobians depend on the data's history (up to 0.24 in Fx)
            pdi.dvc_dq = np.zeros_like(pdi.dvc_dq)
            pin.computeImpulseDynamicsDerivatives(
                model, pdi, data.cmodels_imp, data.cdatas_imp, self.restitution, data.settings_imp
            )
            data.dvdyn_dx[:, :nv] = pdi.ddq_dq
            data.dvdyn_dx[:, nv:] = pdi.ddq_dv
            data.proj[:] = pdi.ddq_dv
            data.proj *= 1.0 / (1.0 + self.restitution)
            data.proj[np.diag_indices(nv)] += 1.0
            data.dvdyn_dx[:, nv:][np.diag_indices(nv)] += 1.0
            legs = self.layout.leg
            if not self.payload_on_universe or self.actuator is not None or legs is not None:
                minv = pin.computeMinverse(model, data.aux, q)
            if not self.payload_on_universe or legs is not None:
                y_imp = pin.computeJointTorqueRegressor(model, data.aux, q, data.zero_v, data.dv_imp(v)).copy()
                y_imp -= pin.computeJointTorqueRegressor(model, data.aux, q, data.zero_v, data.zero_v)
                if not self.payload_on_universe:
                    data.y_imp[:] = y_imp[:, cols]
                    data.dvdyn_dpi[:, :10] = -data.proj @ (minv @ (data.y_imp @ A))
                if legs is not None:
                    data.dvdyn_dpi[:, legs] = (
                        -data.proj @ (minv @ (y_imp[:, self.leg_cols] @ self.leg_nominal_pi))[:, None]
                    )
            if self.actuator is not None:  # rotor inertia in the impulse: M (v+ - v) = J^T Lambda
                y_act = self.actuator.regressor(data.zero_v[nb:], data.dv_imp(v)[nb:])
                data.dvdyn_dpi[:, act] = -data.proj @ (minv[:, nb:] @ y_act)
        # acceleration of the phase at (q, v+)
        if self.contacts:
            pin.computeConstraintDynamicsDerivatives(model, data.pdata, data.cmodels, data.cdatas, data.settings)
            pd = data.pdata
            a_q, a_v, a_tau = pd.ddq_dq, pd.ddq_dv, pd.ddq_dtau
            l_v = pd.dlambda_dv
        else:
            pd = data.pdata
            a_q, a_v, a_tau = pd.ddq_dq, pd.ddq_dv, pd.Minv
        data.da_dtau[:] = a_tau
        if self.contacts:  # KKT symmetry: d a / d(-γ + w) = (d(-λ)/dτ)ᵀ
            np.negative(pd.dlambda_dtau.T, out=data.da_dw)
        data.da_dpi[:] = 0.0
        data.dlam_dpi[:] = 0.0
        legs = self.layout.leg
        if not self.payload_on_universe or legs is not None:
            y_all = pin.computeJointTorqueRegressor(model, data.aux, q, data.vdyn, data.a)
        if not self.payload_on_universe:
            y = y_all[:, cols] @ A
            np.matmul(a_tau, y, out=data.da_dpi[:, :10])
            data.da_dpi[:, :10] *= -1.0
            if self.contacts:
                np.matmul(pd.dlambda_dtau, y, out=data.dlam_dpi[:, :10])
                data.dlam_dpi[:, :10] *= -1.0
        if legs is not None:  # legs' pi = k pi_URDF: one regressor column
            y_leg = y_all[:, self.leg_cols] @ self.leg_nominal_pi
            data.da_dpi[:, legs.start] = -(a_tau @ y_leg)
            if self.contacts:
                data.dlam_dpi[:, legs.start] = -(pd.dlambda_dtau @ y_leg)
        if self.actuator is not None:
            # tau = u - loss(v+; p): the loss's velocity dependence and the parameters' regressor
            dloss = self.actuator.dloss_ddq(data.vdyn[nb:], data.p_act)
            a_v = a_v.copy()
            a_v[:, nb:] -= a_tau[:, nb:] * dloss
            y_act = self.actuator.regressor(data.vdyn[nb:], data.a[nb:])
            data.da_dpi[:, act] = -a_tau[:, nb:] @ y_act
            if self.contacts:
                l_v = l_v.copy()
                l_v[:, nb:] -= pd.dlambda_dtau[:, nb:] * dloss
                data.dlam_dpi[:, act] = -pd.dlambda_dtau[:, nb:] @ y_act
        if self.impulse:
            np.matmul(a_v, data.dvdyn_dx, out=data.da_dx)
            data.da_dx[:, :nv] += a_q
            data.da_dpi += a_v @ data.dvdyn_dpi
            if self.contacts:
                np.matmul(l_v, data.dvdyn_dx, out=data.dlam_dx)
                data.dlam_dx[:, :nv] += pd.dlambda_dq
                data.dlam_dpi += l_v @ data.dvdyn_dpi
        else:
            data.da_dx[:, :nv] = a_q
            data.da_dx[:, nv:] = a_v
            if self.contacts:
                data.dlam_dx[:, :nv] = pd.dlambda_dq
                data.dlam_dx[:, nv:] = l_v
        # v' = v+ + dt a ;  q' = q ⊕ dt v'
        fx, fp = data.Fx, data.Fp
        dvn_dx, dvn_dpi = fx[nv:], fp[nv:]
        np.multiply(dt, data.da_dx, out=dvn_dx)
        dvn_dx += data.dvdyn_dx
        np.multiply(dt, data.da_dpi, out=dvn_dpi)
        dvn_dpi += data.dvdyn_dpi
        jq = pin.dIntegrate(model, q, data.dq, pin.ArgumentPosition.ARG0)
        jv = pin.dIntegrate(model, q, data.dq, pin.ArgumentPosition.ARG1)
        jv *= dt
        np.matmul(jv, dvn_dx, out=fx[:nv])
        fx[:nv, :nv] += jq
        np.matmul(jv, dvn_dpi, out=fp[:nv])


class PhaseDynamicsData:
    """Workspace of :class:`PhaseDynamicsModel`: own pin.Model copy (payload set from pi), pin.Datas,
    constraint models/datas (one set per contact mode, initialised once) and all result buffers."""

    def __init__(self, dyn: PhaseDynamicsModel):
        nq, nv, ndx = dyn.nq, dyn.nv, dyn.ndx
        #: own copy of the robot model, its payload inertia is overwritten from pi at every call
        self.model = dyn.robot.model.copy()
        self.pdata = self.model.createData()  #: phase dynamics (aba / constraintDynamics)
        self.aux = self.model.createData()  #: regressor and M^-1
        self.pi_joint = np.zeros(10)
        self.p_act = np.zeros(dyn.layout.n_actuator)  #: actuator parameters of the last call
        self.leg_scale = 1.0  #: leg mass scale written into ``model`` (the URDF's at creation)
        #: explicit world anchors (n_contacts, 3) in m, or None = current foot position (kp dropped)
        self.anchors: np.ndarray | None = None
        self.cmodels = dyn._constraint_models(self.model, dyn.contacts, 0.0)
        self.cdatas = pin.StdVec_RigidConstraintData()
        for cm in self.cmodels:
            self.cdatas.append(cm.createData())
        self.settings = pin.ProximalSettings(dyn.accuracy, dyn.mu, dyn.max_iter)
        if dyn.contacts:
            pin.initConstraintDynamics(self.model, self.pdata, self.cmodels, self.cdatas)
        self.pdata_imp = self.model.createData() if dyn.impulse else None
        self.cmodels_imp = dyn._constraint_models(self.model, dyn.impulse, 0.0)
        self.cdatas_imp = pin.StdVec_RigidConstraintData()
        for cm in self.cmodels_imp:
            cm.m_baumgarte_parameters.Kd = 0.0
            self.cdatas_imp.append(cm.createData())
        self.settings_imp = pin.ProximalSettings(dyn.accuracy, dyn.mu, 1)
        if dyn.impulse:
            pin.initConstraintDynamics(self.model, self.pdata_imp, self.cmodels_imp, self.cdatas_imp)
        self.q = np.zeros(nq)  #: configuration of the last call
        #: rolling feet: the contact point of every foot in its foot frame (nf, 3), m, from the last call's input
        self.points = np.zeros((len(dyn.robot.foot_names), 3))
        self.tau = np.zeros(nv)
        self.zero_v = np.zeros(nv)
        self._dv = np.zeros(nv)
        self.vdyn = np.zeros(nv)  #: velocity the phase dynamics starts from (v+ after a reset, else v)
        self.a = np.zeros(nv)  #: acceleration, m/s^2 / rad/s^2
        self.lam = np.zeros(dyn.nc)  #: contact forces on the robot, N, contact frame, stacked per foot
        self.impulse_c = np.zeros(dyn.ni)  #: landing impulses, N s
        self.vnext = np.zeros(nv)
        self.dq = np.zeros(nv)
        self.xnext = np.zeros(nq + nv)
        self.Fx = np.zeros((ndx, ndx))
        npi = dyn.npi
        self.Fp = np.zeros((ndx, npi))
        self.da_dx = np.zeros((nv, ndx))
        self.da_dtau = np.zeros((nv, nv))  #: da/dtau (generalized forces) of the phase, after calc_diff
        #: da/dw (nv, nc) of a constraint-acceleration perturbation J a = -γ + w (contact frame axes), after calc_diff
        self.da_dw = np.zeros((nv, dyn.nc))
        self.da_dpi = np.zeros((nv, npi))
        self.dvdyn_dx = np.zeros((nv, ndx))
        self.dvdyn_dx[:, nv:] = np.eye(nv)
        self.dvdyn_dpi = np.zeros((nv, npi))
        self.dlam_dx = np.zeros((dyn.nc, ndx))
        self.dlam_dpi = np.zeros((dyn.nc, npi))
        self.proj = np.zeros((nv, nv))
        self.y_imp = np.zeros((nv, 10))

    def dv_imp(self, v: np.ndarray) -> np.ndarray:
        """v+ - v (velocity jump of the reset), in a preallocated buffer."""
        np.subtract(self.vdyn, v, out=self._dv)
        return self._dv
