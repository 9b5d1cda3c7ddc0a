"""Rolling feet (``dynamics.rolling_radius``): the round foot's lowest point, an input of the interval (u = [tau; a
point per foot]), measured by the stance-foot velocity pseudo-measurement and, with ``dynamics.rolling_contacts``, held
by the rigid contacts: derivatives against finite differences on the manifold, the same dynamics as a robot whose
contact frames sit at that point (or as the plain model, without rolling contacts), the builder's points, and the
estimator on the sample bag."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import test_measurement as tm
from test_measurement import FEET, PI, check_interval_fd, random_state, random_z

from mcoe_ros.estimation.config import DynamicsConfig, EstimatorConfig
from mcoe_ros.estimation.estimator import Estimator
from mcoe_ros.estimation.samples import ImuSample, JointSample
from mcoe_ros.estimation.window import GridKnot
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import ConfigError, node_config
from mcoe_ros.multibody.actuator import ActuatorModel, ParameterLayout
from mcoe_ros.multibody.imu import rotation_quaternion
from mcoe_ros.multibody.interval import IntervalModelCache, MultibodyIntervalModel
from mcoe_ros.multibody.measurements import ContactVelocity, ImuSpecificForce, JointPosition
from mcoe_ros.multibody.robot import RobotModel, RobotSpec
from mcoe_ros.testing.data import first_estimates
from mcoe_ros.testing.go1 import standing_state


@pytest.fixture(scope="module", autouse=True)
def report_worst():
    yield
    print("\n" + tm.WORST.report("rolling feet"))


@pytest.fixture(scope="module")
def robot():
    return RobotModel()


def _points(rng: np.random.Generator, n: int) -> np.ndarray:
    """n random contact points of a 0.02 m sphere (foot-frame coordinates), (n, 3)."""
    p = rng.normal(size=(n, 3))
    return 0.02 * p / np.linalg.norm(p, axis=1, keepdims=True)


@pytest.mark.parametrize("rolling_contacts", [True, False])
@pytest.mark.parametrize("contacts, impulse, damped", [(FEET[:2], (), ()), (FEET, (), FEET[1:3]), (FEET, FEET[2:], ())])
def test_rolling_feet_fd(robot, contacts, impulse, damped, rolling_contacts):
    """Fx, Fp and the point velocity's Rx against central differences (the points are inputs: fixed)."""
    rng = np.random.default_rng(900 + len(contacts) + 10 * len(impulse) + 100 * len(damped) + rolling_contacts)
    act = ActuatorModel(robot)
    layout = ParameterLayout(n_actuator=act.n_params)
    meas = [JointPosition(robot, std=0.01), ImuSpecificForce(robot, std=0.1)]
    meas += [ContactVelocity(robot, robot.foot_frame_ids[k], 0.01, point_index=k) for k in (0, 3)]
    model = MultibodyIntervalModel(
        robot,
        contacts,
        0.01,
        meas,
        impulse,
        actuator=act,
        layout=layout,
        rolling_feet=True,
        rolling_contacts=rolling_contacts,
        kd=40.0,
        damped=damped,
    )
    assert model.nu == robot.nj + 12
    pi = np.r_[PI, 0.8, 1.2, 1.5, 0.15, 0.2, 0.25, 0.008, 0.01, 0.012]
    tm.PI_CHECK = pi
    try:
        for _ in range(2):
            x = random_state(robot, rng)
            x[robot.nq + 6 :] *= 0.05
            u = np.r_[rng.normal(size=robot.nj), _points(rng, 4).ravel()]
            name = f"rolling {len(contacts)}/{len(impulse)}{'' if rolling_contacts else ' points measured only'}"
            check_interval_fd(model, x, u, random_z(model, rng), name)
    finally:
        tm.PI_CHECK = PI


