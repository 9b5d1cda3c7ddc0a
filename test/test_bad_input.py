"""Bad input never crashes the estimator or the node, is counted, and never turns into NaN output."""

import math
import time

import numpy as np
import pytest

from mcoe_ros.io.bag import iter_messages
from mcoe_ros.io.convert import low_state_arrays
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import node_config
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.testing.data import SAMPLE_BAG
from mcoe_ros.testing.spin import SpinThread

FAST = {"estimator.window": 0.04, "estimator.tick_period": 0.02, "solver.max_iterations": 1}


@pytest.fixture(scope="module")
def samples():
    """First 0.6 s of the sample bag as (t, q, dq, tau, quat, gyro, acc) in model order (arrays to corrupt)."""
    robot = RobotModel()
    out = []
    for _topic, t_ns, msg in iter_messages(SAMPLE_BAG, ["low_state"]):
        q, dq, tau, quat, gyro, acc, _ = low_state_arrays(msg, robot.joint_map)
        out.append((t_ns * 1e-9, q, dq, tau, quat, gyro, acc))
        if len(out) >= 300:
            break
    return out


def _feed(est, s, t=None, **override):
    """One (possibly corrupted) sample into the estimator core, then its due tick."""
    t0, q, dq, tau, quat, gyro, acc = s
    t = t0 if t is None else t
    v = {"q": q, "dq": dq, "tau": tau, "quat": quat, "gyro": gyro, "acc": acc, **override}
    est.add_imu(t, v["quat"], v["gyro"], v["acc"])
    est.add_joints(t, v["q"], v["dq"], v["tau"])
    return est.poll()


def test_each_fault_class_is_counted_and_outputs_stay_finite(samples):
    feed = SensorFeed(node_config(FAST))
    est = feed.estimator
    outs = []
    nan_q = samples[0][1].copy()
    nan_q[2] = np.nan
    for i, s in enumerate(samples[:150]):
        outs += _feed(est, s)
        if i == 60:
            outs += _feed(est, samples[i + 1], q=nan_q)  # NaN joint angle
            outs += _feed(est, samples[i + 1], gyro=np.array([np.inf, 0, 0]))  # Inf gyro
            est.add_joints(s[0] - 0.01, s[1], s[2], s[3])  # out of order
            est.add_joints(s[0], s[1], s[2], s[3])  # duplicate stamp
            est.add_joints(s[0] + 1e-4, s[1][:11], s[2], s[3])  # wrong size
            est.add_imu(s[0] + 1e-4, 1.05 * s[4], s[5], s[6])  # unnormalised (repaired)
            est.add_imu(s[0] + 2e-4, 0.2 * s[4], s[5], s[6])  # far from unit norm (rejected)
    # a gap longer than max_gap: stamps jump by 1 s
    for s in samples[150:300]:
        outs += _feed(est, s, t=s[0] + 1.0)
    stats = feed.sample_stats
    for reason in ("non_finite", "out_of_order", "duplicate_stamp", "wrong_size", "bad_quaternion", "gap"):
        assert stats.rejected[reason] >= 1, (reason, dict(stats.rejected))
    assert stats.repaired["unnormalised_quaternion"] >= 1
    assert est.window.restarts >= 1
    assert outs and all(e.is_finite() for e in outs)
    assert outs[-1].t > samples[150][0] + 1.0  # estimates resumed after the gap
    diag = feed.diagnostics()
    values = diag.key_values()
    # counted with their reasons (the last detail of each kept); the level describes the present, recovered state
    assert diag.level == 0 and values["samples_rejected"] == stats.n_rejected and values["rejected_gap"] >= 1
    assert "silent for" in values["last_gap"] and "NaN" in values["last_non_finite"]


