"""Implicit (inverse-dynamics) interval model with an invertible soft point-foot contact (implicit-DDP paper, §V).

Soft contact (one point foot, world frame, REP-103: z up, ground plane z = ``ground_height``). With the foot point's
gap phi = p_z - ground_height (m, > 0 above ground), velocity v_c (m/s) and *classical* acceleration a_c (m/s²), all
world axes, the paper's acceleration-level contact law (eq. 19-21, Baumgarte reference with time constant tau_c in
place of the step h) is

    e = a_c + v_c / tau_c + phi e_z / tau_c²        (m/s², "acceleration error" alpha⁺ - alpha*)
    y = -R⁻¹ e,  R = diag(r_t, r_t, r_n)             (N; compliance R in 1/kg)
    f_n = rho(y_n) = eps softplus(y_n / eps),   f_t = sigma(y_n / eps) y_t,   sigma = rho' (logistic)

f (3,) N is the force *on the robot* in world axes. The paper's cone projection P_mu is replaced by a smooth one:
softplus for f_n >= 0 (smoothing ``eps`` N) and a viscous-like tangential force that vanishes with the normal
activation (no friction cone: slip is left to the noise, issue 14 item 2). With a_c = 0 the law is a spring-damper,
f_n = k(-phi) + d(-v_n), k = 1/(r_n tau_c²) N/m, d = 1/(r_n tau_c) N s/m; as R -> 0 it enforces a_c -> -v_c/tau_c -
phi e_z/tau_c² (rigid contact with Baumgarte stabilisation). Note (as in the paper / MuJoCo) the law is active where
y_n > 0, i.e. it also pulls a foot that is less than tau_c² |a_n| above the ground and accelerates downwards.

The law is invertible in closed form on f_n > 0 (:meth:`SoftContactModel.acceleration`): y_n = eps log(expm1(f_n /
eps)), y_t = f_t / sigma, a_c = -R y - v_c/tau_c - phi e_z/tau_c².

Implicit interval (mirrors the semi-implicit Euler of :mod:`mcoe_ros.multibody.dynamics`): state x = (q, v), next
state x' = (q', v'), a = (v' - v)/dt, torques tau = [0_6, u] (u (nj,) N m), payload parameters pi (10,) in the
payload-frame convention of :mod:`mcoe_ros.multibody.inertia`. The residual r (2 nv,) is

    r_q = (q' ⊖ q) - dt v'                                          (rad or m; zero iff q' = q ⊕ dt v')
    r_v = RNEA(q, v, a; pi) - tau - sum_i J_i(q)ᵀ f_i(q, v, a)      (N, N m; J_i world-aligned foot Jacobian)

Jacobians R0 = dr/dx, R1 = dr/dx' (tangent, (2nv, 2nv)), Rp = dr/dpi (2nv, 10, analytic from the joint-torque
regressor, r is affine in pi), Ru = dr/du (2nv, nj). The contact forces enter RNEA as external forces in the feet's
parent-joint frames (``computeRNEADerivatives`` with fext holds them fixed in those frames; the rotation of the
world force into the frame and the force's own state dependence are added). The explicit-equivalent derivatives of
x' = F(x; pi, u) defined by r(x, F) = 0 follow from the implicit-function theorem: dF/d(x, pi, u) = -R1⁻¹ (R0, Rp,
Ru); :meth:`ImplicitSoftContactModel.solve_next` finds F by Newton's method on the manifold.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pinocchio as pin
from scipy.special import expit

from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.multibody.state import StateMultibody

LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
LOCAL = pin.ReferenceFrame.LOCAL
_EZ = np.array([0.0, 0.0, 1.0])


def _skew(w: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


class SoftContactModel:
    """Invertible soft point contact (see module docstring). Immutable; all quantities world axes, SI units.

    compliance_normal r_n, compliance_tangential r_t (1/kg, > 0), time_constant tau_c (s), smoothing eps (N).
    """

    def __init__(
        self,
        compliance_normal: float = 1e-3,
        compliance_tangential: float = 1e-3,
        time_constant: float = 0.02,
        smoothing: float = 1.0,
        ground_height: float = 0.0,
    ):
        if min(compliance_normal, compliance_tangential, time_constant, smoothing) <= 0.0:
            raise ValueError("soft contact: compliances, time constant and smoothing must be > 0")
        self.r = np.array([compliance_tangential, compliance_tangential, compliance_normal])
        self.tau_c, self.eps, self.ground_height = float(time_constant), float(smoothing), float(ground_height)

    @property
    def stiffness(self) -> float:
        """Normal spring constant at a_c = 0, N/m."""
        return 1.0 / (self.r[2] * self.tau_c**2)

    @property
    def damping(self) -> float:
        """Normal damping at a_c = 0, N s/m."""
        return 1.0 / (self.r[2] * self.tau_c)

    def error(self, p: np.ndarray, v_c: np.ndarray, a_c: np.ndarray) -> np.ndarray:
        """Acceleration error e (3,) m/s² of a foot at world position p (m), velocity v_c, acceleration a_c."""
        phi = p[2] - self.ground_height
        return a_c + v_c / self.tau_c + (phi / self.tau_c**2) * _EZ

    def force_from_error(self, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Force f (3,) N on the robot (world axes) and df/de (3, 3) in N s²/m."""
        y = -e / self.r
        s = expit(y[2] / self.eps)
        f = np.array([s * y[0], s * y[1], self.eps * np.logaddexp(0.0, y[2] / self.eps)])
        df_dy = np.diag([s, s, s])
        ds = s * (1.0 - s) / self.eps
        df_dy[0, 2], df_dy[1, 2] = ds * y[0], ds * y[1]
        return f, df_dy / (-self.r)

    def force(self, p: np.ndarray, v_c: np.ndarray, a_c: np.ndarray) -> np.ndarray:
        """Contact force f (3,) N on the robot, world axes (the paper's closed-form inverse contact model, eq. 21)."""
        return self.force_from_error(self.error(p, v_c, a_c))[0]

    def acceleration(self, p: np.ndarray, v_c: np.ndarray, f: np.ndarray) -> np.ndarray:
        """Exact inverse of :meth:`force` in a_c: the foot acceleration (3,) m/s² under force f (needs f_n > 0)."""
        if f[2] <= 0.0:
            raise ValueError("soft contact inverse needs a positive normal force")
        y_n = f[2] + self.eps * np.log(-np.expm1(-f[2] / self.eps))  # eps log(expm1(f_n/eps)), overflow-free
        s = expit(y_n / self.eps)
        e = -self.r * np.array([f[0] / s, f[1] / s, y_n])
        phi = p[2] - self.ground_height
        return e - v_c / self.tau_c - (phi / self.tau_c**2) * _EZ


