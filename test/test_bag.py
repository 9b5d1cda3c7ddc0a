"""rosbag2 I/O (mcoe_ros.io.bag) and the committed sample bag, incl. decoding through the real rclpy interface."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import mcoe_ros
from mcoe_ros.io.bag import (
    BagWriter,
    bag_topics,
    header_msg,
    iter_messages,
    iter_raw,
    msg_class,
    time_msg,
    time_ns_of,
    typestore,
)
from mcoe_ros.multibody.robot import GO1_UNITREE_JOINT_ORDER

SAMPLE = os.path.join(os.path.dirname(mcoe_ros.__file__), "data", "go1_sample")


def test_typestore_has_unitree_types_under_both_names():
    store = typestore()
    for pkg in ("unitree_legged_msgs", "ros2_unitree_legged_msgs"):
        for name in ("LowState", "IMU", "MotorState", "BmsState"):
            assert f"{pkg}/msg/{name}" in store.types
    fields = [f[0] for f in store.fielddefs["unitree_legged_msgs/msg/LowState"][1]]
    assert fields[:3] == ["head", "level_flag", "frame_reserve"] and fields[-1] == "crc"
    assert "sensor_msgs/msg/Imu" in store.types and "geometry_msgs/msg/InertiaStamped" in store.types


def test_time_helpers():
    t = time_msg(12.25)
    assert (t.sec, t.nanosec) == (12, 250_000_000)
    assert time_ns_of(time_msg(1_700_000_000_123_456_789)) == 1_700_000_000_123_456_789
    h = header_msg(3.5, "odom")
    assert h.frame_id == "odom" and time_ns_of(h.stamp) == 3_500_000_000


@pytest.mark.parametrize("fmt", ["mcap", "sqlite3"])
def test_writer_reader_roundtrip_in_time_order(tmp_path, fmt):
    path = tmp_path / f"bag_{fmt}"
    vec = msg_class("geometry_msgs/msg/Vector3")
    with BagWriter(path, fmt) as bag:
        for k in range(5):  # interleaved topics, written in time order
            bag.write("a", "geometry_msgs/msg/Vector3", 1000 + 10 * k, vec(x=float(k), y=0.0, z=0.0))
            bag.write("b", "std_msgs/msg/Header", 1005 + 10 * k, header_msg(k * 1e-6, "f"))
    topics = bag_topics(path)
    assert topics["a"].msgtype == "geometry_msgs/msg/Vector3" and topics["a"].count == 5
    assert topics["b"].count == 5
    out = list(iter_messages(path))
    times = [t for _, t, _ in out]
    assert times == sorted(times) and len(out) == 10
    assert [m.x for topic, _, m in out if topic == "a"] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert [topic for topic, *_ in iter_raw(path, ["b"])] == ["b"] * 5
    assert list(iter_raw(path, ["missing"])) == []


def test_writer_rejects_bad_options(tmp_path):
    with pytest.raises(ValueError, match="format"):
        BagWriter(tmp_path / "x", "rosbag1")
    with pytest.raises(ValueError, match="mcap"):
        BagWriter(tmp_path / "y", "sqlite3", compression="zstd")


def test_sample_bag_is_small_and_documented():
    size = sum(os.path.getsize(os.path.join(SAMPLE, f)) for f in os.listdir(SAMPLE))
    assert size <= 5_000_000
    with open(os.path.join(SAMPLE, "sim_metadata.json"), encoding="utf-8") as fh:
        meta = json.load(fh)
    assert meta["payload"]["mass_kg"] == pytest.approx(7.2) and meta["seed"] == 0
    assert not meta["stats"]["fell"]
    assert os.path.isfile(os.path.join(SAMPLE, "README.md"))
    topics = bag_topics(SAMPLE)
    assert topics["low_state"].msgtype == "unitree_legged_msgs/msg/LowState"
    assert abs(topics["low_state"].count - meta["duration_s"] * meta["rates_hz"]["sensors"]) <= 1


def test_sample_low_state_decodes_in_rclpy_to_the_same_values():
    """CDR bytes written by rosbags deserialize through the real generated interface package."""
    serialization = pytest.importorskip("rclpy.serialization")
    unitree = pytest.importorskip("unitree_legged_msgs.msg")
    sensor_msgs = pytest.importorskip("sensor_msgs.msg")
    store = typestore()
    n = 0
    for topic, msgtype, _t, raw in iter_raw(SAMPLE, ["low_state", "imu/data"]):
        ours = store.deserialize_cdr(raw, msgtype)
        if topic == "low_state":
            theirs = serialization.deserialize_message(bytes(raw), unitree.LowState)
            assert list(theirs.head) == list(ours.head) and theirs.level_flag == ours.level_flag
            assert theirs.tick == ours.tick and theirs.crc == ours.crc
            np.testing.assert_array_equal(np.asarray(theirs.imu.quaternion, np.float32), ours.imu.quaternion)
            np.testing.assert_array_equal(np.asarray(theirs.imu.accelerometer, np.float32), ours.imu.accelerometer)
            np.testing.assert_array_equal(np.asarray(theirs.foot_force), ours.foot_force)
            assert len(theirs.motor_state) == 20
            for a, b in zip(theirs.motor_state, ours.motor_state, strict=True):
                assert (a.mode, a.temperature) == (b.mode, b.temperature)
                assert np.float32(a.q) == b.q and np.float32(a.dq) == b.dq and np.float32(a.tau_est) == b.tau_est
            assert list(theirs.bms.cell_vol) == list(ours.bms.cell_vol)
            # rclpy's own serialisation decodes back to our bytes (alignment padding content aside)
            again = serialization.serialize_message(theirs)
            assert len(again) == len(raw)
            assert bytes(store.serialize_cdr(store.deserialize_cdr(again, msgtype), msgtype)) == bytes(raw)
        else:
            theirs = serialization.deserialize_message(bytes(raw), sensor_msgs.Imu)
            assert theirs.header.frame_id == "imu_link"
            assert theirs.linear_acceleration.z == ours.linear_acceleration.z
            assert list(theirs.orientation_covariance) == list(ours.orientation_covariance)
        n += 1
        if n >= 40:
            break
    assert n == 40


def test_sample_low_state_matches_joint_states_by_name():
    joints = None
    lows = []
    for topic, t, msg in iter_messages(SAMPLE, ["low_state", "joint_states"]):
        if topic == "low_state":
            lows.append((t, msg))
        elif joints is None or len(joints) < 50:
            joints = (joints or []) + [(t, msg)]
        if joints is not None and len(joints) >= 50 and len(lows) >= 50:
            break
    by_time = dict(lows)
    for t, js in joints:
        low = by_time[t]
        for hw_idx, name in enumerate(GO1_UNITREE_JOINT_ORDER):
            j = list(js.name).index(name)
            assert low.motor_state[hw_idx].q == np.float32(js.position[j])
            assert low.motor_state[hw_idx].tau_est == np.float32(js.effort[j])
