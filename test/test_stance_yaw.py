"""The gyro's vertical bias from the settled stance feet (``imu_bias.stance_yaw``, StanceYaw).

Unit level: a robot standing still on a biased gyro (its feet fixed in the base frame, the base not turning): each
interval's measurement is the vertical bias against the b̂ it is given, whatever b̂ the gyro was corrected by; an
interval ends at its length, at the knot before a foot of its set lifts, and not across a gap; a short one gives
nothing. End to end: a realistic sway from the independent simulator (MuJoCo; seed 4 draws a vertical gyro bias of
+16.9 mrad/s, which the IMU's own attitude filter cannot see): the tracker learns it within its stated uncertainty, and
the published yaw error is a fraction of what it is without the stance feet.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.estimation.gyro_bias import StanceYaw
from mcoe_ros.estimation.samples import ImuSample, JointSample
from mcoe_ros.estimation.window import GridKnot
from mcoe_ros.multibody.robot import RobotModel

DT = 0.002
STAND = np.tile([0.0, 0.8, -1.6], 4)  # rad: hip, thigh, knee of each leg (Go1 standing)


@pytest.fixture(scope="module")
def robot() -> RobotModel:
    return RobotModel()


def _knot(t: float, gyro, used_bias, settled=(True,) * 4, start: bool = False) -> GridKnot:
    """A standing robot's knot: identity orientation, the gyro (3,) as corrected by ``used_bias`` (3,)."""
    joint = JointSample(t, STAND.copy(), np.zeros(12), np.zeros(12))
    quat, acc = np.array([1.0, 0.0, 0.0, 0.0]), np.array([0.0, 0.0, 9.81])
    imu = ImuSample(t, quat, np.asarray(gyro, float), acc, np.asarray(used_bias, float))
    return GridKnot(t, joint, imu, tuple(settled), np.zeros((4, 3)), tuple(settled), detector_start=start)


def test_a_standing_robot_measures_its_vertical_bias(robot):
    bias = np.array([0.004, -0.003, 0.017])  # rad/s, the sensor's
    used = np.array([0.0, 0.0, 0.005])  # what the gyro was corrected by
    now = np.array([0.0, 0.0, 0.008])  # the tracker's b̂ when the interval closes
    yaw = StanceYaw(robot, foot_speed=0.003, gyro_noise=1e-3, interval=0.5, dt=DT, rolling_radius=0.015)
    out = []
    for k in range(int(1.2 / DT) + 1):
        res = yaw.add(_knot(k * DT, bias - used, used), now)
        if res is not None:
            out.append((k * DT, res))
    assert [round(t, 3) for t, _ in out] == [0.5, 1.0]
    for _, (n, rate, var) in out:
        assert np.allclose(n, [0.0, 0.0, 1.0])
        assert rate == pytest.approx(bias[2] - now[2], abs=2e-5)  # the vertical bias, to second order in the turn
        assert 0.0 < var < 0.01**2  # four feet ~0.3 m apart: a few mrad/s
    # two diagonal feet see it too, with less information
    yaw2 = StanceYaw(robot, foot_speed=0.003, gyro_noise=1e-3, interval=0.5, dt=DT)
    diagonal = (True, False, False, True)
    res = [yaw2.add(_knot(k * DT, bias, np.zeros(3), diagonal), np.zeros(3)) for k in range(int(0.5 / DT) + 1)]
    (n, rate, var2) = res[-1]
    assert rate == pytest.approx(bias[2], abs=2e-5) and var2 > out[0][1][2]


def test_intervals_end_where_the_feet_or_the_data_do(robot):
    bias = np.array([0.0, 0.0, 0.01])
    yaw = StanceYaw(robot, foot_speed=0.003, gyro_noise=1e-3, interval=0.5, dt=DT)
    closed = []
    for k in range(int(1.0 / DT) + 1):
        t = k * DT
        settled = (t < 0.3 or t > 0.4, True, True, True)  # foot 0 lifts at 0.3 s: the set of four breaks
        res = yaw.add(_knot(t, bias, np.zeros(3), settled), np.zeros(3))
        if res is not None:
            closed.append(round(t, 3))
    # the four-foot interval ends at the knot before the lift (0.3 s, measured at 0.298); the three feet that stay
    # start a new one at 0.3 s that runs its full 0.5 s
    assert closed == [0.3, 0.8]
    assert yaw.intervals == 2
    # a gap or a detector restart drops the open interval; one shorter than min_interval gives nothing
    yaw = StanceYaw(robot, foot_speed=0.003, gyro_noise=1e-3, interval=0.5, dt=DT)
    got = [yaw.add(_knot(k * DT, bias, np.zeros(3)), np.zeros(3)) for k in range(100)]  # 0 .. 0.198 s
    got.append(yaw.add(_knot(0.3, bias, np.zeros(3)), np.zeros(3)))  # a 0.1 s gap
    got += [yaw.add(_knot(0.3 + k * DT, bias, np.zeros(3), start=k == 20), np.zeros(3)) for k in range(1, 40)]
    got += [yaw.add(_knot(0.38 + k * DT, bias, np.zeros(3), settled=(True, False, False, False)), np.zeros(3))]
    assert all(g is None for g in got)
    with pytest.raises(ValueError):
        StanceYaw(robot, foot_speed=0.0, gyro_noise=1e-3, interval=0.5, dt=DT)