class ImplicitSoftContactModel:
    """Implicit dynamics residual r(x, x'; pi, u) of one interval with soft contact at ``feet`` (module docstring).

    Shared and immutable; per-evaluation storage in :class:`ImplicitSoftContactData`. pi: payload block (10,) only.
    """

    def __init__(
        self,
        robot: RobotModel,
        dt: float,
        contact: SoftContactModel | None = None,
        feet: Sequence[str] | None = None,
    ):
        if dt <= 0.0:
            raise ValueError("need dt > 0")
        self.robot, self.dt = robot, float(dt)
        self.contact = contact or SoftContactModel()
        self.feet = tuple(robot.foot_names if feet is None else feet)
        for name in self.feet:
            if name not in robot.foot_names:
                raise ValueError(f"unknown foot '{name}' (robot feet: {robot.foot_names})")
        model = robot.model
        self.foot_ids = [robot.foot_frame_ids[robot.foot_names.index(name)] for name in self.feet]  # contact points
        self.state = StateMultibody(model)
        self.nq, self.nv, self.nj = model.nq, model.nv, robot.nj
        self.ndx, self.npi, self.nu, self.nr = 2 * self.nv, 10, robot.nj, 2 * self.nv
        self.payload_joint = robot.payload_joint
        self.payload_on_universe = robot.payload_joint == 0
        cols = 10 * max(robot.payload_joint - 1, 0)
        self.regressor_cols = slice(cols, cols + 10)
        self.payload_to_joint = robot.payload_to_joint.copy()
        self.nominal_pi = robot.nominal_inertias[robot.payload_joint].toDynamicParameters().copy()

    def create_data(self) -> ImplicitSoftContactData:
        return ImplicitSoftContactData(self)

    def _set_payload(self, data: ImplicitSoftContactData, pi: np.ndarray) -> None:
        if not self.payload_on_universe:
            pi_joint = self.nominal_pi + self.payload_to_joint @ pi[:10]
            data.model.inertias[self.payload_joint] = pin.Inertia.FromDynamicParameters(pi_joint)

    def _forces(self, data: ImplicitSoftContactData, q, v, a, diff: bool) -> None:
        """Feet kinematics, contact forces (world, data.forces (n_feet, 3)) and the joint-frame fext."""
        model, kin = data.model, data.kin
        if diff:
            pin.computeForwardKinematicsDerivatives(model, kin, q, v, a)
        else:
            pin.forwardKinematics(model, kin, q, v, a)
        pin.updateFramePlacements(model, kin)
        for j in range(model.njoints):
            data.fext[j] = pin.Force.Zero()
        for i, fid in enumerate(self.foot_ids):
            frame = model.frames[fid]
            vel = pin.getFrameVelocity(model, kin, fid, LWA)
            acc = pin.getFrameAcceleration(model, kin, fid, LWA)
            a_c = acc.linear + np.cross(vel.angular, vel.linear)
            e = self.contact.error(kin.oMf[fid].translation, vel.linear, a_c)
            f, data.df_de[i] = self.contact.force_from_error(e)
            data.forces[i] = f
            f_loc = kin.oMf[fid].rotation.T @ f
            data.forces_local[i] = f_loc
            data.fext[frame.parentJoint] += frame.placement.act(pin.Force(f_loc, np.zeros(3)))

    def calc(
        self, data: ImplicitSoftContactData, x: np.ndarray, xnext: np.ndarray, u: np.ndarray, pi: np.ndarray
    ) -> None:
        """Fill data.r (2nv,), data.forces, data.a."""
        self._residual(data, x, xnext, u, pi, diff=False)

    def _residual(self, data: ImplicitSoftContactData, x, xnext, u, pi, diff: bool) -> None:
        nq, nv = self.nq, self.nv
        q, v, q1, v1 = x[:nq], x[nq:], xnext[:nq], xnext[nq:]
        self._set_payload(data, pi)
        data.a[:] = (v1 - v) / self.dt
        self._forces(data, q, v, data.a, diff)
        data.r[:nv] = pin.difference(data.model, q, q1) - self.dt * v1
        data.r[nv:] = pin.rnea(data.model, data.pdata, q, v, data.a, data.fext)
        data.r[2 * nv - self.nj :] -= u

    def calc_diff(
        self, data: ImplicitSoftContactData, x: np.ndarray, xnext: np.ndarray, u: np.ndarray, pi: np.ndarray
    ) -> None:
        """Fill data.r and the Jacobians R0, R1, Rp, Ru."""
        model, nq, nv, dt = data.model, self.nq, self.nv, self.dt
        q, v, q1 = x[:nq], x[nq:], xnext[:nq]
        self._residual(data, x, xnext, u, pi, diff=True)
        pd = data.pdata
        pin.computeRNEADerivatives(model, pd, q, v, data.a, data.fext)
        mass = np.triu(pd.M) + np.triu(pd.M, 1).T
        d_q, d_v, d_a = pd.dtau_dq.copy(), pd.dtau_dv.copy(), mass
        kin = data.kin
        for i, fid in enumerate(self.foot_ids):
            # LOCAL derivatives (Pinocchio's LOCAL_WORLD_ALIGNED ones hold the world rotation fixed), rotated to world
            v_dq, a_dq, a_dv, _ = pin.getFrameAccelerationDerivatives(model, kin, fid, LOCAL)
            vel, acc = pin.getFrameVelocity(model, kin, fid, LOCAL), pin.getFrameAcceleration(model, kin, fid, LOCAL)
            jac = pin.getFrameJacobian(model, kin, fid, LOCAL)  # (6, nv) LOCAL
            rot = kin.oMf[fid].rotation
            w_x, v_x = _skew(vel.angular), _skew(vel.linear)
            c_loc = acc.linear + np.cross(vel.angular, vel.linear)  # classical acceleration, foot axes
            tc = self.contact.tau_c
            # e = R c_loc + R v_loc / tc + phi e_z / tc²; d(R y)/dq = R dy/dq - R skew(y) J_ang
            c_q = a_dq[:3] + w_x @ v_dq[:3] - v_x @ v_dq[3:] - _skew(c_loc) @ jac[3:]
            vq = v_dq[:3] - v_x @ jac[3:]
            j_w = rot @ jac[:3]  # world-aligned linear Jacobian = d(position)/dq
            e_q = rot @ (c_q + vq / tc) + np.outer(_EZ, j_w[2]) / tc**2
            e_v = rot @ (a_dv[:3] + w_x @ jac[:3] - v_x @ jac[3:] + jac[:3] / tc)
            jt = j_w.T @ data.df_de[i]  # J_wᵀ df/de (nv, 3)
            # r_v holds -J_locᵀ f_loc with f_loc = Rᵀ f: d f_loc/dq|_f = skew(f_loc) J_ang (rotation of the frame)
            d_q -= jac[:3].T @ _skew(data.forces_local[i]) @ jac[3:] + jt @ e_q
            d_v -= jt @ e_v
            d_a -= jt @ j_w
        j0, j1 = data.jdiff(q, q1)
        data.R0[:] = 0.0
        data.R1[:] = 0.0
        data.R0[:nv, :nv] = j0
        data.R1[:nv, :nv] = j1
        data.R1[:nv, nv:] = -dt * np.eye(nv)
        data.R0[nv:, :nv] = d_q
        data.R0[nv:, nv:] = d_v - d_a / dt
        data.R1[nv:, nv:] = d_a / dt
        data.Rp[:] = 0.0
        if not self.payload_on_universe:
            y = pin.computeJointTorqueRegressor(model, data.aux, q, v, data.a)[:, self.regressor_cols]
            data.Rp[nv:] = y @ self.payload_to_joint
        data.Ru[:] = 0.0
        data.Ru[2 * nv - self.nj :, :] = -np.eye(self.nj)

    def solve_next(
        self,
        data: ImplicitSoftContactData,
        x: np.ndarray,
        u: np.ndarray,
        pi: np.ndarray,
        guess: np.ndarray | None = None,
        tol: float = 1e-10,
        max_iter: int = 30,
    ) -> np.ndarray:
        """x' with r(x, x'; pi, u) = 0 by Newton's method on the manifold with a backtracking line search on |r|²
        (start: ``guess`` or x); fills
        data.Fx (ndx, ndx), data.Fp (ndx, 10), data.Fu (ndx, nj) = -R1⁻¹ (R0, Rp, Ru) at the solution (IFT)."""
        xn = np.array(x if guess is None else guess, dtype=float)
        for _ in range(max_iter):
            self.calc_diff(data, x, xn, u, pi)
            merit = data.r @ data.r
            step = np.linalg.solve(data.R1, -data.r)
            # backtracking on |r|² (the softplus activation can make full Newton steps cycle)
            alpha = 1.0
            while True:
                trial = self.state.integrate(xn, alpha * step)
                self.calc(data, x, trial, u, pi)
                if data.r @ data.r <= (1.0 - 1e-4 * alpha) * merit or alpha < 1e-3:
                    break
                alpha *= 0.5
            xn = trial
            if np.abs(step).max() < tol:
                break
        else:
            raise RuntimeError("implicit soft-contact step did not converge")
        self.calc_diff(data, x, xn, u, pi)
        lu = np.linalg.solve(data.R1, np.hstack([data.R0, data.Rp, data.Ru]))
        data.Fx[:] = -lu[:, : self.ndx]
        data.Fp[:] = -lu[:, self.ndx : self.ndx + self.npi]
        data.Fu[:] = -lu[:, self.ndx + self.npi :]
        return xn