@pytest.mark.parametrize("contacts, impulse", [(FEET[:3], ()), (FEET, FEET[:2])])
def test_fixed_points_equal_offset_contact_frames(robot, contacts, impulse):
    """With the same point p for every foot, the rolling-feet model is the robot whose contact frames are offset by p
    (``robot.foot_contact_offset``): the same next state, Jacobians and contact-point velocity."""
    rng = np.random.default_rng(11)
    p = np.array([-0.015, 0.004, -0.0132])
    offset = RobotModel(RobotSpec(foot_contact_offset=tuple(p)))
    x = random_state(robot, rng)
    tau = rng.normal(size=robot.nj)
    out = []
    for rob, rolling in ((robot, True), (offset, False)):
        meas = [ContactVelocity(rob, rob.foot_frame_ids[1], 0.01, point_index=1 if rolling else None)]
        model = MultibodyIntervalModel(rob, contacts, 0.005, meas, impulse, rolling_feet=rolling)
        data = model.create_data()
        data.u[:] = np.r_[tau, np.tile(p, 4)] if rolling else tau
        data.z[:] = 0.0
        model.calc_diff(data, x, PI)
        out.append((data.xnext.copy(), data.Fx.copy(), data.Fp.copy(), data.r.copy(), data.Rx.copy()))
    for a, b in zip(*out, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("contacts, impulse", [(FEET[:3], ()), (FEET, FEET[:2])])
def test_points_measured_only_keep_the_contacts_at_the_frames(robot, contacts, impulse):
    """Without rolling contacts the dynamics are the plain model's (contacts at the foot frames, the same next state,
    Jacobians and forces), and the contact velocity is the point's, v + ω × p in the foot frame."""
    rng = np.random.default_rng(12)
    x = random_state(robot, rng)
    tau = rng.normal(size=robot.nj)
    points = _points(rng, 4)
    fid = robot.foot_frame_ids[1]
    out = []
    for rolling in (True, False):
        meas = [ContactVelocity(robot, fid, 0.01, point_index=1 if rolling else None)]
        model = MultibodyIntervalModel(
            robot, contacts, 0.005, meas, impulse, rolling_feet=rolling, rolling_contacts=False
        )
        data = model.create_data()
        data.u[:] = np.r_[tau, points.ravel()] if rolling else tau
        data.z[:] = 0.0
        model.calc_diff(data, x, PI)
        out.append((data.xnext.copy(), data.Fx.copy(), data.Fp.copy(), data.r.copy()))
    for a, b in zip(out[0][:3], out[1][:3], strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12, rtol=1e-12)
    data = robot.model.createData()
    q, v = x[: robot.nq], x[robot.nq :]
    pin.forwardKinematics(robot.model, data, q, v)
    vel = pin.getFrameVelocity(robot.model, data, fid, pin.LOCAL)
    expected = vel.linear + np.cross(vel.angular, points[1])
    w = np.sqrt(1.0 / 0.01**2)
    np.testing.assert_allclose(out[0][3] / -w, expected, atol=1e-9)
    np.testing.assert_allclose(out[1][3] / -w, vel.linear, atol=1e-9)


def test_cache_measures_the_points(robot):
    cache = IntervalModelCache(robot, 0.002, [], foot_velocity_std=0.02, rolling_feet=True)
    m = cache[FEET, (), FEET[1:3]]
    assert m.nu == robot.nj + 12 and [mm.point_index for mm in m.measurements] == [1, 2]
    plain = IntervalModelCache(robot, 0.002, [], foot_velocity_std=0.02)[FEET, (), FEET[1:3]]
    assert plain.nu == robot.nj and [mm.point_index for mm in plain.measurements] == [None, None]


def test_the_builder_puts_each_point_at_the_lowest_point_of_its_foot(robot):
    """knot_inputs with rolling feet: u = [torques; per foot the point dynamics.rolling_radius straight below the foot
    frame's origin (world -z), in foot-frame coordinates], from the knot's encoders and IMU quaternion."""
    x = standing_state(robot, np.random.default_rng(5))
    q = x[: robot.nq]
    q[3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(0.1, -0.15, 0.4)).coeffs()
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, q)
    quat = rotation_quaternion(data.oMf[robot.imu_frame_id].rotation)
    imu = ImuSample(0.0, np.array([quat.w, quat.x, quat.y, quat.z]), np.zeros(3), np.zeros(3))
    tau = np.arange(robot.nj, dtype=float)
    joint = JointSample(0.0, q[7:].copy(), np.zeros(robot.nj), tau)
    knot = GridKnot(0.0, joint, imu, (True,) * 4, np.zeros((4, 3)), settled=(True,) * 4, stance_time=(0.2,) * 4)
    builder = Estimator(EstimatorConfig(dynamics=DynamicsConfig(rolling_radius=0.013))).builder
    model = builder.interval_model((True,) * 4, None, settled=(True,) * 4)
    u, _ = builder.knot_inputs(knot, model)
    assert u.shape == (robot.nj + 12,) and np.array_equal(u[: robot.nj], tau)
    for k, fid in enumerate(robot.foot_frame_ids):
        world = data.oMf[fid].rotation @ u[robot.nj + 3 * k : robot.nj + 3 * k + 3]
        np.testing.assert_allclose(world, [0.0, 0.0, -0.013], atol=1e-12)
    plain = Estimator(EstimatorConfig(dynamics=DynamicsConfig(rolling_radius=0.0))).builder
    assert plain.knot_inputs(knot, plain.interval_model((True,) * 4, None))[0].shape == (robot.nj,)
    with pytest.raises(ConfigError, match="dynamics.rolling_radius"):
        node_config({"dynamics.rolling_radius": 0.02, "robot.foot_contact_offset": [-0.015, 0.0, -0.0132]})


@pytest.mark.parametrize("rolling_contacts", [False, True])
def test_estimator_with_rolling_feet_on_the_sample_bag(rolling_contacts):
    """The option changes the estimate (not a no-op), the estimate stays finite, and no rolling share is published."""
    over = {"estimator.window": 0.06, "estimator.tick_period": 0.02, "solver.backend": "python"}
    feed = SensorFeed(
        node_config({**over, "dynamics.rolling_radius": 0.02, "dynamics.rolling_contacts": rolling_contacts})
    )
    out = first_estimates(feed, 3)
    knots = feed.estimator.solver.problem.knots
    assert all(k.model.nu == 24 for k in knots)
    assert all(k.model.dynamics.rolling_contacts == rolling_contacts for k in knots)
    assert all(e.is_finite() for e in out)
    assert feed.estimator.drift.foot_radius == 0.0  # the full radius: no rolling share left
    plain = first_estimates(SensorFeed(node_config({**over, "dynamics.rolling_radius": 0.0})), 3)
    assert np.abs(plain[-1].payload_pi - out[-1].payload_pi).max() > 1e-6


def test_the_published_rolling_share_covers_the_radius_below_the_measured_point():
    """The pose covariance's rolling share (mcoe_ros/estimation/drift.py) takes the part of the sphere's radius the
    stance-foot velocity does not measure: the whole radius without rolling feet, none at the full radius."""
    for radius, left in ((0.0, 0.02), (0.015, 0.005), (0.02, 0.0)):
        estimator = Estimator(EstimatorConfig(dynamics=DynamicsConfig(rolling_radius=radius)))
        assert estimator.drift.foot_radius == pytest.approx(left)
