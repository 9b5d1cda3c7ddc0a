"""The estimator's parameter vector: combined trunk + payload body, actuator model, IMU biases, torque noise."""

from dataclasses import replace

import numpy as np
import pytest

from mcoe_ros.estimation.builder import EstimationParameters
from mcoe_ros.estimation.config import (
    ActuatorConfig,
    EstimatorConfig,
    ImuBiasConfig,
    LegMassConfig,
    NoiseConfig,
    PayloadConfig,
)
from mcoe_ros.estimation.excitation import leg_joint_indices, swing_fraction, swing_speed
from mcoe_ros.io import messages
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import ConfigError, node_config
from mcoe_ros.multibody import compiled
from mcoe_ros.multibody.actuator import ParameterLayout
from mcoe_ros.multibody.inertia import is_physically_consistent, pi_about_com, pi_from_com
from mcoe_ros.multibody.interval import MultibodyIntervalModel
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.testing.data import EIV_OFF, first_estimates


@pytest.fixture(scope="module")
def robot():
    return RobotModel()


def test_parameter_blocks_layout_and_priors(robot):
    legs = LegMassConfig(enabled=True, prior_sigma=0.2)
    cfg = EstimatorConfig(
        actuator=ActuatorConfig(enabled=True),
        imu_bias=ImuBiasConfig(enabled=True),
        payload=PayloadConfig(leg_mass=legs),
    )
    par = EstimationParameters(robot, cfg)
    assert par.parametrization.ntheta == 26 and par.layout.size == 26
    assert par.layout.actuator == slice(10, 19) and par.layout.gyro == slice(19, 22) and par.layout.acc == slice(22, 25)
    assert par.layout.leg == slice(25, 26)
    pi0 = par.parametrization.pi(par.prior_theta)
    np.testing.assert_allclose(pi0[10:13], 1.0)  # viscous friction prior median (log-normal)
    np.testing.assert_allclose(pi0[19:25], 0.0)
    assert pi0[25] == 1.0 and par.prior_info[25, 25] == pytest.approx(0.2**-2)  # leg scale prior: the URDF legs
    assert par.parametrization.pi(np.r_[par.prior_theta[:25], -5.0])[25] > 0.0  # any theta: physical legs
    assert par.leg_mass == pytest.approx(robot.leg_mass) and 4.0 < robot.leg_mass < 8.0
    assert list(par.bias_indices) == list(range(19, 25)) and np.all(par.bias_walk > 0)
    # the combined body is the URDF trunk + the payload prior, physically consistent
    body = par.body_pi(pi0)
    assert is_physically_consistent(body)
    np.testing.assert_allclose(body - robot.nominal_body_pi(), pi0[:10], atol=1e-12)


def test_combined_body_represents_a_robot_lighter_than_its_urdf(robot):
    """A trunk 0.4 kg lighter than the URDF, no payload: a consistent body whose payload has negative mass, published
    as such."""
    par = EstimationParameters(robot, EstimatorConfig())
    trunk = robot.nominal_body_pi()
    mass, com, inertia = pi_about_com(trunk)
    lighter = pi_from_com(mass - 0.4, com, 0.95 * inertia)
    theta = par.parametrization.parts[0].theta(lighter - trunk)
    payload = par.parametrization.parts[0].pi(theta)
    assert payload[0] == pytest.approx(-0.4) and is_physically_consistent(par.body_pi(payload))
    tree = messages.inertia_stamped(0.0, payload, "trunk")
    assert tree["inertia"]["m"] == pytest.approx(-0.4)
    assert np.isfinite([tree["inertia"]["com"][a] for a in "xyz"]).all()


def test_estimator_with_every_parameter_block_runs_and_reports_them():
    over = {
        "actuator.enabled": True,
        "imu_bias.enabled": True,
        "imu_bias.accelerometer": True,
        "noise.joint_torque": 0.1,
    }
    over.update({"payload.leg_mass.enabled": True, "payload.leg_mass.min_swing": 0.0})  # never frozen here
    over.update(EIV_OFF)  # the errors-in-variables defaults do not support a leg mass scale
    over["payload.leg_mass.min_swing_speed"] = 0.0
    over.update({"estimator.window": 0.06, "estimator.tick_period": 0.02, "solver.max_iterations": 1})
    feed = SensorFeed(node_config(over))
    out = first_estimates(feed, 6)
    est = out[-1]
    assert est.source == "oe" and est.is_finite()
    assert est.actuator[0].shape == (9,) and np.all(est.actuator[0] > 0)  # positive by construction
    assert est.imu_bias[0].shape == (6,) and np.all(np.isfinite(est.imu_bias[1]))
    dm, sd = est.leg_mass
    assert np.isfinite(dm) and np.isfinite(sd) and sd > 0.0
    values = feed.diagnostics().key_values()
    assert "gyro_bias_x_rad_s" in values and "rotor_inertia_calf" in values and "leg_mass_deviation_kg" in values
    assert values["leg_mass_frozen_solves"].startswith("0 of")
    assert type(feed.estimator.solver).__name__ == "MCOESolver"  # the leg mass scale has no compiled port
    legs = feed.estimator.window.detector._model.inertias  # the detector uses the identified legs
    scale = legs[2].mass / feed.estimator.robot.nominal_inertias[2].mass
    assert scale == pytest.approx(1.0 + dm / feed.estimator.parameters.leg_mass) and scale != 1.0
    knots = feed.estimator.solver.problem.knots
    assert not np.allclose(knots[0].W, knots[0].W[0, 0] * np.eye(18))  # torque-induced noise: not isotropic


