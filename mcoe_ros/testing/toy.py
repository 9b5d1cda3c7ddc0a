"""Small interval models and problem builders for the solver tests and benchmarks.

- :class:`EuclidToyInterval`: StateVector(n), f(x; pi | u) = x + dt (A0 x + Phi(x) pi + Bu u) with smooth sinusoidal
  features Phi (n, 10) (constant if ``linear``), and measurements h = [C x, phi(x)ᵀ pi] (pi enters r too).
- :class:`PinocchioInterval`: any Pinocchio model (fixed base or free flyer) with the inertia of one joint's body
  replaced by pi (joint-frame dynamic parameters); semi-implicit Euler v⁺ = v + dt a, q⁺ = q ⊕ dt v⁺ with
  a = ABA(q, v, u; pi), da/dpi = −M⁻¹ Y_j (joint-torque regressor columns of that joint); measurement
  r = (x ⊖ z)[rows] / sigma.
- dense Gauss–Newton KKT and least-squares reference formulations of an EstimationProblem.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pinocchio as pin
from scipy.linalg import block_diag

from mcoe_ros.multibody.inertia import make_parametrization, pi_from_com
from mcoe_ros.multibody.state import StateMultibody
from mcoe_ros.ocp.interval import IntervalData, IntervalModel
from mcoe_ros.ocp.problem import ArrivalPrior, EstimationProblem, StackedParametrization
from mcoe_ros.ocp.state import StateVector


class EuclidToyInterval(IntervalModel):
    def __init__(self, n: int = 4, dt: float = 0.05, seed: int = 0, linear: bool = False, sigma: float = 0.05):
        rng = np.random.default_rng(seed)
        self.state = StateVector(n)
        self.npi, self.nu = 10, 2
        self.nm = n // 2
        self.nz = self.nr = self.nm + 1
        self.dt, self.sigma = dt, sigma
        self.A0 = 0.3 * rng.standard_normal((n, n)) - 0.2 * np.eye(n)
        self.Bu = rng.standard_normal((n, self.nu))
        self.Cm = rng.standard_normal((self.nm, n))
        self.a = 0.3 * rng.standard_normal((n, 10))
        self.b = (0.0 if linear else 1.0) * rng.standard_normal((n, 10, n))
        self.c = rng.uniform(0, np.pi, (n, 10))
        self.dd = (0.0 if linear else 1.0) * rng.standard_normal((10, n))
        self.e = rng.uniform(0, np.pi, 10)

    def _phi(self, x):
        arg = self.b @ x + self.c  # (n, 10)
        return self.a * np.sin(arg), self.a[..., None] * np.cos(arg)[..., None] * self.b

    def calc(self, data: IntervalData, x: np.ndarray, pi: np.ndarray) -> None:
        phi, _ = self._phi(x)
        data.xnext[:] = x + self.dt * (self.A0 @ x + phi @ pi + self.Bu @ data.u)
        feat = 0.1 * np.cos(self.dd @ x + self.e)
        h = np.concatenate([self.Cm @ x, [feat @ pi]])
        data.r[:] = (h - data.z) / self.sigma

    def calc_diff(self, data: IntervalData, x: np.ndarray, pi: np.ndarray) -> None:
        self.calc(data, x, pi)
        phi, dphi = self._phi(x)
        data.Fx[:] = np.eye(self.state.ndx) + self.dt * (self.A0 + np.einsum("ijk,j->ik", dphi, pi))
        data.Fp[:] = self.dt * phi
        arg = self.dd @ x + self.e
        data.Rx[: self.nm] = self.Cm / self.sigma
        data.Rx[self.nm] = (-0.1 * np.sin(arg) * pi) @ self.dd / self.sigma
        data.Rp[: self.nm] = 0.0
        data.Rp[self.nm] = 0.1 * np.cos(arg) / self.sigma


class PinocchioInterval(IntervalModel):
    def __init__(self, model: pin.Model, joint: int, dt: float, rows: np.ndarray, sigma: float | np.ndarray):
        self.model = model
        self.pdata = model.createData()
        self.rdata = model.createData()
        self.state = StateMultibody(model)
        self.joint, self.dt = joint, dt
        self.rows = np.asarray(rows)
        self.sigma = np.broadcast_to(np.asarray(sigma, dtype=float), (len(self.rows),)).copy()
        self.npi, self.nu = 10, model.nv
        self.nz, self.nr = self.state.nx, len(self.rows)
        self.cols = slice(10 * (joint - 1), 10 * joint)

    def _set(self, pi):
        self.model.inertias[self.joint] = pin.Inertia.FromDynamicParameters(np.asarray(pi, dtype=float))

    def calc(self, data: IntervalData, x: np.ndarray, pi: np.ndarray) -> None:
        nq, dt = self.state.nq, self.dt
        self._set(pi)
        q, v = x[:nq], x[nq:]
        a = pin.aba(self.model, self.pdata, q, v, data.u)
        vn = v + dt * a
        data.xnext[:nq] = pin.integrate(self.model, q, dt * vn)
        data.xnext[nq:] = vn
        data.r[:] = self.state.difference(data.z, x)[self.rows] / self.sigma

    def calc_diff(self, data: IntervalData, x: np.ndarray, pi: np.ndarray) -> None:
        nq, nv, dt, m = self.state.nq, self.state.nv, self.dt, self.model
        self.calc(data, x, pi)
        q, v = x[:nq], x[nq:]
        pin.computeABADerivatives(m, self.pdata, q, v, data.u)
        a = self.pdata.ddq.copy()
        minv = np.triu(self.pdata.Minv) + np.triu(self.pdata.Minv, 1).T
        a_q, a_v = self.pdata.ddq_dq.copy(), self.pdata.ddq_dv.copy()
        reg = pin.computeJointTorqueRegressor(m, self.rdata, q, v, a)
        a_p = -minv @ reg[:, self.cols]
        vn = v + dt * a
        j0 = pin.dIntegrate(m, q, dt * vn, pin.ArgumentPosition.ARG0)
        j1 = pin.dIntegrate(m, q, dt * vn, pin.ArgumentPosition.ARG1)
        eye = np.eye(nv)
        data.Fx[:nv, :nv] = j0 + dt * dt * j1 @ a_q
        data.Fx[:nv, nv:] = dt * j1 @ (eye + dt * a_v)
        data.Fx[nv:, :nv] = dt * a_q
        data.Fx[nv:, nv:] = eye + dt * a_v
        data.Fp[:nv] = dt * dt * j1 @ a_p
        data.Fp[nv:] = dt * a_p
        data.Rx[:] = self.state.jdifference(data.z, x)[1][self.rows] / self.sigma[:, None]
        data.Rp[:] = 0.0


def arm_model() -> tuple[pin.Model, int, np.ndarray]:
    """Two-link arm (revolute Y then revolute X) whose second body is the estimated payload.

    Returns (model, payload joint id, true pi (10,))."""
    model = pin.Model()
    j1 = model.addJoint(0, pin.JointModelRY(), pin.SE3.Identity(), "j1")
    model.appendBodyToJoint(
        j1, pin.Inertia(1.0, np.array([0.0, 0.0, -0.25]), np.diag([0.02, 0.02, 0.002])), pin.SE3.Identity()
    )
    j2 = model.addJoint(j1, pin.JointModelRX(), pin.SE3(np.eye(3), np.array([0.0, 0.0, -0.5])), "j2")
    rot = pin.exp3(np.array([0.3, -0.2, 0.5]))
    pi_true = pi_from_com(1.5, np.array([0.05, 0.02, -0.3]), rot @ np.diag([0.03, 0.02, 0.012]) @ rot.T)
    model.appendBodyToJoint(j2, pin.Inertia.FromDynamicParameters(pi_true), pin.SE3.Identity())
    return model, j2, pi_true


def freebody_model() -> tuple[pin.Model, int, np.ndarray]:
    """A single free-flying rigid body (quaternion configuration): its inertia is the payload."""
    model = pin.Model()
    j = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "root")
    rot = pin.exp3(np.array([0.1, 0.4, -0.3]))
    pi_true = pi_from_com(2.0, np.array([0.02, -0.01, 0.03]), rot @ np.diag([0.05, 0.04, 0.03]) @ rot.T)
    model.appendBodyToJoint(j, pin.Inertia.FromDynamicParameters(pi_true), pin.SE3.Identity())
    return model, j, pi_true


def simulate(model: IntervalModel, x0: np.ndarray, pi: np.ndarray, us: list[np.ndarray], N: int) -> list[np.ndarray]:  # noqa: N803
    """Noise-free trajectory x_0..x_N of the model's dynamics."""
    data = model.create_data()
    xs = [np.array(x0, dtype=float)]
    for k in range(N):
        data.u[:] = us[k]
        data.z[:] = 0.0
        model.calc(data, xs[-1], pi)
        xs.append(data.xnext.copy())
    return xs


