"""Inertial parametrizations and the log-det divergence: FD Jacobians, round trips, consistency, singularity."""

import numpy as np
import pinocchio as pin
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcoe_ros.multibody.inertia import (
    ExpEigenvalue,
    LogCholesky,
    PlainPi,
    is_physically_consistent,
    logdet_divergence,
    logdet_divergence_grad,
    logdet_divergence_hess,
    make_parametrization,
    pi_about_com,
    pi_from_com,
    pseudo_inertia,
    transform_matrix,
)
from mcoe_ros.ocp import numdiff

MANIFOLDS = ("exp-eigval", "log-cholesky")
FD_TOL = 1e-6
RT_TOL = 1e-9

GO1_TRUNK_INERTIA = np.array(
    [
        [0.0168128557, -0.0002296769, -0.0002945293],
        [-0.0002296769, 0.063009565, -4.18731e-05],
        [-0.0002945293, -4.18731e-05, 0.0716547275],
    ]
)
GO1_TRUNK = pi_from_com(5.204, np.array([0.0223, 0.002, -0.0005]), GO1_TRUNK_INERTIA)


def _body(mass: float, com, second_moments, rotvec) -> np.ndarray:
    """pi of a body from mass, CoM and second moments of mass about the CoM along axes R = Exp(rotvec)."""
    rot = pin.exp3(np.asarray(rotvec, dtype=float))
    lx, ly, lz = second_moments
    inertia_c = rot @ np.diag([ly + lz, lx + lz, lx + ly]) @ rot.T
    return pi_from_com(mass, np.asarray(com, dtype=float), inertia_c)


def _random_bodies(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        _body(np.exp(rng.uniform(-2, 3)), rng.normal(0, 0.3, 3), np.exp(rng.uniform(-6, 0, 3)), rng.normal(0, 1.5, 3))
        for _ in range(n)
    ]


THIN_ROD = _body(0.8, [0.1, -0.02, 0.05], [0.8 * 0.5**2 / 12, 1e-9, 1e-9], [0.3, -0.2, 0.4])
FLAT_PLATE = _body(1.5, [0.0, 0.03, -0.01], [1.5 * 0.3**2 / 12, 1.5 * 0.2**2 / 12, 1e-10], [-0.5, 0.1, 1.0])
BODIES = [GO1_TRUNK, THIN_ROD, FLAT_PLATE, *_random_bodies(20, seed=1)]
BODY_IDS = ["go1_trunk", "thin_rod", "flat_plate"] + [f"random{i}" for i in range(20)]


def _rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


# ---------------------------------------------------------------------------------------------------------- conventions


def test_go1_trunk_matches_pinocchio_dynamic_parameters():
    ref = pin.Inertia(5.204, np.array([0.0223, 0.002, -0.0005]), GO1_TRUNK_INERTIA).toDynamicParameters()
    np.testing.assert_allclose(GO1_TRUNK, ref, rtol=0, atol=1e-14)
    mass, com, inertia_c = pi_about_com(GO1_TRUNK)
    np.testing.assert_allclose(inertia_c, GO1_TRUNK_INERTIA, atol=1e-14)


def test_boundary_bodies_are_near_singular_but_consistent():
    for pi in (THIN_ROD, FLAT_PLATE):
        eig = np.linalg.eigvalsh(pseudo_inertia(pi))
        assert eig[0] > 0 and eig[0] / eig[-1] < 1e-8


def test_log_cholesky_ordering_matches_pinocchio_factor():
    theta = np.array([0.2, -0.3, 0.1, 0.5, 0.7, -0.4, 0.3, 0.05, -0.02, 0.1])
    alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3 = theta
    upper = np.exp(alpha) * np.array(
        [[np.exp(d1), s12, s13, t1], [0, np.exp(d2), s23, t2], [0, 0, np.exp(d3), t3], [0, 0, 0, 1]]
    )
    np.testing.assert_allclose(pseudo_inertia(LogCholesky().pi(theta)), upper @ upper.T, atol=1e-14)