@pytest.fixture(scope="module")
def sway_bag(tmp_path_factory) -> str:
    from mcoe_ros.sim.cli import main as sim_main

    path = str(tmp_path_factory.mktemp("stance_yaw") / "sway")
    argv = ["--scenario", "squat-sway:3", "--payload-mass", "5", "--realistic", "--seed", "4", "--out", path]
    assert sim_main(argv) == 0
    return path


def _yaw_errors(path: str, overrides: dict) -> tuple[np.ndarray, object]:
    """Second-half yaw errors (rad) of the published poses after the first pose's alignment, and the feed."""
    from mcoe_ros.apps.evaluate import aligned_pose_errors
    from mcoe_ros.io.bag import iter_messages, time_ns_of
    from mcoe_ros.testing.datasets import replay_with_truth

    estimates, _, feed = replay_with_truth(path, overrides)
    odom = []
    for _, _, msg in iter_messages(path, ["ground_truth/odom"]):
        p, o = msg.pose.pose.position, msg.pose.pose.orientation
        odom.append((time_ns_of(msg.header.stamp) * 1e-9, np.array([p.x, p.y, p.z]), np.array([o.x, o.y, o.z, o.w])))
    errors = [err[5] for _, err, _ in aligned_pose_errors([(e.t, e.position, e.quat_xyzw) for e in estimates], odom)]
    return np.array(errors[len(errors) // 2 :]), feed


def test_the_simulators_vertical_bias_is_learnt_and_the_yaw_follows(sway_bag):
    meta = json.load(open(os.path.join(sway_bag, "sim_metadata.json"), encoding="utf-8"))
    b_z = meta["gyro_bias_mean"][2]
    assert b_z > 0.012  # the draw this test is about (seed 4)
    on, feed = _yaw_errors(sway_bag, {})
    off, _ = _yaw_errors(sway_bag, {"imu_bias.stance_yaw": False})
    tracker = feed.estimator.gyro_tracker
    sd = np.sqrt(tracker.variance[2])
    assert abs(tracker.bias[2] - b_z) < 3.0 * sd and sd < 0.006  # learnt (prior: 0 ± 10 mrad/s)
    rms_on, rms_off = np.sqrt(np.mean(on**2)), np.sqrt(np.mean(off**2))
    assert rms_on < 0.5 * rms_off, (rms_on, rms_off)


def test_the_estimator_gives_the_window_the_learnt_heading_and_the_baselines_the_reading():
    from mcoe_ros.estimation.config import EstimatorConfig, ImuBiasConfig
    from mcoe_ros.estimation.estimator import Estimator
    from mcoe_ros.estimation.gyro_bias import _heading

    est = Estimator(EstimatorConfig())
    assert est.stance_yaw is not None
    assert Estimator(EstimatorConfig(imu_bias=ImuBiasConfig(stance_yaw=False))).stance_yaw is None
    half = 0.5 * 0.3  # a reading turned 0.3 rad about the vertical and tilted a little
    reading = np.array([np.cos(half), 0.01, -0.02, np.sin(half)])
    reading /= np.linalg.norm(reading)
    gyro, acc = np.zeros(3), np.array([0.0, 0.0, 9.81])
    assert est.add_imu(100.0, reading, gyro, acc)
    tracker = est.gyro_tracker
    tracker._rot = pin.exp3(np.array([0.0, 0.0, 0.05])) @ tracker._rot  # as if the feet had turned R̂ by 50 mrad
    assert est.add_imu(100.002, reading, gyro, acc)
    sample = est.window.imu.items[-1]
    assert sample.yaw_offset == pytest.approx(0.05, abs=1e-9)
    assert np.allclose(sample.raw_quat, reading, atol=1e-12)  # what a baseline gets: the sensor's reading
    w, x, y, z = sample.quat
    turned = pin.Quaternion(w, x, y, z).toRotationMatrix()
    w, x, y, z = reading
    rot = pin.Quaternion(w, x, y, z).toRotationMatrix()
    assert _heading(turned) - _heading(rot) == pytest.approx(0.05, abs=1e-9)
    assert np.allclose(turned[2], rot[2], atol=1e-12)  # the tilt is the reading's
    # a sensor gap restarts R̂ from the reading, turned by the heading offset learnt so far
    assert est.add_imu(101.0, reading, gyro, acc)
    assert tracker.heading_offset(rot) == pytest.approx(0.05, abs=1e-9)
    assert est.diagnostics().extra["stance_yaw_intervals"] == "0 fused, 0 rejected"


def test_the_turn_is_interpolated_the_short_way_across_pi():
    from mcoe_ros.estimation.samples import SampleStats, StampedBuffer, interp_imu, turned_about_vertical

    reading = np.array([np.cos(0.2), 0.0, 0.0, np.sin(0.2)])  # the sensor's, constant
    buf = StampedBuffer("imu", 1.0, SampleStats())
    for t, offset in ((0.0, 3.1), (0.002, -3.1)):  # the learnt turn crosses +π between two samples
        quat = turned_about_vertical(reading, offset)
        buf.push(ImuSample(t, quat, np.zeros(3), np.array([0.0, 0.0, 9.81]), np.zeros(3), offset))
    mid = interp_imu(buf, 0.001)
    assert abs(abs(mid.yaw_offset) - np.pi) < 1e-9
    assert np.allclose(mid.raw_quat, reading, atol=1e-9) or np.allclose(mid.raw_quat, -reading, atol=1e-9)
