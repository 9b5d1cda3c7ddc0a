"""RLS with log-det regularisation (and the l2 baseline) on the single-rigid-body wrench regressor."""

import tracemalloc

import numpy as np
import pinocchio as pin
import pytest
from scipy.linalg import cho_factor, cho_solve

from mcoe_ros.multibody.body_wrench import body_wrench_regressor
from mcoe_ros.multibody.inertia import (
    is_physically_consistent,
    logdet_divergence,
    logdet_divergence_grad,
    logdet_divergence_hess,
    pi_from_com,
    pseudo_inertia,
    transform_matrix,
)
from mcoe_ros.payload.rls import RlsL2, RlsLogdet

TRUE = pi_from_com(2.0, np.array([0.05, -0.02, 0.1]), np.diag([0.02, 0.03, 0.04]))
PRIOR = pi_from_com(1.0, np.zeros(3), np.diag([0.01, 0.01, 0.01]))
GRAVITY = np.array([0.0, 0.0, -9.81])


def _regressor(rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
    return body_wrench_regressor(
        scale * rng.normal(size=3), 3.0 * scale * rng.normal(size=3), 3.0 * scale * rng.normal(size=3) - GRAVITY
    )


def _dataset(n: int, seed: int, noise: float = 0.01, true: np.ndarray = TRUE, n_bias: int = 0):
    """[(Gamma (6, 10 + n_bias), y (6,))]; the optional extra parameters are force biases (first n_bias rows)."""
    rng = np.random.default_rng(seed)
    bias = np.linspace(0.3, -0.2, n_bias)
    out = []
    for _ in range(n):
        gamma = np.hstack([_regressor(rng), np.eye(6)[:, :n_bias]])
        out.append((gamma, gamma @ np.concatenate([true, bias]) + noise * rng.normal(size=6)))
    return out


def _consistent(theta: np.ndarray) -> bool:
    try:
        np.linalg.cholesky(pseudo_inertia(theta[:10]))
    except np.linalg.LinAlgError:
        return False
    return True


# --------------------------------------------------------------------------------------------------- wrench regressor


def _free_body(pi: np.ndarray) -> tuple[pin.Model, pin.Data]:
    model = pin.Model()
    joint = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "body")
    model.appendBodyToJoint(joint, pin.Inertia.FromDynamicParameters(pi), pin.SE3.Identity())
    return model, model.createData()


@pytest.mark.parametrize("seed", range(5))
def test_wrench_regressor_matches_pinocchio_free_body(seed):
    rng = np.random.default_rng(seed)
    pi = pin.Inertia.Random().toDynamicParameters()
    model, data = _free_body(pi)
    q = pin.randomConfiguration(model, -np.ones(7), np.ones(7))
    v, a = rng.normal(size=6), rng.normal(size=6)  # LOCAL: [linear, angular]
    rot = pin.XYZQUATToSE3(q).rotation
    # classical acceleration of the origin in B minus gravity in B
    acc_minus_g = a[:3] + np.cross(v[3:], v[:3]) - rot.T @ model.gravity.linear
    reg = body_wrench_regressor(v[3:], a[3:], acc_minus_g)
    np.testing.assert_allclose(reg @ pi, pin.rnea(model, data, q, v, a), atol=1e-12)
    # spatial form: I a_spatial + v x* (I v), gravity as a base acceleration
    inertia, vel = pin.Inertia.FromDynamicParameters(pi), pin.Motion(v)
    acc = pin.Motion(np.concatenate([a[:3] - rot.T @ model.gravity.linear, a[3:]]))
    np.testing.assert_allclose(reg @ pi, (inertia * acc + vel.cross(inertia * vel)).vector, atol=1e-12)
    np.testing.assert_allclose(reg, pin.computeJointTorqueRegressor(model, data, q, v, a), atol=1e-13)