def test_exp_eigval_forward_matches_definition():
    theta = np.array([0.4, 0.1, -0.2, 0.05, 0.3, -0.7, 1.1, -2.0, -1.5, -3.0])
    pi = ExpEigenvalue().pi(theta)
    mass, com, inertia_c = pi_about_com(pi)
    rot = pin.exp3(theta[4:7])
    second = np.exp(theta[7:10])
    assert mass == pytest.approx(np.exp(0.4), rel=1e-15)
    np.testing.assert_allclose(mass * com, theta[1:4], atol=1e-15)
    p_mat = np.ones((3, 3)) - np.eye(3)
    np.testing.assert_allclose(inertia_c, rot @ np.diag(p_mat @ second) @ rot.T, atol=1e-14)


# ------------------------------------------------------------------------------------------------------------ jacobians


def _jacobian_cases():
    rng = np.random.default_rng(7)
    thetas = [rng.normal(0, 1, 10) for _ in range(8)]
    for name in (*MANIFOLDS, "plain"):
        param = make_parametrization(name)
        cases = list(thetas)
        if name != "plain":
            cases += [param.theta(GO1_TRUNK), param.theta(BODIES[5])]
        for i, theta in enumerate(cases):
            yield pytest.param(name, theta, id=f"{name}-{i}")


@pytest.mark.parametrize(("name", "theta"), list(_jacobian_cases()))
def test_jacobian_matches_central_fd(name, theta):
    param = make_parametrization(name)
    jac = param.jacobian(theta)
    assert jac.shape == (10, 10)
    fd = numdiff.jacobian(param.pi, theta, 1e-6)
    assert _rel_err(jac, fd) <= FD_TOL


def test_exp_eigval_jacobian_is_not_the_left_jacobian_variant():
    """The omega block uses the right SO(3) Jacobian; the left one (its transpose) must fail FD (test can fail)."""
    param = ExpEigenvalue()
    theta = np.array([0.1, 0.2, -0.1, 0.3, 0.9, -0.6, 0.4, -1.0, -2.0, -0.5])
    jac = param.jacobian(theta)
    fd = numdiff.jacobian(param.pi, theta, 1e-6)
    jr = pin.Jexp3(theta[4:7])
    wrong = jac.copy()
    wrong[:, 4:7] = jac[:, 4:7] @ np.linalg.solve(jr, jr.T)
    assert _rel_err(wrong, fd) > 1e-2


# ---------------------------------------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("name", MANIFOLDS)
@pytest.mark.parametrize("pi", BODIES, ids=BODY_IDS)
def test_round_trip_pi_theta_pi(name, pi):
    param = make_parametrization(name)
    theta = param.theta(pi)
    assert theta.shape == (10,) and np.all(np.isfinite(theta))
    assert _rel_err(param.pi(theta), pi) <= RT_TOL


def test_exp_eigval_inverse_gives_small_rotation_angle():
    for pi in BODIES:
        omega = ExpEigenvalue().theta(pi)[4:7]
        assert np.linalg.norm(omega) <= 2.0 * np.pi / 3.0 + 1e-9


def test_log_cholesky_theta_round_trip_is_unique():
    rng = np.random.default_rng(3)
    for _ in range(50):
        theta = rng.normal(0, 1, 10)
        np.testing.assert_allclose(LogCholesky().theta(LogCholesky().pi(theta)), theta, rtol=0, atol=1e-10)


# ---------------------------------------------------------------------------------------------- physical consistency


def _fully_consistent(pi: np.ndarray) -> bool:
    """Eq. 7 of the paper checked directly: m > 0, I_c PSD, strict triangle inequalities; and J PD."""
    if not pi[0] > 0:
        return False
    _, _, inertia_c = pi_about_com(pi)
    d = np.linalg.eigvalsh(inertia_c)
    triangle = d[0] < d[1] + d[2] and d[1] < d[0] + d[2] and d[2] < d[0] + d[1]
    try:
        np.linalg.cholesky(pseudo_inertia(pi))
    except np.linalg.LinAlgError:
        return False
    return bool(d[0] >= 0 and triangle)