def test_noise_config_validates_the_process_model():
    with pytest.raises(ValueError, match="process noise model"):
        NoiseConfig(process_model="both")


def test_leg_mass_config_errors_name_the_parameter():
    with pytest.raises(ConfigError, match="payload.leg_mass.enabled"):
        node_config({"payload.leg_mass.enabled": True, "solver.backend": "compiled"})
    with pytest.raises(ConfigError, match="payload.leg_mass.enabled false"):
        node_config({"payload.leg_mass.enabled": True, "dynamics.model": "soft", "actuator.enabled": False})
    with pytest.raises(ConfigError, match="payload.leg_mass.prior_sigma"):
        node_config({"payload.leg_mass.prior_sigma": 0.0})


def test_compiled_path_declares_the_leg_mass_scale_unsupported(robot):
    """The C++ interval model has no leg mass column: :func:`compiled.unsupported` names it (the estimator's 'auto'
    backend then runs the Python reference, see the solver check above)."""
    plain = MultibodyIntervalModel(robot, ("FL_foot",), 0.002, [])
    legs = MultibodyIntervalModel(robot, ("FL_foot",), 0.002, [], layout=ParameterLayout(leg_mass=True))
    assert compiled.unsupported(plain) is None
    assert "leg mass" in compiled.unsupported(legs)


def test_leg_mass_gate_keeps_k_on_windows_without_swing():
    """All feet down in every knot (the sample bag's first second is a squat-sway): every solve keeps log k at its
    prior (the anchor), the published deviation stays ~0 kg; a knot with a foot in the air counts as swing."""
    over = {"payload.leg_mass.enabled": True, "estimator.window": 0.06, "estimator.tick_period": 0.02, **EIV_OFF}
    feed = SensorFeed(node_config(over))
    out = first_estimates(feed, 4)
    gate = feed.estimator.leg_gate
    assert gate.solves >= 4 and gate.frozen == gate.solves
    assert abs(out[-1].leg_mass[0]) < 0.01
    knots = list(feed.estimator.window.knots)
    assert swing_fraction(knots) == 0.0
    lifted = [replace(knots[0], contacts=(False, True, True, True)), *knots[1:4]]
    assert swing_fraction(lifted) == 0.25
    legs = leg_joint_indices(feed.estimator.robot)
    names = feed.estimator.robot.joint_names
    assert [[names[j][:2] for j in leg] for leg in legs] == [[f[:2]] * 3 for f in feed.estimator.robot.foot_names]
    dq = knots[0].joint.dq[legs[0]]
    assert swing_speed(lifted, legs) == pytest.approx(np.sqrt(np.mean(dq**2))) and swing_speed(knots, legs) == 0.0


def test_contact_acceleration_noise_runs_the_python_solver_with_shaped_noise():
    """noise.contact_acceleration > 0: the config refuses the compiled backend and the soft model; 'auto' runs the
    Python solver, whose knots carry the constraint-shaped noise (information differs from the diagonal floor's)."""
    with pytest.raises(ConfigError, match="noise.contact_acceleration"):
        node_config({"noise.contact_acceleration": 30.0, "solver.backend": "compiled"})
    with pytest.raises(ConfigError, match="noise.contact_acceleration"):
        node_config({"noise.contact_acceleration": 30.0, "dynamics.model": "soft", "actuator.enabled": False})
    over = {"noise.contact_acceleration": 30.0, "estimator.window": 0.06, "estimator.tick_period": 0.02}
    feed = SensorFeed(node_config(over))
    out = first_estimates(feed, 2)
    assert type(feed.estimator.solver).__name__ == "MCOESolver" and out[-1].is_finite()
    knot = feed.estimator.solver.problem.knots[0]
    assert not np.allclose(knot.W, np.diag(np.diag(knot.W)))  # shaped by da/dw: not diagonal


def test_the_cold_arrival_prior_holds_roll_and_pitch_at_the_imu_orientations_tilt():
    """noise.arrival_tilt: a problem built from scratch starts at the IMU's orientation reading; its roll and pitch (the
    base's rotation about its own x and y, tangent entries 3 and 4) get that reading's tilt accuracy, the other
    configuration entries (position, yaw, joints: a gauge or the encoders) noise.arrival_position; 0 = the latter."""
    from mcoe_ros.estimation.estimator import Estimator

    robot = RobotModel()
    nv = robot.model.nv
    info = Estimator(EstimatorConfig(noise=NoiseConfig(arrival_tilt=0.02))).builder.arrival_info
    np.testing.assert_allclose(info[3:5], 0.02**-2.0)
    np.testing.assert_allclose(np.r_[info[:3], info[5:nv]], 0.05**-2.0)
    np.testing.assert_allclose(info[nv:], 0.5**-2.0)
    off = Estimator(EstimatorConfig(noise=NoiseConfig(arrival_tilt=0.0))).builder.arrival_info
    np.testing.assert_allclose(off[:nv], 0.05**-2.0)
    with pytest.raises(ConfigError, match="noise.arrival_tilt"):
        node_config({"noise.arrival_tilt": -0.1})
