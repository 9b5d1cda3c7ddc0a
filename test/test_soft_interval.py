"""Soft-contact interval model (issue 14 item 1) on the Go1: FD tests of Fx, Fp and every measurement's Rx, Rp
(through the soft-dynamics adapter's a, da/dx, da/dpi), the torque sensitivity of its noise model, the Newton-failure
error, the rejected actuator model, and the compiled backend declaring it unsupported."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.estimation.config import DynamicsConfig
from mcoe_ros.io.bag import iter_messages
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import ConfigError, node_config
from mcoe_ros.multibody import compiled
from mcoe_ros.multibody.actuator import ActuatorModel, ParameterLayout
from mcoe_ros.multibody.interval import IntervalModelCache, MultibodyIntervalModel
from mcoe_ros.multibody.measurements import (
    ContactVelocity,
    ImuAngularVelocity,
    ImuOrientation,
    ImuSpecificForce,
    JointPosition,
    JointVelocity,
)
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.multibody.soft_contact import SoftContactModel
from mcoe_ros.multibody.soft_dynamics import SoftContactNewtonError, SoftPhaseDynamicsModel
from mcoe_ros.ocp import numdiff
from mcoe_ros.testing.data import EIV_OFF, SAMPLE_BAG

PI = np.array([2.0, 0.1, -0.05, 0.2, 0.05, 0.001, 0.06, 0.002, 0.003, 0.07])
STAND = np.tile([0.0, 0.8, -1.6], 4)
DT = 2e-3
CONTACT = SoftContactModel(compliance_normal=2e-3, compliance_tangential=5e-3, time_constant=0.02, smoothing=2.0)
WORST = numdiff.WorstErrors(tolerance=1e-5)


@pytest.fixture(scope="module", autouse=True)
def report_worst():
    yield
    print("\n" + WORST.report("soft-contact interval model"))


@pytest.fixture(scope="module")
def robot():
    return RobotModel()


def stance_state(robot: RobotModel, rng: np.random.Generator, height: float) -> np.ndarray:
    """Near a stand: joints STAND + noise, small tilt, feet's mean height ``height`` m (< 0: penetration),
    small random velocities."""
    model, data = robot.model, robot.model.createData()
    q = pin.neutral(model)
    q[7:] = STAND + 0.05 * rng.normal(size=robot.nj)
    q[3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(0.05 * rng.normal(size=3))).coeffs()
    pin.framesForwardKinematics(model, data, q)
    q[2] -= np.mean([data.oMf[f].translation[2] for f in robot.foot_frame_ids]) - height
    return np.concatenate([q, 0.1 * rng.normal(size=model.nv)])


def measurements(robot: RobotModel, layout: ParameterLayout) -> list:
    return [
        JointPosition(robot, std=0.01),
        JointVelocity(robot, std=0.1),
        ImuAngularVelocity(robot, std=0.02, bias=layout.gyro),
        ImuOrientation(robot, std=0.05),
        ImuSpecificForce(robot, std=0.1, bias=layout.acc),
        ContactVelocity(robot, robot.foot_frame_ids[0], std=0.02),
    ]


@pytest.mark.parametrize("height", [-0.004, 0.05])
def test_fd_soft_interval_model(robot, height):
    """Fx, Fp (payload + zero IMU-bias columns) and every measurement's Rx, Rp against FD, in stance and in flight."""
    rng = np.random.default_rng(int(1000 * abs(height)))
    layout = ParameterLayout(gyro_bias=True, acc_bias=True)
    model = MultibodyIntervalModel(
        robot, robot.foot_names, DT, measurements(robot, layout), robot.foot_names, layout=layout, soft_contact=CONTACT
    )
    assert isinstance(model.dynamics, SoftPhaseDynamicsModel) and model.impulse == () and model.npi == 16
    x = stance_state(robot, rng, height)
    pi = np.r_[PI, 0.01, -0.02, 0.005, 0.05, -0.03, 0.1]
    data, fd = model.create_data(), model.create_data()
    u = 2.0 * rng.normal(size=robot.nj)
    z = rng.normal(size=model.nz)
    z[model.z_slices[3]] /= np.linalg.norm(z[model.z_slices[3]])
    for d in (data, fd):
        d.u[:], d.z[:] = u, z
    model.calc_diff(data, x, pi)
    model.calc(fd, x, pi)
    np.testing.assert_allclose(fd.xnext, data.xnext, atol=1e-12)
    np.testing.assert_allclose(fd.r, data.r, atol=1e-9)
    if height < 0.0:
        assert data.dyn.lam.reshape(-1, 3)[:, 2].sum() > 10.0  # feet loaded
    else:
        assert np.abs(data.dyn.lam).max() < 1e-3  # flight

    def evaluate(xx, pp):
        model.calc(fd, xx, pp)
        return fd.xnext.copy(), fd.r.copy()

    state = model.state
    fx, rx = numdiff.jacobian(lambda xx: evaluate(xx, pi), x, state=state, output_states=[state, None])
    fp, rp = numdiff.jacobian(lambda pp: evaluate(x, pp), pi, output_states=[state, None])
    tag = "stance" if height < 0 else "flight"
    WORST.record(f"soft {tag} Fx", data.Fx, fx)
    WORST.record(f"soft {tag} Fp", data.Fp, fp)
    assert not np.any(data.Fp[:, 10:])
    for meas, rs in zip(model.measurements, model.r_slices, strict=True):
        WORST.record(f"soft {tag} {type(meas).__name__} Rx", data.Rx[rs], rx[rs])
        WORST.record(f"soft {tag} {type(meas).__name__} Rp", data.Rp[rs], rp[rs])


