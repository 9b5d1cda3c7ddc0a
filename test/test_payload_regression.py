"""Go1 payload regression (base rows of the dynamics), sensor-to-state conversion, OLS and RLS-logdet on its stream.

Exact synthetic data: the Go1 with a known payload, random states, accelerations and contact forces from the
constrained dynamics (KKT system of the rigid stance contacts, solved with numpy).
"""

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.multibody.body_wrench import body_wrench_regressor
from mcoe_ros.multibody.imu import GRAVITY, imu_mount, states_from_imu
from mcoe_ros.multibody.inertia import is_physically_consistent, pi_from_com
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.payload.batch import fit_ols, run_rls
from mcoe_ros.payload.regression import (
    PayloadRegressor,
    SensorSeries,
    sg_filter,
    sg_window_samples,
    states_from_sensors,
    steady_contact_mask,
)

PI_TRUE = pi_from_com(
    7.2, np.array([0.02, -0.01, 0.05]), np.array([[0.06, 0.002, 0.001], [0.002, 0.09, 0.0], [0.001, 0.0, 0.11]])
)
STANCES = ([0, 1, 2, 3], [0, 3], [1, 2], [1, 2, 3], [0, 1, 3])


@pytest.fixture(scope="module")
def truth():
    robot = RobotModel()
    robot.set_payload(PI_TRUE)
    return robot


@pytest.fixture(scope="module")
def regressor():
    return PayloadRegressor(RobotModel())


def _constrained_sample(robot, rng, feet):
    """(q, v, a, tau_joints, forces (len(feet), 3) world axes) of the payload-carrying robot with feet held fixed."""
    model, data = robot.model, robot.create_data()
    q = pin.neutral(model)
    q[:3] = rng.normal(size=3)
    q[3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(rng.normal(scale=0.3, size=3))).coeffs()
    q[7:] = np.tile([0.0, 0.8, -1.6], 4) + rng.normal(scale=0.2, size=12)
    v = rng.normal(size=model.nv)
    tau = rng.normal(scale=5.0, size=12)
    mass = pin.crba(model, data, q)
    mass = np.triu(mass) + np.triu(mass, 1).T
    bias = pin.nle(model, data, q, v)
    pin.forwardKinematics(model, data, q, v, np.zeros(model.nv))
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    fids = [robot.foot_frame_ids[i] for i in feet]
    jac = np.vstack([pin.getFrameJacobian(model, data, f, pin.LOCAL_WORLD_ALIGNED)[:3] for f in fids])
    drift = np.concatenate(
        [pin.getFrameClassicalAcceleration(model, data, f, pin.LOCAL_WORLD_ALIGNED).linear for f in fids]
    )
    nc = jac.shape[0]
    kkt = np.block([[mass, -jac.T], [jac, np.zeros((nc, nc))]])
    sol = np.linalg.solve(kkt, np.concatenate([np.r_[np.zeros(6), tau] - bias, -drift]))
    return q, v, sol[: model.nv], tau, sol[model.nv :].reshape(-1, 3)


def _flags(feet):
    flags = np.zeros(4, dtype=bool)
    flags[feet] = True
    return flags


def _stream(truth, regressor, n, seed=0):
    rng = np.random.default_rng(seed)
    gammas, ys = np.empty((n, 6, 10)), np.empty((n, 6))
    for k in range(n):
        feet = STANCES[k % len(STANCES)]
        q, v, a, tau, _ = _constrained_sample(truth, rng, feet)
        gammas[k], ys[k] = regressor.regress(q, v, a, tau, _flags(feet))
    return gammas, ys


def test_regression_is_exact_and_forces_match(truth, regressor):
    rng = np.random.default_rng(1)
    for feet in STANCES:
        q, v, a, tau, forces = _constrained_sample(truth, rng, feet)
        gamma, y = regressor.regress(q, v, a, tau, _flags(feet))
        assert np.abs(y).max() > 1.0  # the payload wrench is not trivially zero
        np.testing.assert_allclose(gamma @ PI_TRUE, y, rtol=0, atol=1e-8)
        est = regressor.contact_forces(q, v, a, tau)
        np.testing.assert_allclose(est[feet], forces, rtol=0, atol=1e-8)
        # a wrong payload does not fit
        assert np.abs(gamma @ (1.1 * PI_TRUE) - y).max() > 1.0


