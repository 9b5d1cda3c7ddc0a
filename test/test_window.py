"""Sliding window: resampling onto the grid, contact flags per knot, gap restarts."""

import numpy as np
import pytest

from mcoe_ros.estimation.samples import validate_imu, validate_joint
from mcoe_ros.estimation.window import SlidingWindow
from mcoe_ros.multibody.contact import ContactDetector
from mcoe_ros.multibody.robot import RobotModel


@pytest.fixture(scope="module")
def robot():
    return RobotModel()


def _feed(win, t, q=None, tau=None):
    q = np.tile([0.0, 0.8, -1.6], 4) if q is None else q
    tau = np.zeros(12) if tau is None else tau
    win.push_joint(validate_joint(t, q, np.zeros(12), tau, 12))
    win.push_imu(validate_imu(t, [1.0, 0, 0, 0], np.zeros(3), [0, 0, 9.81])[0])


def test_grid_is_aligned_uniform_and_bounded(robot):
    win = SlidingWindow(ContactDetector(robot), 0.002, 50, 0.1)
    stats = win.stats
    rng = np.random.default_rng(0)
    t = 0.0011
    while t < 0.3:
        _feed(win, t)
        win.advance()
        t += 0.002 + rng.uniform(-3e-4, 3e-4)  # jittered 500 Hz stream
    times = np.array([n.t for n in win.knots])
    assert win.full and len(times) == 50
    np.testing.assert_allclose(np.diff(times), 0.002, atol=1e-12)
    assert np.allclose(times / 0.002, np.round(times / 0.002), atol=1e-6)
    assert times[-1] <= win.joints.last_t
    assert stats.n_rejected == 0


def test_interpolated_values_and_contacts_from_torques(robot):
    from test_contact import _standing  # same helper: torques that hold the robot on given feet

    q, tau, _ = _standing(robot, [0, 3])  # FL and RR in stance
    win = SlidingWindow(ContactDetector(robot), 0.002, 100, 0.1)
    for i in range(60):
        _feed(win, 0.001 + 0.002 * i, q[7:] + 1e-3 * i, tau)
        win.advance()
    last = win.knots[-1]
    assert last.contacts == (True, False, False, True)
    k = round((last.t - 0.001) / 0.002)  # the node lies halfway between samples k and k+1
    np.testing.assert_allclose(last.joint.q, q[7:] + 1e-3 * (k + 0.5), atol=1e-12)


def test_gap_longer_than_max_gap_restarts_and_is_counted(robot):
    win = SlidingWindow(ContactDetector(robot), 0.002, 100, 0.05)
    stats = win.stats
    for i in range(40):
        _feed(win, 0.002 * i)
        win.advance()
    assert len(win.knots) > 30
    _feed(win, 0.002 * 40 + 0.2)  # 0.2 s silence
    win.advance()
    assert stats.rejected["gap"] >= 1 and len(win.knots) <= 1 and win.restarts == 1
    for i in range(41, 80):
        _feed(win, 0.002 * i + 0.2)
        win.advance()
    assert len(win.knots) > 30