def test_soft_noise_model_torque_sensitivity(robot):
    """da_dtau's joint columns (the noise model's torque sensitivity) are d a/du by FD; the covariance is PSD with
    the floor on its diagonal."""
    rng = np.random.default_rng(7)
    dyn = SoftPhaseDynamicsModel(robot, robot.foot_names, DT, CONTACT)
    data, fd = dyn.create_data(), dyn.create_data()
    x, u = stance_state(robot, rng, -0.003), rng.normal(size=robot.nj)
    dyn.calc_diff(data, x, u, PI)

    def accel(uu):
        dyn.calc(fd, x, uu, PI)
        return fd.a.copy()

    WORST.record("soft da/du", data.da_dtau[:, 6:], numdiff.jacobian(accel, u))
    assert not np.any(data.da_dtau[:, :6])
    cov = dyn.velocity_noise_covariance(data, np.full(robot.nj, 0.5), 0.02)
    assert np.linalg.eigvalsh(cov).min() >= 0.02**2 * (1 - 1e-9)
    assert np.linalg.eigvalsh(cov).max() > 2 * 0.02**2  # the torque noise is felt


def test_soft_newton_failure_is_a_linalg_error(robot):
    """A step that does not converge raises SoftContactNewtonError (a LinAlgError the estimator holds on)."""
    dyn = SoftPhaseDynamicsModel(robot, (), DT, CONTACT, max_iter=1)
    x = stance_state(robot, np.random.default_rng(1), -0.003)
    with pytest.raises(np.linalg.LinAlgError, match="soft-contact step failed"):
        dyn.calc(dyn.create_data(), x, np.zeros(robot.nj), PI)
    assert issubclass(SoftContactNewtonError, np.linalg.LinAlgError)


def test_soft_rejects_actuator_and_is_not_compiled(robot):
    act = ActuatorModel(robot)
    with pytest.raises(ValueError, match="actuator"):
        MultibodyIntervalModel(
            robot, (), DT, [], actuator=act, layout=ParameterLayout(n_actuator=act.n_params), soft_contact=CONTACT
        )
    cache = IntervalModelCache(robot, DT, [JointPosition(robot, std=0.01)], 0.02, soft_contact=CONTACT)
    feet = robot.foot_names
    model = cache[feet, feet, feet[:2]]
    assert model is cache[feet, (), feet[:2]]  # no reset map: the impulse set is dropped
    assert compiled.unsupported(model).startswith("soft-contact")


def soft_feed(**extra) -> SensorFeed:
    over = {"dynamics.model": "soft", "actuator.enabled": False, "noise.joint_torque": 0.1, **EIV_OFF}
    over.update({"estimator.window": 0.06, "estimator.tick_period": 0.02, **extra})
    return SensorFeed(node_config(over))


def run_feed(feed: SensorFeed, ticks: int) -> list:
    out = []
    for _topic, t_ns, msg in iter_messages(SAMPLE_BAG, ["low_state"]):
        feed.low_state(msg, t_ns * 1e-9)
        out += feed.poll()
        if feed.estimator.counters.ticks >= ticks:
            break
    return out


def test_estimator_with_soft_contact_on_the_sample_bag():
    """dynamics.model soft: the window's models are soft, the Python solver runs (compiled declares them
    unsupported), the estimates are finite."""
    feed = soft_feed()
    out = run_feed(feed, 6)
    assert out and all(est.is_finite() for est in out)
    assert out[-1].source == "oe"
    knots = feed.estimator.solver.problem.knots
    assert all(isinstance(k.model.dynamics, SoftPhaseDynamicsModel) for k in knots)
    assert not np.allclose(knots[0].W, knots[0].W[0, 0] * np.eye(18))  # torque-induced noise through dF/du


def test_soft_newton_failure_holds_the_tick():
    """A Newton budget too small to converge: every solve fails with the soft-contact error, held, no crash."""
    feed = soft_feed(**{"dynamics.newton_max_iterations": 1})
    out = run_feed(feed, 3)
    assert feed.estimator.counters.held >= 1
    assert "soft-contact step failed" in feed.estimator.last_status
    assert all(est.is_finite() for est in out)


def test_soft_config_needs_actuator_disabled():
    with pytest.raises(ConfigError, match="dynamics.model"):
        node_config({"dynamics.model": "soft"})
    with pytest.raises(ConfigError, match="dynamics.model"):
        node_config({"dynamics.model": "elastic"})
    with pytest.raises(ValueError, match="dynamics model"):
        DynamicsConfig(model="elastic")