_theta_strategy = st.lists(st.floats(-3.0, 3.0, allow_nan=False), min_size=10, max_size=10).map(np.array)


@settings(max_examples=1000, deadline=None)
@given(theta=_theta_strategy)
def test_exp_eigval_always_consistent(theta):
    assert _fully_consistent(ExpEigenvalue().pi(theta))


@settings(max_examples=1000, deadline=None)
@given(theta=_theta_strategy)
def test_log_cholesky_always_consistent(theta):
    assert _fully_consistent(LogCholesky().pi(theta))


def test_consistency_checker_rejects_triangle_violation():
    """The property above can fail: a body with D_x > D_y + D_z (but I_c PD) is rejected."""
    bad = pi_from_com(1.0, np.zeros(3), np.diag([3.0, 1.0, 1.0]))
    assert not _fully_consistent(bad)
    assert not is_physically_consistent(bad)


def test_plain_accepts_inconsistent_pi_and_manifolds_raise():
    bad = GO1_TRUNK.copy()
    bad[0] = -1.0
    assert not is_physically_consistent(bad)
    np.testing.assert_array_equal(PlainPi().pi(PlainPi().theta(bad)), bad)
    np.testing.assert_array_equal(PlainPi().jacobian(bad), np.eye(10))
    triangle = pi_from_com(1.0, np.zeros(3), np.diag([3.0, 1.0, 1.0]))
    for name in MANIFOLDS:
        for pi in (bad, triangle):
            with pytest.raises(ValueError):
                make_parametrization(name).theta(pi)


def test_make_parametrization_names():
    assert isinstance(make_parametrization("exp-eigval"), ExpEigenvalue)
    assert isinstance(make_parametrization("log-cholesky"), LogCholesky)
    assert isinstance(make_parametrization("plain"), PlainPi)
    for name in ("exp-eigval", "log-cholesky", "plain"):
        assert make_parametrization(name).name == name
    with pytest.raises(ValueError, match="exp-eigval.*log-cholesky.*plain"):
        make_parametrization("cholesky")


# ---------------------------------------------------------------------------------------------------------- singularity


def _singular_values(second_moments) -> np.ndarray:
    theta = np.array([0.3, 0.1, -0.2, 0.05, 0.4, -0.3, 0.8, *np.log(second_moments)])
    return np.linalg.svd(ExpEigenvalue().jacobian(theta), compute_uv=False)


def test_exp_eigval_singularity_rank():
    """dpi/dtheta: rank 10 generically, 9 with two equal principal moments, 7 with three (isotropic I_c)."""
    generic = _singular_values([0.01, 0.02, 0.05])
    two = _singular_values([0.02, 0.02, 0.05])
    three = _singular_values([0.02, 0.02, 0.02])
    tol = 1e-12 * generic[0]
    assert generic[-1] > 1e-4 * generic[0]
    assert np.sum(two > tol) == 9 and two[8] > 1e-4 * two[0]
    assert np.sum(three > tol) == 7 and three[6] > 1e-4 * three[0]
    # the lost directions are the omega ones: log-Cholesky stays full rank at the same bodies
    for sm in ([0.02, 0.02, 0.05], [0.02, 0.02, 0.02]):
        pi = ExpEigenvalue().pi(np.array([0.3, 0.1, -0.2, 0.05, 0.4, -0.3, 0.8, *np.log(sm)]))
        sv = np.linalg.svd(LogCholesky().jacobian(LogCholesky().theta(pi)), compute_uv=False)
        assert sv[-1] > 1e-6 * sv[0]


def test_exp_eigval_inverse_works_at_singularity():
    pi = _body(2.0, [0.1, 0.0, 0.0], [0.03, 0.03, 0.03], [0.0, 0.0, 0.0])
    assert _rel_err(ExpEigenvalue().pi(ExpEigenvalue().theta(pi)), pi) <= RT_TOL


# ----------------------------------------------------------------------------------------------------------- divergence


