"""The stance-foot height (flat-ground) pseudo-measurement: its Jacobian and its arrival-prior term against finite
differences, and the same update in the leg-kinematics EKF baseline (issue 14, item 4; docs/localisation.md)."""

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.estimation.config import EstimatorConfig, NoiseConfig
from mcoe_ros.estimation.estimator import Estimator
from mcoe_ros.estimation.leg_odometry import LegKinematicsEkf
from mcoe_ros.multibody.state import StateMultibody
from mcoe_ros.ocp import numdiff
from mcoe_ros.ocp.problem import ArrivalPrior


def _state(robot, seed=0):
    """A trotting-like Go1 state: tilted, displaced base, bent legs, random velocities (x = (q, v))."""
    rng = np.random.default_rng(seed)
    q = robot.neutral()
    q[:3] = (0.1, -0.05, 0.3)
    q[3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(0.08, -0.12, 0.7)).coeffs()
    q[7:] = np.tile([0.05, 0.8, -1.6], 4) + 0.2 * rng.standard_normal(12)
    return np.r_[q, rng.standard_normal(robot.nv)]


@pytest.fixture(scope="module")
def estimator():
    return Estimator(EstimatorConfig(noise=NoiseConfig(foot_height=0.01, height_random_walk=0.05)))


def _prior(state, x, ntheta=4, seed=2):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((state.ndx + ntheta, state.ndx + ntheta))
    prior = ArrivalPrior(
        x, np.zeros(ntheta), a @ a.T + np.eye(state.ndx + ntheta), rng.standard_normal(state.ndx + ntheta)
    )
    return prior


def test_ground_height_term_is_the_linearised_base_height_measurement(estimator):
    """New prior − old prior (no random walk) = ½|r(x̄ ⊕ e)|² exactly (r is linear in e): gradient and Hessian
    against finite differences through the state manifold, r(e) = (p_z(x̄ ⊕ e) + k − h_g)/σ."""
    builder, robot = estimator.builder, estimator.robot
    state = StateMultibody(robot.model)
    x = _state(robot, seed=1)
    old = _prior(state, x)
    contacts = (True, True, False, True)
    new = builder.with_ground_height(old, contacts, 0.0)
    std, h = builder.foot_height_std, builder.ground_height
    k = builder.stance_height_offset(x[: robot.nq], contacts)
    # k: the stance feet's mean height relative to the base, by forward kinematics at x
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, x[: robot.nq])
    feet = [f for f, c in zip(robot.foot_frame_ids, contacts, strict=True) if c]
    assert k == pytest.approx(np.mean([data.oMf[f].translation[2] for f in feet]) - x[2], abs=1e-12)

    def residual(y):
        return np.array([(y[2] + k - h) / std])

    jac = numdiff.jacobian(residual, x, state=state)
    ndx = state.ndx
    assert numdiff.relative_error(new.gradient[:ndx] - old.gradient[:ndx], jac[0] * residual(x)[0]) < 1e-7
    assert np.allclose(new.gradient[ndx:], old.gradient[ndx:])
    dh = new.hessian - old.hessian
    assert numdiff.relative_error(dh[:ndx, :ndx], jac.T @ jac) < 1e-7
    assert np.allclose(dh[ndx:], 0.0) and np.allclose(dh[:, ndx:], 0.0)
    # only the base height: moving the base horizontally or turning it costs nothing new
    assert np.allclose(jac[0, 3:], 0.0)
    # off (std 0): the prior unchanged; no stance foot and no time: unchanged values
    off = Estimator(EstimatorConfig(noise=NoiseConfig(foot_height=0.0))).builder
    assert off.with_ground_height(old, contacts, 1.0) is old
    same = builder.with_ground_height(old, (False,) * 4, 0.0)
    assert np.array_equal(same.hessian, old.hessian) and np.array_equal(same.gradient, old.gradient)