def test_node_survives_bad_messages_and_publishes_no_nan(samples):
    rclpy = pytest.importorskip("rclpy", reason="ROS 2 wheels not installed")
    from diagnostic_msgs.msg import DiagnosticArray
    from nav_msgs.msg import Odometry
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import Imu, JointState

    from mcoe_ros.ros.node import LIVE_STAMP_LEAD, EstimatorNode

    ctx = rclpy.context.Context()
    rclpy.init(context=ctx)
    overrides = [Parameter(k, value=v) for k, v in FAST.items()]
    overrides += [Parameter("input.mode", value="joint_states"), Parameter("output.diagnostics_period", value=0.2)]
    node = EstimatorNode(context=ctx, parameter_overrides=overrides)
    # wall clock (no use_sim_time): headerless stamps may lead the reception time by 2 periods, not 50 ms
    assert node.feed.stamper.max_lead == LIVE_STAMP_LEAD * node.config.input.low_state_period
    peer = rclpy.create_node("peer", context=ctx)
    pub_j = peer.create_publisher(JointState, "/joint_states", 100)
    pub_i = peer.create_publisher(Imu, "/imu/data", 100)
    odoms, diags = [], []
    peer.create_subscription(Odometry, "odom", odoms.append, 100)
    peer.create_subscription(DiagnosticArray, "/diagnostics", diags.append, 100)
    executor = rclpy.executors.MultiThreadedExecutor(context=ctx)
    executor.add_node(node)
    executor.add_node(peer)
    spinner = SpinThread(executor)
    names = node.feed.estimator.robot.joint_names

    def send(t, q, dq, tau, quat, gyro, acc, names_=names):
        js = JointState()
        js.header.stamp.sec, js.header.stamp.nanosec = int(t), int(round((t % 1) * 1e9)) % 1_000_000_000
        js.name, js.position, js.velocity, js.effort = list(names_), list(q), list(dq), list(tau)
        imu = Imu()
        imu.header.stamp = js.header.stamp
        imu.orientation.w, imu.orientation.x, imu.orientation.y, imu.orientation.z = (float(c) for c in quat)
        imu.angular_velocity.x, imu.angular_velocity.y, imu.angular_velocity.z = (float(c) for c in gyro)
        imu.linear_acceleration.x, imu.linear_acceleration.y, imu.linear_acceleration.z = (float(c) for c in acc)
        pub_j.publish(js)
        pub_i.publish(imu)

    try:
        deadline = time.monotonic() + 20
        while not (pub_j.get_subscription_count() and pub_i.get_subscription_count()) and time.monotonic() < deadline:
            time.sleep(0.05)

        def ticks() -> int:
            return int({v.key: v.value for d in diags[-1:] for s in d.status for v in s.values}.get("ticks", 0))

        for i, (t, q, dq, tau, quat, gyro, acc) in enumerate(samples[:200]):
            if i == 150:  # the first solve done before the rest (a loaded machine's cold solve outlasts 0.1 s of input)
                deadline = time.monotonic() + 30
                while ticks() < 1 and time.monotonic() < deadline:
                    time.sleep(0.05)
            send(t, q, dq, tau, quat, gyro, acc)
            if i == 80:
                send(t + 1e-4, np.full(12, np.nan), dq, tau, quat, gyro, acc)  # NaN
                send(t - 0.05, q, dq, tau, quat, gyro, acc)  # out of order
                send(t, q, dq, tau, quat, gyro, acc)  # duplicate
                send(t + 2e-4, q, dq, tau, quat, gyro, acc, names_=names[:11])  # wrong size (missing joint)
                send(t + 3e-4, q, dq, tau, 1.04 * quat, gyro, acc)  # unnormalised quaternion
            time.sleep(0.002)
        for t, q, dq, tau, quat, gyro, acc in samples[200:300]:  # after a 1 s gap
            send(t + 1.0, q, dq, tau, quat, gyro, acc)
            time.sleep(0.002)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            vals = {v.key: v.value for d in diags[-1:] for s in d.status for v in s.values}
            if int(vals.get("rejected_gap", 0)) >= 1 and int(vals.get("ticks", 0)) >= 3:
                break
            time.sleep(0.1)
    finally:
        spinner.stop()
        node.destroy_node()
        peer.destroy_node()
        rclpy.shutdown(context=ctx)
    vals = {v.key: v.value for v in diags[-1].status[0].values}
    for reason in ("non_finite", "out_of_order", "duplicate_stamp", "wrong_size", "gap"):
        assert int(vals.get(f"rejected_{reason}", 0)) >= 1, (reason, vals)
    assert int(vals["samples_repaired"]) >= 1
    assert odoms, "no odometry published"
    for o in odoms:
        p = o.pose.pose.position
        assert all(math.isfinite(x) for x in (p.x, p.y, p.z, *o.pose.covariance, *o.twist.covariance))