def test_payload_columns_equal_the_single_body_regressor(truth, regressor):
    q, v, a, tau, _ = _constrained_sample(truth, np.random.default_rng(2), [0, 1, 2, 3])
    gamma, _ = regressor.regress(q, v, a, tau, np.ones(4, dtype=bool))
    rot = pin.Quaternion(q[3:7]).toRotationMatrix()
    acc_classical = a[:3] + np.cross(v[3:6], v[:3])
    expected = body_wrench_regressor(v[3:6], a[3:6], acc_classical - rot.T @ GRAVITY)
    np.testing.assert_allclose(gamma, expected, atol=1e-10)


def test_base_linear_velocity_is_not_needed_with_the_classical_acceleration(truth, regressor):
    q, v, a, tau, _ = _constrained_sample(truth, np.random.default_rng(3), [0, 2, 3])
    flags = _flags([0, 2, 3])
    gamma, y = regressor.regress(q, v, a, tau, flags)
    v0, a0 = v.copy(), a.copy()
    v0[:3] = 0.0
    a0[:3] = a[:3] + np.cross(v[3:6], v[:3])  # classical acceleration of the trunk origin
    gamma0, y0 = regressor.regress(q, v0, a0, tau, flags)
    np.testing.assert_allclose(gamma0, gamma, atol=1e-9)
    np.testing.assert_allclose(y0, y, atol=1e-9)
    # keeping the spatial acceleration while dropping the velocity is wrong
    gamma_bad, _ = regressor.regress(q, v0, a, tau, flags)
    assert np.abs(gamma_bad - gamma).max() > 1e-3


def test_states_from_imu_reproduce_the_regression(truth, regressor):
    rng = np.random.default_rng(4)
    rot_bi, _ = imu_mount(truth)
    model, data = truth.model, truth.create_data()
    feet = [0, 1, 3]
    q, v, a, tau, _ = _constrained_sample(truth, rng, feet)
    pin.forwardKinematics(model, data, q, v, a)
    pin.updateFramePlacements(model, data)
    rot_wi = data.oMf[truth.imu_frame_id].rotation
    quat = pin.Quaternion(rot_wi)
    acc_imu = pin.getFrameClassicalAcceleration(model, data, truth.imu_frame_id, pin.LOCAL).linear
    specific_force = acc_imu - rot_wi.T @ GRAVITY
    gyro, domega = rot_bi.T @ v[3:6], rot_bi.T @ a[3:6]
    qs, vs, as_ = states_from_imu(
        truth,
        q[None, 7:],
        v[None, 6:],
        a[None, 6:],
        [[quat.w, quat.x, quat.y, quat.z]],
        gyro[None],
        domega[None],
        specific_force[None],
    )
    gamma, y = regressor.regress(q, v, a, tau, _flags(feet))
    gamma_s, y_s = regressor.regress(qs[0], vs[0], as_[0], tau, _flags(feet))
    np.testing.assert_allclose(gamma_s, gamma, atol=1e-9)
    np.testing.assert_allclose(y_s, y, atol=1e-8)
    np.testing.assert_allclose(gamma_s @ PI_TRUE, y_s, atol=1e-8)


def test_ols_recovers_the_payload_from_exact_data(truth, regressor):
    gammas, ys = _stream(truth, regressor, 40)
    est = fit_ols(gammas, ys)
    np.testing.assert_allclose(est.pi, PI_TRUE, rtol=1e-6, atol=1e-6 * np.abs(PI_TRUE).max())
    assert est.consistent
    mass_err, com_err = est.errors(PI_TRUE)
    assert mass_err < 1e-6 and com_err < 1e-6


def test_rls_logdet_converges_and_stays_consistent(truth, regressor):
    gammas, ys = _stream(truth, regressor, 150, seed=5)
    est, history = run_rls(gammas, ys)
    assert abs(est.mass - 7.2) < 0.01 * 7.2
    assert all(is_physically_consistent(pi) for pi in history)
    mass_err, com_err = est.errors(PI_TRUE)
    assert mass_err < 1.0 and com_err < 5.0


