"""The in-place CDR reading and writing of mcoe_ros.io.cdr against rclpy's own (de)serialisation: recorded LowState
messages, random values in every field, the other byte order, and the types that have no fixed layout."""

import struct

import numpy as np
import pytest
from nav_msgs.msg import Odometry
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import JointState
from unitree_legged_msgs.msg import LowState

from mcoe_ros.estimation.samples import InvalidSample
from mcoe_ros.io.bag import bag_topics, iter_raw
from mcoe_ros.io.cdr import HEADER, CdrLayout, CdrReader, UnsupportedLayout
from mcoe_ros.io.convert import LowStateDecoder, low_state_arrays
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.testing.data import SAMPLE_BAG


@pytest.fixture(scope="module")
def robot():
    return RobotModel()


def _random_low_state(rng) -> LowState:
    """A LowState with random values in every field (so a wrong offset reads a wrong number)."""
    msg = LowState()
    msg.head = rng.integers(0, 256, 2).astype(np.uint8).tolist()
    msg.level_flag, msg.frame_reserve = int(rng.integers(256)), int(rng.integers(256))
    msg.sn = rng.integers(0, 2**32, 2).tolist()
    msg.band_width = int(rng.integers(2**16))
    msg.imu.quaternion = rng.normal(size=4).astype(np.float32)
    msg.imu.gyroscope, msg.imu.accelerometer = rng.normal(size=(2, 3)).astype(np.float32)
    msg.imu.temperature = int(rng.integers(-128, 128))
    for m in msg.motor_state:
        m.mode, m.temperature = int(rng.integers(256)), int(rng.integers(-128, 128))
        m.q, m.dq, m.ddq, m.tau_est, m.q_raw = (float(v) for v in rng.normal(size=5).astype(np.float32))
    msg.bms.current = int(rng.integers(-(2**31), 2**31))
    msg.foot_force = rng.integers(-(2**15), 2**15, 4).astype(np.int16)
    msg.tick = int(rng.integers(2**32))
    return msg


def test_low_state_decoder_equals_deserialisation_on_recorded_and_random_messages(robot):
    decoder = LowStateDecoder(LowState, robot.joint_map, robot.foot_map)
    topic = next(name for name, info in bag_topics(SAMPLE_BAG).items() if info.msgtype.endswith("LowState"))
    raws = [raw for *_, raw in iter_raw(SAMPLE_BAG, [topic])][:300]
    rng = np.random.default_rng(0)
    raws += [serialize_message(_random_low_state(rng)) for _ in range(200)]
    for raw in raws:
        assert decoder.check(raw, deserialize_message(raw, LowState)) is None
    q, dq, tau, quat, gyro, acc, feet = decoder.arrays(raws[-1])
    assert q.shape == dq.shape == tau.shape == (12,) and quat.shape == (4,) and feet.shape == (4,)
    assert q.dtype == np.float64 and feet.dtype == np.float64


def test_a_wrong_offset_would_be_caught(robot):
    """The check compares every array: reading the joint velocities where the angles are is detected."""
    decoder = LowStateDecoder(LowState, robot.joint_map, robot.foot_map)
    raw = serialize_message(_random_low_state(np.random.default_rng(1)))
    other = _random_low_state(np.random.default_rng(2))
    assert decoder.check(raw, other) == "q"


def test_big_endian_payload_reads_the_same_numbers():
    layout = CdrLayout(LowState)
    reader = CdrReader(layout, {"f": ["motor_state[3].q", "imu.gyroscope"], "i": ["foot_force"]})
    values = {"motor_state[3].q": [0.25], "imu.gyroscope": [1.5, -2.0, 3.25], "foot_force": [1, -2, 300, -4000]}
    buffers = []
    for order, flag in (("<", 1), (">", 0)):
        buf = layout.template(little_endian=flag == 1)
        for path, vals in values.items():
            f = layout.fields[path]
            for i, v in enumerate(vals):
                struct.pack_into(order + ("f" if f.kind == "f" else "h"), buf, HEADER + f.offset + i * f.size, v)
        buffers.append(bytes(buf))
    little, big = (reader.read(b) for b in buffers)
    for a, b in zip(little, big, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(little[0], [0.25, 1.5, -2.0, 3.25])
    np.testing.assert_array_equal(little[1], [1, -2, 300, -4000])
    # the little-endian template is what rclpy writes for a zero message
    assert deserialize_message(buffers[0], LowState).motor_state[3].q == 0.25


def test_short_or_foreign_bytes_are_rejected(robot):
    decoder = LowStateDecoder(LowState, robot.joint_map, robot.foot_map)
    raw = serialize_message(LowState())
    for bad in (raw[:100], b"", b"\x07\x07" + raw[2:]):
        with pytest.raises(InvalidSample) as err:
            decoder.arrays(bad)
        assert err.value.reason == "wrong_size"


def test_types_without_a_fixed_layout_are_refused():
    with pytest.raises(UnsupportedLayout):
        CdrLayout(JointState, {"header.frame_id": "x"})  # sequences
    with pytest.raises(UnsupportedLayout):
        CdrLayout(Odometry)  # strings of unknown value
    with pytest.raises(ValueError):
        CdrLayout(Odometry, {"header.frame_id": "odom", "child_frame_id": "base", "nope": "x"})


def test_odometry_layout_with_fixed_frames_matches_rclpy():
    msg = Odometry()
    msg.header.frame_id, msg.child_frame_id = "odom", "trunk"
    msg.pose.pose.orientation.w = 0.0
    layout = CdrLayout(Odometry, {"header.frame_id": "odom", "child_frame_id": "trunk"})
    # equal up to the padding bytes (rclpy's serialiser leaves them uninitialised)
    assert len(layout.template()) == len(serialize_message(msg))
    assert deserialize_message(bytes(layout.template()), Odometry) == msg


def test_low_state_arrays_of_the_message_object_are_the_reference(robot):
    """The decoder's reference path (rclpy message objects) is the converter the replay uses."""
    msg = _random_low_state(np.random.default_rng(5))
    q = low_state_arrays(msg, robot.joint_map, robot.foot_map)[0]
    assert q[0] == np.float32(msg.motor_state[robot.joint_map.hw_to_model[0]].q)
