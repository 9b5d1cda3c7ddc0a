"""Real ROS 2 graph: the project's Unitree LowState built from its .msg files crosses Fast DDS."""

import time

import pytest

rclpy = pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (run .ci/setup-env)")
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from unitree_legged_msgs.msg import LowState  # noqa: E402


def test_lowstate_published_by_one_node_is_received_by_another():
    ctx = rclpy.context.Context()
    rclpy.init(context=ctx)
    try:
        talker = rclpy.create_node("fake_unitree_bridge", context=ctx)
        listener = rclpy.create_node("listener", context=ctx)
        # the Unitree bridge publishes reliable, depth 1
        pub = talker.create_publisher(
            LowState, "low_state", QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
        )
        got = []
        listener.create_subscription(LowState, "low_state", got.append, 10)
        executor = rclpy.executors.SingleThreadedExecutor(context=ctx)
        executor.add_node(talker)
        executor.add_node(listener)
        msg = LowState()
        msg.tick = 1234
        msg.imu.quaternion = [1.0, 0.0, 0.0, 0.0]
        msg.imu.accelerometer = [0.0, 0.0, 9.81]
        msg.motor_state[3].q = 0.25  # FL_hip in Unitree order
        msg.motor_state[11].tau_est = -3.5
        msg.foot_force = [10, 20, 30, 40]
        deadline = time.monotonic() + 20.0
        while not got and time.monotonic() < deadline:
            pub.publish(msg)
            executor.spin_once(timeout_sec=0.05)
        assert got, "no LowState received within 20 s"
        rx = got[0]
        assert rx.tick == 1234 and list(rx.foot_force) == [10, 20, 30, 40]
        assert abs(rx.motor_state[3].q - 0.25) < 1e-7 and abs(rx.motor_state[11].tau_est + 3.5) < 1e-7
        assert abs(rx.imu.accelerometer[2] - 9.81) < 1e-5
        assert len(rx.motor_state) == 20
        executor.shutdown()
        talker.destroy_node()
        listener.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)