def test_a_window_that_starts_at_the_detector_start_has_its_ground_term():
    """The contact detector's (re)start knot carries its initial no-contact flags; the ground-height term of a run
    that begins there takes the next knot's stance feet (as its first interval does), so the first solve's arrival
    prior has the base height (before: no ground term at all on the first window)."""
    from mcoe_ros.estimation.builder import ProblemBuilder
    from mcoe_ros.estimation.samples import ImuSample, JointSample
    from mcoe_ros.estimation.window import GridKnot

    est = Estimator(EstimatorConfig(noise=NoiseConfig(foot_height=0.01)))
    q = np.tile([0.0, 0.8, -1.6], 4)
    joint = JointSample(0.0, q, np.zeros(12), np.zeros(12))
    imu = ImuSample(0.0, np.array([1.0, 0, 0, 0]), np.zeros(3), np.array([0, 0, 9.81]))
    down = (True,) * 4

    def knot(t, contacts, start=False):
        return GridKnot(t, joint, imu, contacts, np.zeros((4, 3)), contacts, contacts, start)

    started = [knot(0.0, (False,) * 4, start=True), *(knot(0.002 * i, down) for i in range(1, 6))]
    plain = [knot(0.0, down), *started[1:]]
    assert ProblemBuilder.arrival_stance(started) == down
    assert ProblemBuilder.arrival_stance([knot(0.0, (False, True, True, True)), *started[1:]]) == (
        False,
        True,
        True,
        True,
    )
    theta, info = est.theta, est.theta_info
    a = est.builder.fresh_parts(started, np.zeros(3), theta, info)[3]
    b = est.builder.fresh_parts(plain, np.zeros(3), theta, info)[3]
    bare = est.builder.arrival_prior(a.x_bar, theta, info)
    np.testing.assert_array_equal(a.hessian, b.hessian)
    assert a.hessian[2, 2] > bare.hessian[2, 2] + 0.5 / 0.01**2  # the base height's information from the ground


def test_height_random_walk_adds_variance_along_the_vertical_only(estimator):
    """Covariance after the random walk = before + σ_w² t u uᵀ (u = the tangent direction of a vertical base
    displacement), the mean unchanged (−H⁻¹g)."""
    builder, robot = estimator.builder, estimator.robot
    state = StateMultibody(robot.model)
    x = _state(robot, seed=3)
    old = _prior(state, x, seed=4)
    elapsed = 0.05
    new = builder.with_ground_height(old, (False,) * 4, elapsed)
    u = numdiff.jacobian(lambda y: y[:3], x, state=state)[2]  # d p_z / d e: the vertical direction in the tangent
    u = np.r_[u, np.zeros(len(old.theta_bar))]
    cov_old, cov_new = np.linalg.inv(old.hessian), np.linalg.inv(new.hessian)
    expected = cov_old + builder.height_walk**2 * elapsed * np.outer(u, u)
    assert numdiff.relative_error(cov_new, expected) < 1e-8
    assert np.allclose(cov_new @ new.gradient, cov_old @ old.gradient)
    # the consider sensitivity (∂g/∂b of the IMU biases) is mapped as the gradient, with the ground term too
    rng = np.random.default_rng(5)
    sens = rng.standard_normal((len(old.gradient), 6))
    with_sens = ArrivalPrior(old.x_bar, old.theta_bar, old.hessian, old.gradient, sens)
    b = rng.standard_normal(6)
    moved = ArrivalPrior(old.x_bar, old.theta_bar, old.hessian, old.gradient + sens @ b)
    for contacts in ((False,) * 4, (True, True, False, True)):
        base = builder.with_ground_height(with_sens, contacts, elapsed)
        shifted = builder.with_ground_height(moved, contacts, elapsed)
        assert numdiff.relative_error(base.sensitivity @ b, shifted.gradient - base.gradient) < 1e-10


@pytest.fixture(scope="module")
def soft_trot(tmp_path_factory):
    """2 s of trot in place of the simulated Go1 with the realism suite's profile (soft round feet on a soft floor,
    Go1-like noise, biases, actuator losses), 5 kg payload, seed 7."""
    from mcoe_ros.sim.cli import main as sim_main

    out = str(tmp_path_factory.mktemp("trot") / "bag")
    rc = sim_main(["--scenario", "trot:2", "--payload-mass", "5", "--realistic", "--seed", "7", "--out", out])
    assert rc == 0
    return out