def test_sg_window_and_derivative_of_a_smooth_signal():
    assert sg_window_samples(0.01, 0.002, 2) == 5
    assert sg_window_samples(0.1, 0.002, 3) == 51
    assert sg_window_samples(0.001, 0.002, 3) == 5  # at least polyorder + 2, odd
    dt = 0.002
    t = np.arange(0.0, 2.0, dt)
    x = np.stack([np.sin(2 * np.pi * 1.5 * t), 0.3 * t**2], axis=1)
    dx = np.stack([2 * np.pi * 1.5 * np.cos(2 * np.pi * 1.5 * t), 0.6 * t], axis=1)
    for window, tol in ((0.01, 1e-4), (0.1, 5e-3)):
        smooth, deriv = sg_filter(x, dt, window, polyorder=3)
        assert np.abs(smooth - x).max() < tol
        assert np.abs(deriv - dx).max() < tol * 2 * np.pi * 1.5
    # the filter does reduce noise on the derivative relative to finite differences
    noisy = x[:, 0] + 1e-3 * np.random.default_rng(0).normal(size=t.size)
    fd_err = np.abs(np.gradient(noisy, dt) - dx[:, 0]).std()
    sg_err = np.abs(sg_filter(noisy, dt, 0.1, 3)[1] - dx[:, 0]).std()
    assert sg_err < 0.1 * fd_err


def test_states_from_sensors_on_a_smooth_motion(truth):
    """Trunk origin fixed, trunk spinning about world z at 1 rad/s, joints sinusoidal; quaternion signs flipped."""
    rot_bi, r_imu = imu_mount(truth)
    dt, rate = 0.002, 1.0
    t = np.arange(0.0, 1.0, dt)
    n = t.size
    omega_b = np.array([0.0, 0.0, rate])
    quat = np.empty((n, 4))
    for k in range(n):
        rot_wi = pin.rpy.rpyToMatrix(0.0, 0.0, rate * t[k]) @ rot_bi
        qk = pin.Quaternion(rot_wi)
        quat[k] = (-1.0) ** k * np.array([qk.w, qk.x, qk.y, qk.z])
    acc_b = np.cross(omega_b, np.cross(omega_b, r_imu))  # centripetal acceleration of the IMU point, trunk axes
    specific = np.array([rot_bi.T @ (acc_b - pin.rpy.rpyToMatrix(0.0, 0.0, rate * tk).T @ GRAVITY) for tk in t])
    qj = 0.3 * np.sin(2 * np.pi * t)[:, None] * np.ones(12)
    dqj = 0.3 * 2 * np.pi * np.cos(2 * np.pi * t)[:, None] * np.ones(12)
    series = SensorSeries(
        t, qj, dqj, np.zeros((n, 12)), quat, np.tile(rot_bi.T @ omega_b, (n, 1)), specific, np.ones((n, 4), dtype=bool)
    )
    q, v, a, _ = states_from_sensors(truth, series, window=0.05, polyorder=3)
    inner = slice(20, n - 20)
    np.testing.assert_allclose(a[inner, :6], 0.0, atol=1e-9)  # lever arm removed, no angular acceleration
    ddq_true = -0.3 * (2 * np.pi) ** 2 * np.sin(2 * np.pi * t)
    assert np.abs(a[inner, 6:] - ddq_true[inner, None]).max() < 1e-2 * 0.3 * (2 * np.pi) ** 2
    np.testing.assert_allclose(v[:, 3:6], np.tile(omega_b, (n, 1)), atol=1e-12)
    yaw = np.array([pin.rpy.matrixToRpy(pin.Quaternion(qk[3:7]).toRotationMatrix())[2] for qk in q[inner]])
    np.testing.assert_allclose(np.unwrap(yaw), rate * t[inner], atol=1e-6)


def test_steady_contact_mask():
    contacts = np.ones((12, 2), dtype=bool)
    contacts[6:, 1] = False  # lift-off between samples 5 and 6
    np.testing.assert_array_equal(np.flatnonzero(~steady_contact_mask(contacts, 0)), [5, 6])
    np.testing.assert_array_equal(np.flatnonzero(~steady_contact_mask(contacts, 2)), [3, 4, 5, 6, 7, 8])
    assert steady_contact_mask(np.ones((5, 4), dtype=bool), 3).all()
