"""Memory layout of the compiled interval data (issue 16, robot memory): how many pinocchio::Data one knot's data
holds per phase kind, and that the Data shared within a call (M^-1 / regressor scratch, then the knot's kinematics)
leaves no state behind: a reused data gives the same results as a fresh one."""

from __future__ import annotations

import numpy as np
import pytest

from mcoe_ros.multibody import compiled
from mcoe_ros.multibody.actuator import ActuatorModel, ParameterLayout
from mcoe_ros.multibody.interval import IntervalModelCache
from mcoe_ros.multibody.measurements import (
    ImuAngularVelocity,
    ImuOrientation,
    ImuSpecificForce,
    JointPosition,
    JointVelocity,
)
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.testing.go1 import payload_pi, standing_state

pytestmark = pytest.mark.skipif(not compiled.available(), reason=f"extension not built: {compiled.IMPORT_ERROR}")

FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")


@pytest.fixture(scope="module")
def setup():
    robot = RobotModel()
    act = ActuatorModel(robot)
    layout = ParameterLayout(n_actuator=act.n_params, gyro_bias=True, acc_bias=True)
    meas = [
        JointPosition(robot, std=1e-3),
        JointVelocity(robot, std=0.05),
        ImuAngularVelocity(robot, std=0.01, bias=layout.gyro),
        ImuOrientation(robot, std=0.01),
        ImuSpecificForce(robot, std=0.1, bias=layout.acc),
    ]
    cache = IntervalModelCache(robot, 2e-3, meas, foot_velocity_std=0.02, actuator=act, layout=layout)
    cache_no_acc = IntervalModelCache(robot, 2e-3, meas[:4], foot_velocity_std=0.02, actuator=act, layout=layout)
    return robot, layout, cache, cache_no_acc


def _inputs(robot, layout, model, rng):
    x = standing_state(robot, rng)
    x[robot.nq :] = 0.3 * rng.standard_normal(robot.nv)
    pi = np.zeros(layout.size)
    pi[:10] = payload_pi()
    pi[layout.actuator] = rng.uniform(0.01, 0.1, layout.n_actuator)
    pi[layout.gyro] = 0.01 * rng.standard_normal(3)
    pi[layout.acc] = 0.1 * rng.standard_normal(3)
    return x, pi, rng.standard_normal(robot.nj) * 3.0, rng.standard_normal(model.nz)


@pytest.mark.parametrize(
    "contacts,impulse,with_acc,before,after",
    [
        ((), (), True, 2, 2),
        (FEET, (), True, 2, 2),
        (FEET, FEET, False, 3, 3),
        (FEET, FEET, True, 3, 4),  # the kinematics after the impulse (specific force) is allocated on first use
    ],
)
def test_pinocchio_datas_per_knot(setup, contacts, impulse, with_acc, before, after):
    robot, layout, cache, cache_no_acc = setup
    model = (cache if with_acc else cache_no_acc)[contacts, impulse, contacts]
    cmodel = compiled.compiled_interval_model(model)
    d = cmodel.create_data()
    assert d.pinocchio_datas == before
    x, pi, d.u, d.z = _inputs(robot, layout, model, np.random.default_rng(3))
    cmodel.calc_diff(d, x, pi)
    assert d.pinocchio_datas == after


@pytest.mark.parametrize(
    "phase",
    [((), ()), (FEET[:2], ()), (FEET, ()), (FEET, FEET)],
    ids=["free", "2 feet", "4 feet", "impulse"],
)
def test_reused_data_equals_fresh_data(setup, phase):
    """calc_diff / calc on a data used before at other states and parameters equals a fresh data's, bit for bit."""
    robot, layout, cache, _ = setup
    contacts, impulse = phase
    model = cache[contacts, impulse, contacts]
    cmodel = compiled.compiled_interval_model(model)
    rng = np.random.default_rng(11)
    used = cmodel.create_data()
    for _ in range(2):
        x, pi, used.u, used.z = _inputs(robot, layout, model, rng)
        cmodel.calc_diff(used, x, pi)
        cmodel.calc(used, x, pi)
    x, pi, u, z = _inputs(robot, layout, model, rng)
    for diff in (True, False):
        fresh = cmodel.create_data()
        for d in (used, fresh):
            d.u, d.z = u, z
            (cmodel.calc_diff if diff else cmodel.calc)(d, x, pi)
        names = ("xnext", "r", "Fx", "Fp", "Rx", "Rp") if diff else ("xnext", "r")
        for name in names:
            np.testing.assert_array_equal(getattr(used, name), getattr(fresh, name), err_msg=name)


@pytest.mark.parametrize("phase", [((), ()), (FEET, ()), (FEET, FEET)], ids=["free", "4 feet", "impulse"])
def test_reset_data_equals_fresh_data(setup, phase):
    """IntervalData.reset (the constructor's body) on a used data of the same model gives a fresh data's results bit
    for bit and keeps its pinocchio::Data (across contact sets it does not: Pinocchio keeps state in its Data)."""
    robot, layout, cache, _ = setup
    contacts, impulse = phase
    model = cache[contacts, impulse, contacts]
    cmodel = compiled.compiled_interval_model(model)
    rng = np.random.default_rng(5)
    used = cmodel.create_data()
    for _ in range(2):
        x, pi, used.u, used.z = _inputs(robot, layout, model, rng)
        cmodel.calc_diff(used, x, pi)
    held = used.pinocchio_datas
    used.reset(cmodel)
    assert used.pinocchio_datas == held
    assert not np.any(used.u) and not np.any(used.Fx)
    x, pi, u, z = _inputs(robot, layout, model, rng)
    fresh = cmodel.create_data()
    for d in (used, fresh):
        d.u, d.z = u, z
        cmodel.calc_diff(d, x, pi)
    for name in ("xnext", "r", "Fx", "Fp", "Rx", "Rp"):
        np.testing.assert_array_equal(getattr(used, name), getattr(fresh, name), err_msg=name)


@pytest.mark.parametrize("phase", [(FEET, ()), (FEET, FEET)], ids=["4 feet", "impulse"])
def test_reset_to_other_measurements_equals_fresh_data(setup, phase):
    """A data used with one model, reset to a model of the same phase with other measurements (other stance feet
    with a zero-velocity pseudo-measurement: what a shift recycles), gives that model's fresh data's results bit for
    bit."""
    robot, layout, cache, _ = setup
    contacts, impulse = phase
    before, after = cache[contacts, impulse, contacts], cache[contacts, impulse, contacts[:2]]
    c_before, c_after = compiled.compiled_interval_model(before), compiled.compiled_interval_model(after)
    rng = np.random.default_rng(7)
    used = c_before.create_data()
    for _ in range(2):
        x, pi, used.u, used.z = _inputs(robot, layout, before, rng)
        c_before.calc_diff(used, x, pi)
    used.reset(c_after)
    x, pi, u, z = _inputs(robot, layout, after, rng)
    fresh = c_after.create_data()
    for d in (used, fresh):
        d.u, d.z = u, z
        c_after.calc_diff(d, x, pi)
    for name in ("xnext", "r", "Fx", "Fp", "Rx", "Rp"):
        np.testing.assert_array_equal(getattr(used, name), getattr(fresh, name), err_msg=name)