def _vertical_error(bag: str, overrides: dict) -> tuple[float, float]:
    """(final vertical position error, final horizontal error) in m of the estimator on the bag, first pose aligned."""
    from mcoe_ros.testing.datasets import replay_with_truth

    good, truth, _ = replay_with_truth(bag, overrides)
    first, last = good[0], good[-1]
    err = (last.position - first.position) - (truth[round(last.t, 3)] - truth[round(first.t, 3)])
    return float(err[2]), float(np.linalg.norm(err[:2]))


def test_soft_feet_trot_height_does_not_drift_with_the_ground_term(soft_trot):
    """Recorded data (simulated soft feet): without the ground terms (the arrival's and, since session 21, every
    knot's) the trot's base height climbs by centimetres (each stance's unrecovered sinking read as a rise); with
    them the final height error stays within 1.5 cm and the horizontal error is not made worse."""
    z_old, xy_old = _vertical_error(soft_trot, {"noise.foot_height": 0.0, "noise.stance_foot_height": 0.0})
    z_new, xy_new = _vertical_error(soft_trot, {})
    assert z_old > 0.03, z_old
    assert abs(z_new) < 0.015, z_new
    assert xy_new < xy_old + 0.01, (xy_new, xy_old)


def test_the_ekf_ground_update_removes_a_height_error():
    """A filter started 5 cm too high with all feet on the ground is pulled back to the ground height."""
    est = Estimator(EstimatorConfig())
    robot = est.robot
    q_j = np.tile([0.0, 0.8, -1.6], 4)
    quat = (1.0, 0.0, 0.0, 0.0)
    ekf = LegKinematicsEkf(robot, np.array([0.0, 0.0, 0.05]), p0_std=0.1, ground_height_std=0.01, ground_height=0.0)
    q = robot.neutral()
    q[7:] = q_j
    data = robot.create_data()
    pin.framesForwardKinematics(robot.model, data, q)
    # the base frame in the IMU's orientation: the feet's height below the base at this attitude
    rot = ekf.r_bi.T  # R_WB with the IMU at identity
    feet_z = [(rot @ data.oMf[f].translation)[2] for f in robot.foot_frame_ids]
    ekf.update_ground_height(quat, q_j, (True,) * 4)
    expected = -float(np.mean(feet_z))  # base height that puts the feet on z = 0
    assert abs(ekf.position[2] - expected) < 0.002
    before = ekf.position.copy()
    LegKinematicsEkf.update_ground_height(ekf, quat, q_j, (False,) * 4)  # no stance foot: no change
    assert np.array_equal(ekf.position, before)


def test_settled_feet_wait_for_the_touch_down_transient_and_need_load():
    """A stance foot is settled (zero-velocity pseudo-measurement used) only settle_time after its flag turned on
    and while its vertical force is at least settle_fraction of the stance feet's mean; a lift-off resets it."""
    from mcoe_ros.multibody.contact import ContactConfig, ContactDetector
    from mcoe_ros.multibody.robot import RobotModel

    det = ContactDetector(RobotModel(), ContactConfig(settle_fraction=0.7, settle_time=0.03))
    forces = np.zeros((4, 3))
    forces[:, 2] = (100.0, 100.0, 30.0, 0.0)
    flags = np.array([True, True, True, False])
    out = [det.settled(0.002 * k, flags, forces) for k in range(20)]
    assert not out[0].any() and not out[14].any()  # within 30 ms of the touch-down
    assert list(out[15]) == [True, True, False, False]  # 30 ms: loaded feet only (30 N < 0.7 x the 76.7 N mean)
    assert list(det.aged) == [True, True, True, False]  # down for 30 ms, loaded or not
    np.testing.assert_allclose(det.stance_time, [0.038, 0.038, 0.038, 0.0])  # s down at the last call (t = 38 ms)
    flags[0] = False  # lift-off, then a new touch-down: the settling time starts again
    det.settled(0.040, flags, forces)
    assert det.stance_time[0] == 0.0 and not det.aged[0]
    flags[0] = True
    assert not det.settled(0.042, flags, forces)[0]
    assert det.settled(0.072, flags, forces)[0]
    np.testing.assert_allclose(det.stance_time[:2], [0.030, 0.072])