def test_wrench_regressor_terms_by_hand():
    """Point mass at c: f = m (a - g) + m dω x c + m ω x (ω x c), n = c x f."""
    mass, com = 1.7, np.array([0.2, -0.1, 0.3])
    pi = pin.Inertia(mass, com, np.zeros((3, 3))).toDynamicParameters()
    omega, domega, acc = np.array([0.3, -1.0, 2.0]), np.array([1.0, 0.5, -0.2]), np.array([0.1, 0.2, 9.9])
    force = mass * (acc + np.cross(domega, com) + np.cross(omega, np.cross(omega, com)))
    wrench = body_wrench_regressor(omega, domega, acc) @ pi
    np.testing.assert_allclose(wrench, np.concatenate([force, np.cross(com, force)]), atol=1e-12)


# ------------------------------------------------------------------------------------------------------------ batch


def _batch_minimiser(data, prior: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """argmin 1/2 sum |y - Gamma theta|^2 + alpha [D(L(pi), L(pi0)) + beta/2 |psi - psi0|^2] (one body)."""
    gammas = np.array([g for g, _ in data])
    ys = np.array([y for _, y in data])

    def fun(theta):
        res = ys - np.einsum("kij,j->ki", gammas, theta)
        div = logdet_divergence(theta[:10], prior[:10])
        return 0.5 * np.sum(res**2) + alpha * (div + 0.5 * beta * np.sum((theta[10:] - prior[10:]) ** 2))

    def jac(theta):
        res = ys - np.einsum("kij,j->ki", gammas, theta)
        grad = -np.einsum("kij,ki->j", gammas, res)
        grad[:10] += alpha * logdet_divergence_grad(theta[:10], prior[:10])
        grad[10:] += alpha * beta * (theta[10:] - prior[10:])
        return grad

    def hess(theta):
        out = np.einsum("kij,kil->jl", gammas, gammas)
        out[:10, :10] += alpha * logdet_divergence_hess(theta[:10])
        out[10:, 10:] += alpha * beta * np.eye(prior.size - 10)
        return out

    theta = prior.copy()  # damped Newton with backtracking on the full objective (stays in the cone: fun = inf outside)
    for _ in range(200):
        grad = jac(theta)
        step = -cho_solve(cho_factor(hess(theta)), grad)
        decrement2 = -grad @ step
        if decrement2 < 1e-26:
            break
        t, f0 = 1.0, fun(theta)
        while fun(theta + t * step) > f0 - 1e-4 * t * decrement2 and t > 1e-12:
            t *= 0.5
        theta = theta + t * step
    assert np.linalg.norm(jac(theta)) < 1e-9 * max(1.0, np.linalg.norm(hess(theta)))
    return theta


@pytest.mark.parametrize(("alpha", "n_bias"), [(1.0, 0), (0.1, 3), (10.0, 0)])
def test_recursive_equals_batch(alpha, n_bias):
    data = _dataset(300, seed=2, noise=0.05, n_bias=n_bias)
    prior = np.concatenate([PRIOR, np.zeros(n_bias)])
    rls = RlsLogdet(prior, alpha=alpha, beta=1e-2)
    for k, (gamma, y) in enumerate(data, start=1):
        rls.update(gamma, y)
        assert rls.iterations <= rls.max_iter
        if k in (1, 10, 300):
            ref = _batch_minimiser(data[:k], prior, alpha, 1e-2)
            assert np.linalg.norm(rls.theta - ref) <= 1e-8 * np.linalg.norm(ref)
    # and the estimate actually moved to the data (the comparison is not prior vs prior)
    assert np.linalg.norm(rls.theta[:10] - TRUE) < 0.1 * np.linalg.norm(PRIOR - TRUE)


@pytest.mark.parametrize(("max_iter", "tol"), [(1, 1e-6), (2, 1e-10)])
def test_drift_free_with_capped_newton(max_iter, tol):
    """Capped Newton per update: the b-form carries no residual, so the error is only the last step's (no drift)."""
    data = _dataset(600, seed=4, noise=0.05)
    rls = RlsLogdet(PRIOR, alpha=1.0, max_iter=max_iter)
    for gamma, y in data:
        rls.update(gamma, y)
        assert rls.iterations <= max_iter
    ref = _batch_minimiser(data, PRIOR, 1.0, 1e-3)
    assert np.linalg.norm(rls.theta - ref) <= tol * np.linalg.norm(ref)
    # one more update with zero data finishes the Newton solve of the same objective exactly
    rls.update(np.zeros((1, 10)), np.zeros(1))
    assert np.linalg.norm(rls.theta - ref) <= 1e-10 * np.linalg.norm(ref)


def test_covariance_is_inverse_batch_hessian():
    data = _dataset(50, seed=6)
    rls = RlsLogdet(PRIOR, alpha=0.5)
    for gamma, y in data:
        rls.update(gamma, y)
    hess = sum(g.T @ g for g, _ in data) + 0.5 * logdet_divergence_hess(rls.theta)
    np.testing.assert_allclose(rls.covariance() @ hess, np.eye(10), atol=1e-8)
    np.testing.assert_allclose(rls.Omega, sum(g.T @ g for g, _ in data), rtol=1e-12, atol=1e-10)


# ------------------------------------------------------------------------------------------------------ consistency


def _stress_data(kind: str, rng: np.random.Generator, k: int):
    gamma = _regressor(rng)
    y = gamma @ TRUE + 0.2 * rng.normal(size=6)
    if kind == "outliers" and k % 17 == 0:
        y = y + rng.choice([-1.0, 1.0]) * 1e3 * rng.random(6)
    if kind == "vertical-only":
        gamma, y = gamma[2:3], y[2:3]
    return gamma, y


@pytest.mark.parametrize("kind", ["noise", "outliers", "vertical-only"])
def test_every_iterate_physically_consistent(kind):
    rng = np.random.default_rng(8)
    rls = RlsLogdet(PRIOR, alpha=0.1)
    for k in range(400):
        theta = rls.update(*_stress_data(kind, rng, k))
        assert _consistent(theta) and is_physically_consistent(theta)
        assert 0 <= rls.iterations <= rls.max_iter


def test_feasibility_safeguard_on_huge_residual():
    """A full Newton step from the prior would leave the cone; the safeguarded update stays inside."""
    gamma = _regressor(np.random.default_rng(1))
    y = -1e4 * gamma @ TRUE
    rls = RlsLogdet(PRIOR, alpha=1e-3)
    hess = gamma.T @ gamma + 1e-3 * logdet_divergence_hess(PRIOR)
    full_step = PRIOR - np.linalg.solve(hess, gamma.T @ (gamma @ PRIOR - y))
    assert not is_physically_consistent(full_step)
    theta = rls.update(gamma, y)
    assert is_physically_consistent(theta)
    assert np.linalg.norm(theta - PRIOR) > 1e-3  # it did move


def test_l2_turns_inconsistent_but_logdet_does_not():
    """True body near the boundary (flat plate, second moment along z ~ 1e-9) and noisy data: the l2 estimate leaves
    the consistent set, the log-det estimate never does (mirrors Table II, I_cons)."""
    rng = np.random.default_rng(12)
    rot = pin.exp3(np.array([0.3, -0.5, 0.2]))
    plate = pi_from_com(1.0, np.array([0.02, 0.0, -0.03]), rot @ np.diag([0.01, 0.02, 0.03]) @ rot.T)
    l2, ld = RlsL2(PRIOR, alpha=1.0), RlsLogdet(PRIOR, alpha=1.0)
    l2_ok, ld_ok = [], []
    for _ in range(300):
        gamma = _regressor(rng)
        y = gamma @ plate + 0.1 * rng.normal(size=6)
        l2_ok.append(is_physically_consistent(l2.update(gamma, y)))
        ld_ok.append(is_physically_consistent(ld.update(gamma, y)))
    assert is_physically_consistent(plate)
    assert not l2_ok[-1] and sum(l2_ok) < len(l2_ok) // 2
    assert all(ld_ok)


# ------------------------------------------------------------------------------------------------------- forgetting


def _jump_errors(mu: float, n: int = 2000, jump: int = 1000) -> np.ndarray:
    rng = np.random.default_rng(0)
    rls = RlsLogdet(PRIOR, alpha=1.0, mu=mu)
    errors = np.empty(n)
    for k in range(n):
        true = TRUE if k < jump else 1.5 * TRUE
        gamma = _regressor(rng)
        rls.update(gamma, gamma @ true + 0.01 * rng.normal(size=6))
        errors[k] = np.linalg.norm(rls.theta - true)
    return errors


def test_forgetting_recovers_from_parameter_jump():
    jump_size = np.linalg.norm(0.5 * TRUE)
    no_forget = _jump_errors(1.0)
    for mu in (0.9, 0.99):
        errors = _jump_errors(mu)
        assert errors[999] < 0.02 * jump_size
        horizon = 1000 + int(round(5.0 / (1.0 - mu)))
        assert errors[horizon] < 0.1 * jump_size, (mu, errors[horizon])
        assert no_forget[horizon] > 0.3 * jump_size  # without forgetting it has not recovered


def test_mu_one_is_exactly_no_forgetting():
    data = _dataset(200, seed=3, noise=0.1)
    plain, mu_one, mu_less = RlsLogdet(PRIOR), RlsLogdet(PRIOR, mu=1.0), RlsLogdet(PRIOR, mu=1.0 - 1e-6)
    for gamma, y in data:
        plain.update(gamma, y)
        mu_one.update(gamma, y)
        mu_less.update(gamma, y)
    np.testing.assert_array_equal(mu_one.theta, plain.theta)
    np.testing.assert_array_equal(mu_one.Omega, plain.Omega)
    assert not np.array_equal(mu_less.Omega, plain.Omega)


@pytest.mark.parametrize("mu", [0.9, 0.99])
def test_omega_symmetric_psd_under_forgetting(mu):
    rng = np.random.default_rng(5)
    rls = RlsLogdet(PRIOR, alpha=1.0, mu=mu)
    for k in range(3000):
        gamma = _regressor(rng, scale=0.01 if (k // 500) % 2 else 1.0)  # alternate rich and poor excitation
        if k % 3 == 0:
            gamma = gamma[2:3]  # rank-1 rows
        rls.update(gamma, gamma @ TRUE + 0.01 * rng.normal(size=gamma.shape[0]))
        if k % 50 == 0 or k == 2999:
            omega = rls.Omega
            np.testing.assert_array_equal(omega, omega.T)
            eig = np.linalg.eigvalsh(omega)
            assert eig[0] >= -1e-9 * max(eig[-1], 1.0), (k, eig[0], eig[-1])
    assert is_physically_consistent(rls.theta)


@pytest.mark.parametrize("mu", [1.0, 0.9])
def test_zero_regressor_leaves_state_unchanged(mu):
    rls = RlsLogdet(PRIOR, alpha=1.0, mu=mu)
    for gamma, y in _dataset(50, seed=9):
        rls.update(gamma, y)
    omega, b, theta = rls.Omega, rls.b, rls.theta
    for _ in range(100):
        rls.update(np.zeros((6, 10)), np.zeros(6))
    np.testing.assert_array_equal(rls.Omega, omega)
    np.testing.assert_array_equal(rls.b, b)
    np.testing.assert_allclose(rls.theta, theta, rtol=1e-12, atol=0)


# ------------------------------------------------------------------------------------------------------- invariance


def test_equivariance_under_change_of_body_frame():
    """pi' = A pi, Gamma' = Gamma A^{-1}, prior' = A prior: log-det RLS estimates transform exactly, l2 ones do not."""
    a_mat = transform_matrix(pin.exp3(np.array([0.4, -1.1, 0.7])), np.array([0.15, -0.3, 0.05]))
    a_inv = np.linalg.inv(a_mat)
    data = _dataset(200, seed=22, noise=0.05)
    ld, ld_t = RlsLogdet(PRIOR, alpha=1.0), RlsLogdet(a_mat @ PRIOR, alpha=1.0)
    l2, l2_t = RlsL2(PRIOR, alpha=1.0), RlsL2(a_mat @ PRIOR, alpha=1.0)
    worst_ld = worst_l2 = 0.0
    for gamma, y in data:
        ld.update(gamma, y)
        ld_t.update(gamma @ a_inv, y)
        l2.update(gamma, y)
        l2_t.update(gamma @ a_inv, y)
        mapped = a_mat @ ld.theta
        worst_ld = max(worst_ld, np.linalg.norm(ld_t.theta - mapped) / np.linalg.norm(mapped))
        mapped = a_mat @ l2.theta
        worst_l2 = max(worst_l2, np.linalg.norm(l2_t.theta - mapped) / np.linalg.norm(mapped))
    assert worst_ld < 1e-12
    assert worst_l2 > 1e-3


# -------------------------------------------------------------------------------------------------- memory and api


def test_memory_independent_of_number_of_updates():
    rng = np.random.default_rng(30)
    rls = RlsLogdet(PRIOR, alpha=1.0, mu=0.99)

    def run(n):
        for _ in range(n):
            gamma = _regressor(rng)
            rls.update(gamma, gamma @ TRUE + 0.01 * rng.normal(size=6))

    run(100)
    state_bytes = sum(v.nbytes for v in vars(rls).values() if isinstance(v, np.ndarray))
    tracemalloc.start()
    run(100)
    after_short, _ = tracemalloc.get_traced_memory()
    run(3000)
    after_long, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert after_long - after_short < 4096  # no per-update growth (a stored 6x10 history would add > 1 MB)
    assert sum(v.nbytes for v in vars(rls).values() if isinstance(v, np.ndarray)) == state_bytes
    assert rls.n_updates == 3200


def test_reset_and_validation():
    rls = RlsLogdet(PRIOR, alpha=1.0)
    for gamma, y in _dataset(20, seed=1):
        rls.update(gamma, y)
    assert np.linalg.norm(rls.theta - PRIOR) > 1e-3
    rls.reset()
    np.testing.assert_array_equal(rls.theta, PRIOR)
    np.testing.assert_array_equal(rls.Omega, np.zeros((10, 10)))
    rls.reset(TRUE)
    np.testing.assert_array_equal(rls.theta, TRUE)
    bad = PRIOR.copy()
    bad[0] = -1.0
    with pytest.raises(ValueError):
        RlsLogdet(bad)
    with pytest.raises(ValueError):
        RlsLogdet(PRIOR, mu=0.0)
    with pytest.raises(ValueError):
        rls.update(np.zeros((6, 9)), np.zeros(6))


def test_weighted_update_equals_scaled_data():
    """W = w^2 I is the same as scaling Gamma and y by w."""
    data = _dataset(30, seed=13)
    a, b = RlsLogdet(PRIOR, alpha=1.0), RlsLogdet(PRIOR, alpha=1.0)
    for gamma, y in data:
        a.update(gamma, y, W=np.full(6, 4.0))
        b.update(2.0 * gamma, 2.0 * y)
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-10)


def test_l2_matches_its_closed_form():
    data = _dataset(40, seed=14, n_bias=2)
    prior = np.concatenate([PRIOR, np.zeros(2)])
    l2 = RlsL2(prior, alpha=2.0, beta=1e-2)
    for gamma, y in data:
        l2.update(gamma, y)
    w_r = 2.0 * np.diag([1.0] * 10 + [1e-2] * 2)
    omega = sum(g.T @ g for g, _ in data)
    ref = np.linalg.solve(omega + w_r, sum(g.T @ y for g, y in data) + w_r @ prior)
    np.testing.assert_allclose(l2.theta, ref, rtol=1e-9)
    np.testing.assert_allclose(l2.Omega, omega, rtol=1e-6, atol=1e-6)
