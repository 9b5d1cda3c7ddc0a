"""noise.stance_foot_height: at every knot, the leg-odometry base height of each settled stance foot on the flat
ground (:class:`mcoe_ros.multibody.measurements.BaseHeight`; docs/localisation.md, session 21). The measurement's
finite-difference and C++ = Python tests are in test_measurement.py and test_compiled.py; here the builder's rule
and the estimator on the sample bag with both backends."""

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.estimation.config import DynamicsConfig, EstimatorConfig, NoiseConfig
from mcoe_ros.estimation.estimator import Estimator
from mcoe_ros.estimation.samples import ImuSample, JointSample
from mcoe_ros.estimation.window import GridKnot
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import ConfigError, node_config
from mcoe_ros.multibody import compiled
from mcoe_ros.multibody.imu import rotation_quaternion
from mcoe_ros.multibody.measurements import BaseHeight, ContactVelocity
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.testing.data import first_estimates
from mcoe_ros.testing.go1 import standing_state


def _knots() -> list[GridKnot]:
    """Three knots: four feet down, FR not yet settled (its zero-velocity pseudo-measurement is off), then a flight."""
    feet = [(True,) * 4, (True,) * 4, (False,) * 4]
    settled = [(True, False, True, True), (True,) * 4, (False,) * 4]
    return [
        GridKnot(0.002 * i, None, None, f, np.zeros((4, 3)), settled=s, stance_time=(0.2,) * 4)
        for i, (f, s) in enumerate(zip(feet, settled, strict=True))
    ]


def test_the_height_goes_with_the_zero_velocity_pseudo_measurement():
    """Each foot with the zero-velocity pseudo-measurement gets one BaseHeight row after it, σ =
    noise.stance_foot_height; 0 adds none (the default is 0.01 m, session 21)."""
    assert EstimatorConfig().noise.stance_foot_height == 0.01
    cfg = EstimatorConfig(noise=NoiseConfig(stance_foot_height=0.02))
    running, terminal = Estimator(cfg).builder.phase_models(_knots(), None)
    for model, n in zip([*running, terminal], (3, 4, 0), strict=True):
        heights = [m for m in model.measurements if isinstance(m, BaseHeight)]
        quiet = [m for m in model.measurements if isinstance(m, ContactVelocity)]
        assert len(heights) == len(quiet) == n
        assert [h.frame_id for h in heights] == [q.frame_id for q in quiet]
        assert all(h.W[0, 0] == pytest.approx(1 / 0.02) for h in heights)
    off, _ = Estimator(EstimatorConfig(noise=NoiseConfig(stance_foot_height=0.0))).builder.phase_models(_knots(), None)
    assert not any(isinstance(m, BaseHeight) for model in off for m in model.measurements)
    assert node_config({"noise.stance_foot_height": 0.01}).estimator.noise.stance_foot_height == 0.01
    with pytest.raises(ConfigError, match="noise.stance_foot_height"):
        node_config({"noise.stance_foot_height": -0.01})


def test_the_base_height_input_is_the_leg_odometry_height():
    """A BaseHeight row's z from the knot's encoders and IMU quaternion alone: on a tilted standing state whose foot
    is on the ground plane z = dynamics.ground_height, it equals the state's base height."""
    robot = RobotModel()
    x = standing_state(robot, np.random.default_rng(3))
    q = x[: robot.nq]
    q[3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(0.05, -0.08, 0.7)).coeffs()
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, q)
    foot = robot.foot_frame_ids[3]
    ground = float(data.oMf[foot].translation[2])
    quat = rotation_quaternion(data.oMf[robot.imu_frame_id].rotation)
    imu = ImuSample(0.0, np.array([quat.w, quat.x, quat.y, quat.z]), np.zeros(3), np.zeros(3))
    joint = JointSample(0.0, q[7:].copy(), np.zeros(robot.nj), np.zeros(robot.nj))
    knot = GridKnot(0.0, joint, imu, (True,) * 4, np.zeros((4, 3)), settled=(True,) * 4, stance_time=(0.2,) * 4)
    cfg = EstimatorConfig(noise=NoiseConfig(stance_foot_height=0.01), dynamics=DynamicsConfig(ground_height=ground))
    builder = Estimator(cfg).builder
    model = builder.interval_model((True,) * 4, None, settled=(True,) * 4)
    _, z = builder.knot_inputs(knot, model)
    rows = [zs for m, zs in zip(model.measurements, model.z_slices, strict=True) if isinstance(m, BaseHeight)]
    assert len(rows) == 4
    assert z[rows[3]][0] == pytest.approx(q[2], abs=1e-12)
    assert all(abs(z[r][0] - q[2]) < 0.05 for r in rows)  # the other feet: the same plane to a few cm (tilted legs)


def test_estimator_with_the_stance_foot_height_runs_both_solvers():
    """On the sample bag the option changes the estimate (not a no-op) and the compiled solver gives the Python
    reference's payload and base position."""
    over = {"noise.stance_foot_height": 0.01, "estimator.window": 0.06, "estimator.tick_period": 0.02}
    feed = SensorFeed(node_config({**over, "solver.backend": "python"}))
    out = first_estimates(feed, 3)
    knots = feed.estimator.solver.problem.knots
    assert any(isinstance(m, BaseHeight) for k in knots for m in k.model.measurements)
    assert all(e.is_finite() for e in out)
    plain = first_estimates(
        SensorFeed(node_config({**over, "noise.stance_foot_height": 0.0, "solver.backend": "python"})), 3
    )
    # ~0.8 µm in these three 0.06 s windows (their cold start holds the tilt at the IMU's, noise.arrival_tilt); the
    # solver reproduces a run to ~1e-12
    assert abs(plain[-1].position[2] - out[-1].position[2]) > 1e-7
    # the published height's variance carries one row's (the flat ground's common error), the plain run's does not
    assert feed.estimator.ground_variance == pytest.approx(0.01**2)
    assert all(e.pose_cov[2, 2] > 0.01**2 for e in out)
    if not compiled.available():
        return
    assert compiled.unsupported(knots[0].model) is None
    cfeed = SensorFeed(node_config(over))
    cout = first_estimates(cfeed, 3)
    assert type(cfeed.estimator.solver).__name__ == "CompiledSolver"
    for e, ce in zip(out, cout, strict=True):
        np.testing.assert_allclose(ce.payload_pi, e.payload_pi, rtol=1e-5, atol=1e-8)
        np.testing.assert_allclose(ce.position, e.position, atol=1e-7)