@pytest.fixture(scope="module")
def soft_trot_3s(tmp_path_factory):
    """3 s of the same trot (the realism suite's trot_5kg-off_real_3s: off-centre 5 kg payload), seed 7."""
    from mcoe_ros.sim.cli import main as sim_main

    out = str(tmp_path_factory.mktemp("trot3") / "bag")
    payload = ["--payload-mass", "5", "--payload-com", "0.06", "-0.03", "0.06"]
    rc = sim_main(["--scenario", "trot:3", *payload, "--realistic", "--seed", "7", "--out", out])
    assert rc == 0
    return out


def _mass_error(bag: str, overrides: dict) -> float:
    """Relative payload mass error of the estimator's last good estimate on the bag."""
    from mcoe_ros.io.feed import SensorFeed
    from mcoe_ros.io.params import node_config
    from mcoe_ros.testing.datasets import load_bag

    series, pi_true = load_bag(bag)
    feed = SensorFeed(node_config(overrides))
    estimates = []
    for k in range(len(series)):
        feed.sample(1.0 + float(series.t[k]), series.q[k], series.dq[k], series.tau[k], *series.imu(k))
        estimates += feed.poll()
    good = [e for e in estimates if e.source != "hold"]
    m_true = pi_true[0]
    return abs(good[-1].payload_pi[0] - m_true) / m_true


def test_joint_process_noise_lets_the_held_feet_slide(soft_trot_3s):
    """Recorded data (simulated soft feet): the rigid contacts hold every detected stance foot still, while the real
    feet slide through the touch-down transient; only joint motion that the base motion does not explain lets a held
    foot slide in the model. With the joint velocities' own process noise (``noise.process_joint_velocity``, the
    default) the trot's horizontal error and payload mass error are lower than with the old common value
    (``noise.process_velocity`` for every coordinate). Fails on the estimator before the parameter. Measured with the
    landing by the impulse (the model of the time, ``dynamics.landing_damping`` 0): the default landing over time
    lets a landing foot slow down in the model itself, and the joint noise's share of the gain is smaller there
    (horizontal error 2.04 -> 1.75 cm, mass 1.6 -> 0.25 %). The mass gain was measured as halving the error before the
    accelerometer's z bias was tracked (seed 7 draws -0.05 m/s², worth ~+1.8 % here); with it tracked (session 29)
    it is 2.3 -> 1.5 %; with the orientation reading's gait weight (``noise.orientation_gait``, session 30) 1.85 ->
    1.46 %."""
    impulse = {"dynamics.landing_damping": 0.0}
    old = {**impulse, "noise.process_joint_velocity": 0.0}
    _, xy_old = _vertical_error(soft_trot_3s, old)
    _, xy_new = _vertical_error(soft_trot_3s, impulse)
    m_old, m_new = _mass_error(soft_trot_3s, old), _mass_error(soft_trot_3s, impulse)
    print(xy_old, xy_new, m_old, m_new)
    assert xy_new < 0.85 * xy_old, (xy_new, xy_old)
    assert m_new < 0.85 * m_old, (m_new, m_old)


def test_process_noise_blocks_of_the_velocity_noise_information():
    """noise.process_base_linear / process_joint_velocity set their blocks of the diagonal velocity-noise
    information (process_joint_velocity on the intervals that noise.touchdown_transient leaves loose, transient_info;
    the others take process_velocity on the joints too); 0 leaves process_velocity's."""
    from mcoe_ros.io.params import node_config

    cfg = node_config({"noise.process_base_linear": 0.05, "noise.process_joint_velocity": 0.1}).estimator
    est = Estimator(cfg)
    info, loose = est.builder.noise_info, est.builder.transient_info
    for w in (info, loose):
        assert np.allclose(w[:3], 0.05**-2) and np.allclose(w[3:6], cfg.noise.process_velocity**-2)
    assert np.allclose(loose[6:], 0.1**-2) and np.allclose(info[6:], cfg.noise.process_velocity**-2)
    cfg = node_config({"noise.process_joint_velocity": 0.0}).estimator
    assert np.allclose(Estimator(cfg).builder.noise_info, cfg.noise.process_velocity**-2)