class ImplicitSoftContactData:
    """Workspace: own pin.Model copy (payload from pi), pin.Datas, forces and result buffers.

    r (2nv,), R0/R1 (2nv, 2nv), Rp (2nv, 10), Ru (2nv, nj), a (nv,) m/s² or rad/s², forces (n_feet, 3) N world axes,
    after ``solve_next`` also Fx, Fp, Fu.
    """

    def __init__(self, m: ImplicitSoftContactModel):
        self.model = m.robot.model.copy()
        self.pdata, self.kin, self.aux = (self.model.createData() for _ in range(3))
        self.fext = pin.StdVec_Force()
        for _ in range(self.model.njoints):
            self.fext.append(pin.Force.Zero())
        nf, ndx, nv = len(m.feet), m.ndx, m.nv
        self.forces, self.forces_local = np.zeros((nf, 3)), np.zeros((nf, 3))
        self.df_de = np.zeros((nf, 3, 3))
        self.a = np.zeros(nv)
        self.r = np.zeros(m.nr)
        self.R0, self.R1 = np.zeros((m.nr, ndx)), np.zeros((m.nr, ndx))
        self.Rp, self.Ru = np.zeros((m.nr, m.npi)), np.zeros((m.nr, m.nu))
        self.Fx, self.Fp, self.Fu = np.zeros((ndx, ndx)), np.zeros((ndx, m.npi)), np.zeros((ndx, m.nu))

    def jdiff(self, q0: np.ndarray, q1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """d(q1 ⊖ q0)/dq0, d(q1 ⊖ q0)/dq1 (nv, nv)."""
        return (
            pin.dDifference(self.model, q0, q1, pin.ArgumentPosition.ARG0),
            pin.dDifference(self.model, q0, q1, pin.ArgumentPosition.ARG1),
        )
