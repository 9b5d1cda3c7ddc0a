"""Sensor messages -> arrays in the model's joint order (duck-typed: rclpy and rosbags messages alike).

Unitree LowState: hardware motor order mapped by joint name, IMU quaternion (w, x, y, z), no header.
sensor_msgs/JointState: matched by joint name. sensor_msgs/Imu: quaternion (x, y, z, w).
"""

from __future__ import annotations

import numpy as np

from mcoe_ros.estimation.samples import InvalidSample
from mcoe_ros.io.cdr import CdrLayout, CdrReader, UnsupportedLayout
from mcoe_ros.multibody.robot import JointMap


def low_state_arrays(msg, joint_map: JointMap, foot_map: JointMap | None = None):
    """(q, dq, tau) in model order, (quat_wxyz, gyro, acc), foot_force (model foot order if foot_map) from LowState."""
    n = len(joint_map.hw_names)
    motors = msg.motor_state
    if len(motors) < n:
        raise InvalidSample("wrong_size", f"LowState has {len(motors)} motors, expected at least {n}")
    q = np.fromiter((motors[i].q for i in range(n)), float, n)
    dq = np.fromiter((motors[i].dq for i in range(n)), float, n)
    tau = np.fromiter((motors[i].tau_est for i in range(n)), float, n)
    imu = msg.imu
    return (
        joint_map.to_model(q),
        joint_map.to_model(dq),
        joint_map.to_model(tau),
        np.asarray(imu.quaternion, float),
        np.asarray(imu.gyroscope, float),
        np.asarray(imu.accelerometer, float),
        np.asarray(msg.foot_force, float) if foot_map is None else foot_map.to_model(np.asarray(msg.foot_force, float)),
    )


class LowStateDecoder:
    """Unitree LowState CDR bytes (a ``raw=True`` subscription) -> the arrays of :func:`low_state_arrays`, without
    building the message object (see :mod:`mcoe_ros.io.cdr`: ~20x cheaper than deserialising it and reading it back).

    ``msg_class`` is the LowState class of the interface package in use (its layout is computed from its own
    definition; :class:`~mcoe_ros.io.cdr.UnsupportedLayout` if it has variable-length fields). :meth:`check` compares
    the decoded arrays with those of the deserialised message (the caller deserialises: rclpy is not imported here).
    """

    def __init__(self, msg_class, joint_map: JointMap, foot_map: JointMap | None = None):
        self.joint_map, self.foot_map = joint_map, foot_map
        layout = CdrLayout(msg_class)
        n = len(joint_map.hw_names)
        if f"motor_state[{n - 1}].q" not in layout.fields:
            raise UnsupportedLayout(f"{msg_class.__name__} has fewer than {n} motors")
        motors = [f"motor_state[{i}].{name}" for name in ("q", "dq", "tau_est") for i in range(n)]
        self._n = n
        self._reader = CdrReader(
            layout,
            {"float32": motors + ["imu.quaternion", "imu.gyroscope", "imu.accelerometer"], "int16": ["foot_force"]},
        )

    def arrays(self, raw):
        """(q, dq, tau) in model order, (quat_wxyz, gyro, acc), foot_force (model foot order if a foot map) from
        one serialised LowState; InvalidSample('wrong_size') if the bytes are not one."""
        try:
            floats, feet = self._reader.read(raw)
        except ValueError as err:
            raise InvalidSample("wrong_size", str(err)) from None
        n, idx = self._n, self.joint_map.hw_to_model
        return (
            floats[idx],
            floats[n + idx],
            floats[2 * n + idx],
            floats[3 * n : 3 * n + 4],
            floats[3 * n + 4 : 3 * n + 7],
            floats[3 * n + 7 : 3 * n + 10],
            feet if self.foot_map is None else self.foot_map.to_model(feet),
        )

    def check(self, raw, msg) -> str | None:
        """None if :meth:`arrays` of ``raw`` equals :func:`low_state_arrays` of its deserialised message ``msg``,
        else which array differs."""
        names = ("q", "dq", "tau", "quaternion", "gyroscope", "accelerometer", "foot_force")
        mine = self.arrays(raw)
        reference = low_state_arrays(msg, self.joint_map, self.foot_map)
        for name, a, b in zip(names, mine, reference, strict=True):
            if a.shape != b.shape or not np.array_equal(a, b):
                return name
        return None


class JointStateMapper:
    """Reorders sensor_msgs/JointState arrays into the model's joint order by name (cached per name list)."""

    def __init__(self, model_names: list[str]):
        self.model_names = list(model_names)
        self._key: tuple = ()
        self._idx = np.zeros(0, dtype=int)

    def arrays(self, names, position, velocity, effort):
        key = tuple(names)
        if key != self._key:
            missing = [n for n in self.model_names if n not in key]
            if missing:
                raise InvalidSample("wrong_size", f"JointState lacks joints {missing}")
            self._key, self._idx = key, np.array([key.index(n) for n in self.model_names])
        n = len(key)
        for label, arr in (("position", position), ("velocity", velocity), ("effort", effort)):
            if len(arr) != n:
                raise InvalidSample("wrong_size", f"JointState {label} has {len(arr)} entries for {n} names")
        idx = self._idx
        return np.asarray(position, float)[idx], np.asarray(velocity, float)[idx], np.asarray(effort, float)[idx]


def imu_arrays(msg):
    """(quat_wxyz, gyro, acc) from sensor_msgs/Imu."""
    o = msg.orientation
    return (
        np.array([o.w, o.x, o.y, o.z], float),
        np.array([msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z], float),
        np.array([msg.linear_acceleration.x, msg.linear_acceleration.y, msg.linear_acceleration.z], float),
    )


def stamp_seconds(stamp) -> float:
    return stamp.sec + 1e-9 * stamp.nanosec


class HeaderlessStamper:
    """Stamps for messages without a header (Unitree LowState) from their reception times.

    Reception times can be coarse (``ros2 bag play --clock`` publishes /clock at 40 Hz by default, so many
    messages share one clock value) or bunched by the transport. The stamp is
    ``max(t_reception, t_previous + period)``: the nominal message period fills in where the clock did not
    advance, and the reception time takes over whenever it is ahead. Stamps never go backwards: if they run
    ahead of the reception time by more than ``max_lead`` (true rate above nominal, or a receiver that fell
    behind and sees a stale clock), they advance at half the period until the reception time catches up
    (counted in ``resyncs``); a clock that jumps back by more than a second (bag restarted) resets them.
    """

    def __init__(self, period: float, max_lead: float = 0.05):
        self.period = float(period)
        self.max_lead = float(max_lead)
        self.last: float | None = None
        self.resyncs = 0

    def __call__(self, t_reception: float) -> float:
        last = self.last
        if last is None or t_reception >= last + self.period or t_reception < last - 1.0:
            t = t_reception
        elif last + self.period - t_reception > self.max_lead:
            t = last + 0.5 * self.period  # ahead of the clock: slow down, never go back
            self.resyncs += 1
        else:
            t = last + self.period
        self.last = t
        return t
