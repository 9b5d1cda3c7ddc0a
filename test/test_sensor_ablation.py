"""benchmarks/sensor_ablation.py: the rows' noise fields and the errors-in-variables check's cost."""

import os

import numpy as np
import pytest

from mcoe_ros.multibody.inertia import pi_from_com
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.sim.sensors import REALISTIC_NOISE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def ablation(benchmark_module):
    return benchmark_module("sensor_ablation")


def test_rows_cover_every_noise_field_once(ablation):
    assert set(ablation.row_fields("all")) == set(REALISTIC_NOISE.as_dict())
    assert ablation.row_fields("clean") == ()
    rest = set(ablation.row_fields("all-but-torque"))
    assert rest == set(REALISTIC_NOISE.as_dict()) - set(ablation.TORQUE_FIELDS)
    with pytest.raises(ValueError):
        ablation.row_fields("nonsense")
    assert ablation.row_fields("tau_std+acc_std") == ("tau_std", "acc_std")
    with pytest.raises(ValueError):
        ablation.row_fields("tau_std+nonsense")


def test_torque_noise_cost_falls_for_a_heavier_body(ablation):
    """The errors-in-variables argument: the residuals' sensitivity to torque noise falls as the payload's inertia
    grows (da/dτ shrinks), and it is not a constant."""
    robot = RobotModel()
    q = np.tile(robot.neutral()[7:], (3, 1))
    q[:, 1::3] = 0.8  # thighs
    q[:, 2::3] = -1.6  # calves: a standing posture
    light = pi_from_com(5.0, np.array([0.06, -0.03, 0.06]), np.diag([0.02, 0.04, 0.05]))
    heavy = pi_from_com(5.0, np.array([0.06, -0.03, 0.06]), np.diag([0.2, 0.4, 0.5]))
    e_light = ablation.torque_noise_cost(robot, q, light, step=1)
    e_heavy = ablation.torque_noise_cost(robot, q, heavy, step=1)
    assert e_light > 0.0
    assert e_heavy < 0.8 * e_light