def measurement_of(model: IntervalModel, x: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """z with zero residual at (x, pi): the prediction h (EuclidToyInterval) or the state itself (PinocchioInterval)."""
    if isinstance(model, PinocchioInterval):
        return np.array(x, dtype=float)
    data = model.create_data()
    data.z[:] = 0.0
    model.calc(data, x, pi)
    return data.r * model.sigma


def build_problem(
    model: IntervalModel,
    N: int,  # noqa: N803
    pi_true: np.ndarray,
    param: str | object,  # a parametrization or its name (mcoe_ros.multibody.inertia.make_parametrization)
    us: list[np.ndarray],
    x0: np.ndarray,
    noise: float = 0.0,
    info_x0: float = 1e2,
    info_w: float = 1e3,
    info_theta: float | None = 1.0,
    theta_bar: np.ndarray | None = None,
    seed: int = 1,
    noise_dims: list[int] | None = None,
) -> tuple[EstimationProblem, list[np.ndarray]]:
    """Problem over N intervals with measurements of the true trajectory (+ Gaussian noise of std ``noise``).

    Returns (problem, true xs)."""
    rng = np.random.default_rng(seed)
    xs_true = simulate(model, x0, pi_true, us, N)
    stacked = StackedParametrization([make_parametrization(param) if isinstance(param, str) else param])
    theta_bar = stacked.theta(pi_true) if theta_bar is None else theta_bar
    prior = ArrivalPrior.independent(x0, info_x0, model.state.ndx, theta_bar, info_theta)
    prob = EstimationProblem([model] * N, model, prior, stacked, info_w, noise_dims)
    for k in range(N + 1):
        z = measurement_of(model, xs_true[k], pi_true)
        if isinstance(model, PinocchioInterval):
            dz = np.zeros(model.state.ndx)
            dz[model.rows] = noise * rng.standard_normal(len(model.rows))
            z = model.state.integrate(z, dz)
        else:
            z = z + noise * rng.standard_normal(z.shape)
        prob.set_knot(k, u=us[k] if k < N else np.zeros(model.nu), z=z)
    return prob, xs_true


# ---------------------------------------------------------------------- reference formulations
def dense_kkt_step(prob: EstimationProblem, xs, ws, theta) -> tuple[list, list, np.ndarray, np.ndarray]:
    """Gauss–Newton step of the linearised problem from one dense KKT solve, built from the model Jacobians and the
    manifold Jacobians only (independent of the Riccati code).

    Variables d = (δx_0..δx_N, δw_0..δw_{N-1}, δθ); constraints c_k + Jd0 δx_{k+1} + Jd1 Jint0 (Fx δx_k +
    Fp dpi δθ) + Jd1 Jint1 G δw_k = 0 (G = problem.noise_map); a noise-coupled model's residual is r + Rw G w_k.
    Returns (dxs, dws, dθ, (KKT matrix, rhs))."""
    st = prob.state
    n, ndx, nth = prob.N, prob.ndx, prob.ntheta
    pi = prob.param.pi(theta)
    dpi = prob.param.jacobian(theta)
    nw, gmap = prob.nw, prob.noise_map
    nv = (n + 1) * ndx + n * nw + nth
    ix = lambda k: slice(k * ndx, (k + 1) * ndx)  # noqa: E731
    iw = lambda k: slice((n + 1) * ndx + k * nw, (n + 1) * ndx + (k + 1) * nw)  # noqa: E731
    ith = slice(nv - nth, nv)
    hess = np.zeros((nv, nv))
    grad = np.zeros(nv)
    cons = np.zeros((n * ndx, nv))
    cval = np.zeros(n * ndx)
    # prior
    e = np.concatenate([st.difference(prob.prior.x_bar, xs[0]), theta - prob.prior.theta_bar])
    jac = block_diag(st.jdifference(prob.prior.x_bar, xs[0])[1], np.eye(nth))
    idx = np.r_[np.arange(ndx), np.arange(nv - nth, nv)]
    hess[np.ix_(idx, idx)] += jac.T @ prob.prior.hessian @ jac
    grad[idx] += jac.T @ (prob.prior.gradient + prob.prior.hessian @ e)
    for k, nd in enumerate(prob.knots):
        d = nd.model.create_data()
        d.u[:], d.z[:] = nd.data.u, nd.data.z
        nd.model.calc_diff(d, xs[k], pi)
        jr = np.zeros((nd.model.nr, nv))
        jr[:, ix(k)] = d.Rx
        jr[:, ith] = d.Rp @ dpi
        r = d.r
        if nd.model.noise_coupled and k < n:  # residual r + Rw G w (ocp.interval)
            jr[:, iw(k)] = d.Rw @ gmap
            r = r + d.Rw @ gmap @ ws[k]
        hess += jr.T @ jr
        grad += jr.T @ r
        if k == n:
            break
        hess[iw(k), iw(k)] += nd.W
        grad[iw(k)] += nd.W @ ws[k]
        y = st.integrate(d.xnext, gmap @ ws[k])
        ji0, ji1 = st.jintegrate(d.xnext, gmap @ ws[k])
        jd0, jd1 = st.jdifference(xs[k + 1], y)
        rows = slice(k * ndx, (k + 1) * ndx)
        cval[rows] = st.difference(xs[k + 1], y)
        cons[rows, ix(k + 1)] = jd0
        cons[rows, ix(k)] = jd1 @ ji0 @ d.Fx
        cons[rows, iw(k)] = jd1 @ ji1 @ gmap
        cons[rows, ith] = jd1 @ ji0 @ d.Fp @ dpi
    kkt = np.block([[hess, cons.T], [cons, np.zeros((n * ndx, n * ndx))]])
    rhs = -np.concatenate([grad, cval])
    try:
        sol = np.linalg.solve(kkt, rhs)
    except np.linalg.LinAlgError:  # singular (e.g. parametrization nullspace): a least-squares solution
        sol = np.linalg.lstsq(kkt, rhs, rcond=None)[0]
    dxs = [sol[ix(k)] for k in range(n + 1)]
    dws = [sol[iw(k)] for k in range(n)]
    return dxs, dws, sol[ith], (kkt, rhs)


def assert_matches_dense_kkt(solver, step, kkt: np.ndarray, rhs: np.ndarray, knots: Sequence[int]) -> None:
    """The solver's direction (after ``compute_direction``; ``step`` its arrival step) equals the dense KKT solution,
    and its covariances of (x_k, θ) for ``knots`` equal the matching blocks of the inverse dense Hessian (a Schur
    complement of the KKT). Single-parameter problems (θ = the last variable)."""
    prob = solver.problem
    n, ndx, nw = prob.N, prob.ndx, prob.nw
    nvar = (n + 1) * ndx + n * nw + prob.ntheta
    ref = np.linalg.solve(kkt, rhs)[:nvar]
    sol = np.concatenate([solver.dx.reshape(-1), solver.dw.reshape(-1), step.dtheta])
    assert np.abs(sol - ref).max() <= 1e-8 * np.abs(ref).max()
    cov_dense = np.linalg.inv(kkt)[:nvar, :nvar]
    for k in knots:
        cov = solver.covariance(k)
        idx = np.r_[np.arange(k * ndx, (k + 1) * ndx), nvar - 1]
        ref_cov = cov_dense[np.ix_(idx, idx)]
        assert np.abs(cov - ref_cov).max() <= 1e-6 * np.abs(ref_cov).max(), k


def lsq_residuals(prob: EstimationProblem, xref: list[np.ndarray]):
    """Residual function res(z) of the same problem with w eliminated, z = (d_0..d_N, θ), x_k = xref_k ⊕ d_k and
    w_k = x_{k+1} ⊖ f_k(x_k), so that ½‖res‖² is the problem's cost at a feasible point (prior with g = 0 only).

    Returns (fun, n_variables, jac_sparsity)."""
    st = prob.state
    n, ndx, nth = prob.N, prob.ndx, prob.ntheta
    if np.any(prob.prior.gradient):
        raise ValueError("least-squares form needs a prior without linear term")
    hp = prob.prior.hessian
    evals, evecs = np.linalg.eigh(hp)
    keep = evals > 1e-14 * max(evals.max(), 1e-300)
    lp = (evecs[:, keep] * np.sqrt(evals[keep])).T  # lpᵀ lp = H
    datas = [nd.model.create_data() for nd in prob.knots]
    for d, nd in zip(datas, prob.knots, strict=True):
        d.u[:], d.z[:] = nd.data.u, nd.data.z
    nvar = (n + 1) * ndx + nth

    def fun(zv):
        theta = zv[nvar - nth :]
        pi = prob.param.pi(theta)
        xs = [st.integrate(xref[k], zv[k * ndx : (k + 1) * ndx]) for k in range(n + 1)]
        out = [lp @ np.concatenate([st.difference(prob.prior.x_bar, xs[0]), theta - prob.prior.theta_bar])]
        for k, nd in enumerate(prob.knots):
            nd.model.calc(datas[k], xs[k], pi)
            out.append(datas[k].r.copy())
            if k < n:
                out.append(nd.W_sqrt @ st.difference(datas[k].xnext, xs[k + 1]))
        return np.concatenate(out)

    # sparsity
    nrow = lp.shape[0]
    pat = [np.zeros((nrow, nvar), dtype=bool)]
    pat[0][:, :ndx] = True
    pat[0][:, nvar - nth :] = True
    for k, nd in enumerate(prob.knots):
        b = np.zeros((nd.model.nr, nvar), dtype=bool)
        b[:, k * ndx : (k + 1) * ndx] = True
        b[:, nvar - nth :] = True
        pat.append(b)
        if k < n:
            b = np.zeros((ndx, nvar), dtype=bool)
            b[:, k * ndx : (k + 2) * ndx] = True
            b[:, nvar - nth :] = True
            pat.append(b)
    return fun, nvar, np.vstack(pat)