def test_divergence_self_is_zero_and_gradient_vanishes():
    for pi in BODIES:
        assert abs(logdet_divergence(pi, pi)) < 1e-9
        grad = logdet_divergence_grad(pi, pi)
        assert np.max(np.abs(grad)) <= 1e-9 * np.max(np.abs(logdet_divergence_grad(pi, 2.0 * pi)))


@pytest.mark.parametrize(("c", "expected"), [(2.0, 1.2274), (0.5, 0.7726), (50.0, 180.35)])
def test_divergence_of_scaled_pseudo_inertia(c, expected):
    value = logdet_divergence(c * GO1_TRUNK, GO1_TRUNK)
    assert value == pytest.approx(4.0 * (c - 1.0 - np.log(c)), rel=1e-10)
    assert value == pytest.approx(expected, abs=1e-2 if c == 50.0 else 1e-4)


def test_divergence_nonnegative_and_infinite_outside_cone():
    bodies = _random_bodies(10, seed=5)
    for a, b in zip(bodies[:-1], bodies[1:], strict=True):
        assert logdet_divergence(a, b) > 0
    bad = GO1_TRUNK.copy()
    bad[0] = -1.0
    assert logdet_divergence(bad, GO1_TRUNK) == np.inf
    with pytest.raises(ValueError):
        logdet_divergence(GO1_TRUNK, bad)
    with pytest.raises(ValueError):
        logdet_divergence_hess(bad)


def test_divergence_congruence_invariance():
    rng = np.random.default_rng(11)
    pi, pi0 = GO1_TRUNK, BODIES[7]
    base = logdet_divergence(pi, pi0)
    a_mat = transform_matrix(pin.exp3(rng.normal(size=3)), rng.normal(0, 0.5, 3))
    assert logdet_divergence(a_mat @ pi, a_mat @ pi0) == pytest.approx(base, rel=1e-11)
    # gradient is covariant: grad' = A^{-T} grad
    np.testing.assert_allclose(
        logdet_divergence_grad(a_mat @ pi, a_mat @ pi0),
        np.linalg.solve(a_mat.T, logdet_divergence_grad(pi, pi0)),
        rtol=1e-8,
        atol=1e-10 * np.max(np.abs(logdet_divergence_grad(pi, pi0))),
    )
    # a non-congruent (plain scaling of the inertia entries only) map does change D
    scaled = np.diag([1.0] * 4 + [3.0] * 6)
    assert abs(logdet_divergence(scaled @ pi, scaled @ pi0) - base) > 1e-3


@pytest.mark.parametrize("index", [0, 3, 4, 5, 6])
def test_divergence_gradient_and_hessian_fd(index):
    pi, pi0 = BODIES[index], BODIES[index + 3]
    grad = logdet_divergence_grad(pi, pi0)
    step = 1e-4 * float(np.linalg.eigvalsh(pseudo_inertia(pi))[0])  # stays well inside the cone
    fd_grad = numdiff.jacobian(lambda x: np.array([logdet_divergence(x, pi0)]), pi, step)[0]
    hess = logdet_divergence_hess(pi)
    fd_hess = numdiff.jacobian(lambda x: logdet_divergence_grad(x, pi0), pi, step)
    assert _rel_err(grad, fd_grad) <= FD_TOL
    assert _rel_err(hess, fd_hess) <= FD_TOL


def test_divergence_hessian_trace_form_and_spd():
    pi = BODIES[4]
    j_inv = np.linalg.inv(pseudo_inertia(pi))
    basis = [pseudo_inertia(e) for e in np.eye(10)]
    trace_form = np.array([[np.trace(j_inv @ em @ j_inv @ en) for en in basis] for em in basis])
    hess = logdet_divergence_hess(pi)
    np.testing.assert_allclose(hess, trace_form, rtol=1e-12, atol=1e-12 * np.max(np.abs(trace_form)))
    assert np.linalg.eigvalsh(hess)[0] > 0
    np.testing.assert_array_equal(hess, hess.T)
