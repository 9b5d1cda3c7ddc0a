"""robot.foot_contact_offset: the feet's contact point at the bottom of the round foot (docs/localisation.md,
session 19) -- frames, geometry, config errors, and the compiled interval model on it."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.io.params import ConfigError, node_config
from mcoe_ros.multibody import compiled
from mcoe_ros.multibody.actuator import ActuatorModel, ParameterLayout
from mcoe_ros.multibody.interval import IntervalModelCache
from mcoe_ros.multibody.measurements import ImuSpecificForce, JointPosition, JointVelocity
from mcoe_ros.multibody.robot import GO1_FOOT_SOLE, RobotModel, RobotSpec
from mcoe_ros.testing.go1 import payload_pi, standing_state

SOLE = GO1_FOOT_SOLE


def test_zero_offset_keeps_the_foot_frames():
    robot = RobotModel()
    assert [robot.model.frames[f].name for f in robot.foot_frame_ids] == list(robot.foot_names)
    assert not any(robot.model.existFrame(f"{name}_contact") for name in robot.foot_names)


def test_offset_adds_a_contact_frame_per_foot_at_the_bottom_of_the_sphere():
    plain, robot = RobotModel(), RobotModel(RobotSpec(foot_contact_offset=SOLE))
    assert robot.model.nframes == plain.model.nframes + 4 and robot.foot_names == plain.foot_names
    data = robot.model.createData()
    x = standing_state(robot, np.random.default_rng(0))
    x[3:7] = [0.0, 0.0, 0.0, 1.0]  # level trunk: the calves at their stance pitch
    pin.framesForwardKinematics(robot.model, data, x[: robot.nq])
    for name, fid, foot in zip(robot.foot_names, robot.foot_frame_ids, plain.foot_frame_ids, strict=True):
        frame = robot.model.frames[fid]
        assert frame.name == f"{name}_contact" and frame.parentJoint == plain.model.frames[foot].parentJoint
        centre = data.oMf[foot].translation
        np.testing.assert_allclose(
            robot.model.frames[fid].placement.translation,
            (plain.model.frames[foot].placement * pin.SE3(np.eye(3), np.array(SOLE))).translation,
        )
        # the material point the sphere rolls on: a foot radius straight below the centre (within the stance pitch's
        # spread, a few degrees)
        sole = data.oMf[fid].translation
        assert np.linalg.norm(sole - (centre - np.array([0.0, 0.0, 0.02]))) < 3e-3


@pytest.mark.parametrize("bad", [(0.0, 0.01), (0.0, float("nan"), 0.0)])
def test_a_bad_offset_is_an_error(bad):
    with pytest.raises(ValueError, match="foot contact offset"):
        RobotModel(RobotSpec(foot_contact_offset=bad))


def test_config_bounds_name_the_parameter():
    sole = node_config({"robot.foot_contact_offset": list(SOLE), "dynamics.rolling_radius": 0.0})
    assert tuple(sole.estimator.robot.foot_contact_offset) == SOLE
    with pytest.raises(ConfigError, match="dynamics.rolling_radius"):  # the default rolls the feet
        node_config({"robot.foot_contact_offset": list(SOLE)})
    for bad in ([0.0, 0.0, -0.5], [0.0, -0.01]):
        with pytest.raises(ConfigError, match="robot.foot_contact_offset"):
            node_config({"robot.foot_contact_offset": bad})


@pytest.mark.skipif(not compiled.available(), reason=f"extension not built: {compiled.IMPORT_ERROR}")
def test_compiled_model_on_the_contact_points_matches_python():
    """The C++ robot is built from the serialised model, so it has the contact frames: the interval model of a
    stance on the contact points gives the Python model's results to 1e-9, and differs from the foot frames'."""
    rng = np.random.default_rng(5)
    outs = []
    for spec in (RobotSpec(foot_contact_offset=SOLE), RobotSpec()):
        robot = RobotModel(spec)
        act = ActuatorModel(robot)
        layout = ParameterLayout(n_actuator=act.n_params)
        meas = [JointPosition(robot, std=1e-3), JointVelocity(robot, std=0.05), ImuSpecificForce(robot, std=0.1)]
        cache = IntervalModelCache(robot, 2e-3, meas, foot_velocity_std=0.02, actuator=act, layout=layout, kd=25.0)
        feet = tuple(robot.foot_names)
        model = cache[feet, (), feet[:2], feet[2:]]
        cmodel = compiled.compiled_interval_model(model)
        d, cd = model.create_data(), cmodel.create_data()
        if not outs:
            x = standing_state(robot, rng)
            x[robot.nq :] = 0.3 * rng.standard_normal(robot.nv)
            pi = np.zeros(layout.size)
            pi[:10] = payload_pi()
            pi[layout.actuator] = rng.uniform(0.01, 0.1, layout.n_actuator)
            u, z = rng.standard_normal(robot.nj) * 3.0, rng.standard_normal(model.nz)
        d.u[:] = cd.u = u
        d.z[:] = cd.z = z
        model.calc_diff(d, x, pi)
        cmodel.calc_diff(cd, x, pi)
        for name in ("xnext", "r", "Fx", "Fp", "Rx", "Rp"):
            np.testing.assert_allclose(getattr(cd, name), getattr(d, name), rtol=0, atol=1e-9)
        outs.append(d.xnext.copy())
    assert np.abs(outs[0] - outs[1]).max() > 1e-6  # the contact point matters
