"""Message -> sample conversions (duck-typed: the rosbags messages of the sample bag) and headerless stamping."""

import os
from types import SimpleNamespace

import numpy as np
import pytest

from mcoe_ros.estimation.samples import InvalidSample
from mcoe_ros.io.bag import iter_messages
from mcoe_ros.io.convert import HeaderlessStamper, JointStateMapper, low_state_arrays
from mcoe_ros.multibody.robot import RobotModel

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mcoe_ros", "data", "go1_sample")


def test_low_state_and_joint_state_agree_by_name():
    robot = RobotModel()
    msgs = {}
    for topic, _t, msg in iter_messages(SAMPLE, ["low_state", "joint_states"]):
        msgs.setdefault(topic, msg)
        if len(msgs) == 2:
            break
    q, dq, tau, quat, _gyro, acc, foot = low_state_arrays(msgs["low_state"], robot.joint_map, robot.foot_map)
    js = msgs["joint_states"]
    q2, dq2, tau2 = JointStateMapper(robot.joint_names).arrays(js.name, js.position, js.velocity, js.effort)
    np.testing.assert_allclose(q, q2, atol=1e-6)  # float32 on the LowState wire
    np.testing.assert_allclose(tau, tau2, atol=1e-5)
    assert abs(np.linalg.norm(quat) - 1) < 1e-6 and acc[2] > 9.0
    assert foot.shape == (4,) and np.all(foot > 10)  # squat-sway: every foot loaded


def test_joint_state_mapper_reorders_and_rejects():
    mapper = JointStateMapper(["a", "b", "c"])
    q, dq, tau = mapper.arrays(["c", "a", "b", "extra"], [3, 1, 2, 9], [30, 10, 20, 90], [0.3, 0.1, 0.2, 0.9])
    assert list(q) == [1, 2, 3] and list(dq) == [10, 20, 30] and list(tau) == [0.1, 0.2, 0.3]
    with pytest.raises(InvalidSample, match="lacks joints"):
        mapper.arrays(["a", "b"], [1, 2], [1, 2], [1, 2])
    with pytest.raises(InvalidSample, match="velocity has 2"):
        mapper.arrays(["a", "b", "c"], [1, 2, 3], [1, 2], [1, 2, 3])
    with pytest.raises(InvalidSample):
        low_state_arrays(SimpleNamespace(motor_state=[]), RobotModel().joint_map)


def test_headerless_stamper_fills_a_coarse_clock_and_follows_a_fine_one():
    st = HeaderlessStamper(0.002)
    # /clock at 40 Hz, messages at 500 Hz: 12-13 messages share one clock value
    true_t = 100.0 + 0.002 * np.arange(1, 500)
    coarse = np.floor(true_t / 0.025) * 0.025
    stamps = np.array([st(t) for t in coarse])
    assert np.all(np.diff(stamps) > 0)
    assert np.abs(stamps - true_t).max() < 0.03  # within one clock period of the truth
    fine = HeaderlessStamper(0.002)
    slow = 100.0 + 0.0025 * np.arange(400)  # a fine clock, messages slower than nominal: used as is
    np.testing.assert_array_equal([fine(t) for t in slow], slow)
    jittery = HeaderlessStamper(0.002)
    jitter = true_t + np.random.default_rng(0).uniform(0, 3e-4, true_t.size)
    stamps = np.array([jittery(t) for t in jitter])  # never closer than the period, never far from reception
    assert np.all(np.diff(stamps) >= 0.002 - 1e-12) and np.all((stamps - jitter >= 0) & (stamps - jitter < 5e-4))
    fast = HeaderlessStamper(0.002, max_lead=0.05)
    stamps = np.array([fast(100.0 + 0.001 * k) for k in range(400)])  # 1 kHz: stamps run ahead, then slow down
    assert fast.resyncs >= 1 and np.all(np.diff(stamps) > 0) and fast.last - (100.0 + 0.399) <= 0.05 + 0.002
    # a live publisher whose clock runs 0.02 % fast against the receiver's (500.1 Hz for 500 Hz), with 0.3 ms of
    # jitter: stamps at the nominal period run ahead of the reception time, 0.4 us per message (the session-6 soak's
    # -46 ms after 5 min). The default lead bound (50 ms, for /clock at 40 Hz) lets them reach it; the node's
    # wall-clock bound (mcoe_ros.ros.node.LIVE_STAMP_LEAD periods) keeps them within 2 periods
    n = 150_000  # 5 min at 500 Hz
    live_t = 100.0 + 0.002 / 1.0002 * np.arange(n) + np.random.default_rng(1).uniform(0, 3e-4, n)
    for lead, low, high in ((0.05, 0.04, 0.05 + 0.002), (0.004, 0.0, 0.004 + 0.002)):
        live = HeaderlessStamper(0.002, max_lead=lead)
        stamps = np.array([live(t) for t in live_t])
        ahead = stamps - live_t
        assert np.all(np.diff(stamps) > 0)
        assert low <= ahead[-1000:].max() <= high
    behind = HeaderlessStamper(0.002)  # a receiver that fell behind: stale clock for a burst, then catches up
    stamps = np.array([behind(t) for t in [10.0] * 100 + list(10.2 + 0.002 * np.arange(100))])
    assert np.all(np.diff(stamps) > 0)
