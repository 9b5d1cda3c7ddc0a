"""rclpy message helpers: message classes by type name, and filling a message from a field tree of
:mod:`mcoe_ros.io.messages`."""

from __future__ import annotations

import importlib

import numpy as np

from mcoe_ros.io.cdr import CdrLayout, CdrWriter


def fill(msg, tree: dict):
    """Recursively assign a field tree onto an rclpy message (lists of dicts become lists of messages)."""
    for key, value in tree.items():
        current = getattr(msg, key)
        if isinstance(value, dict):
            fill(current, value)
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            cls = _message_class(type(msg).get_fields_and_field_types()[key])
            setattr(msg, key, [fill(cls(), v) for v in value])
        elif isinstance(current, bytes) and isinstance(value, int):
            setattr(msg, key, bytes([value]))  # ROS 'byte' fields (e.g. DiagnosticStatus.level)
        else:
            setattr(msg, key, value)
    return msg


def _message_class(field_type: str):
    """'sequence<diagnostic_msgs/DiagnosticStatus>' -> the message class."""
    inner = field_type.split("<", 1)[1].rstrip(">").split(",")[0] if "<" in field_type else field_type
    return message_class(inner)


def message_class(msgtype: str):
    """rclpy message class of 'pkg/msg/Name' or 'pkg/Name'."""
    parts = msgtype.split("/")
    return getattr(importlib.import_module(f"{parts[0]}.msg"), parts[-1])


POSE_BLOCK = [f"pose.pose.position.{a}" for a in "xyz"] + [f"pose.pose.orientation.{a}" for a in "xyzw"]
TWIST_BLOCK = [f"twist.twist.linear.{a}" for a in "xyz"] + [f"twist.twist.angular.{a}" for a in "xyz"]


class OdometryWriter:
    """The input-rate messages of an :class:`~mcoe_ros.estimation.propagation.Odometry`, serialised: nav_msgs/Odometry
    and geometry_msgs/PoseWithCovarianceStamped as CDR bytes (``Publisher.publish`` sends bytes as they are), and,
    if ``transform``, the TransformStamped odom -> base message (for a TF broadcaster).

    Same content as :func:`mcoe_ros.io.messages.odometry_messages` / :func:`~mcoe_ros.io.messages.transform` filled
    with :func:`fill` (a test checks it) at a tenth of the cost of filling and publishing message objects: it runs in
    the sensor callback at input rate. The frame ids are fixed, so both messages have a fixed byte layout
    (:class:`mcoe_ros.io.cdr.CdrWriter`); :meth:`write` overwrites the numbers.
    """

    def __init__(self, odom_frame: str, base_frame: str, transform: bool = True):
        odom_cls = message_class("nav_msgs/msg/Odometry")
        pose_cls = message_class("geometry_msgs/msg/PoseWithCovarianceStamped")
        frames = {"header.frame_id": odom_frame, "child_frame_id": base_frame}
        self._odom = CdrWriter(
            CdrLayout(odom_cls, frames),
            {"pose": POSE_BLOCK + ["pose.covariance"], "twist": TWIST_BLOCK + ["twist.covariance"]},
        )
        self._pose = CdrWriter(
            CdrLayout(pose_cls, {"header.frame_id": odom_frame}), {"pose": POSE_BLOCK + ["pose.covariance"]}
        )
        self._pose_values = np.zeros(7 + 36)
        self._twist_values = np.zeros(6 + 36)
        self.transform = None
        if transform:
            self.transform = message_class("geometry_msgs/msg/TransformStamped")()
            self.transform.header.frame_id, self.transform.child_frame_id = odom_frame, base_frame

    def write(self, odo) -> bool:
        """Write ``odo`` into the messages; False (and nothing to publish) if any of its numbers is not finite."""
        pose, twist = self._pose_values, self._twist_values
        pose[:3], pose[3:7] = odo.position, odo.quat_xyzw
        pose[7:] = (0.5 * (odo.pose_cov + odo.pose_cov.T)).reshape(-1)
        twist[:3], twist[3:6] = odo.linear_velocity, odo.angular_velocity
        twist[6:] = (0.5 * (odo.twist_cov + odo.twist_cov.T)).reshape(-1)
        if not (np.isfinite(pose).all() and np.isfinite(twist).all() and np.isfinite(odo.t)):
            return False
        for writer in (self._odom, self._pose):
            writer.set_stamp("header.stamp", odo.t)
            writer.set("pose", pose)
        self._odom.set("twist", twist)
        if self.transform is not None:
            tf = self.transform
            sec, nanosec = divmod(int(round(odo.t * 1e9)), 1_000_000_000)
            tf.header.stamp.sec, tf.header.stamp.nanosec = sec, nanosec
            tf.transform.translation.x, tf.transform.translation.y, tf.transform.translation.z = (
                float(v) for v in pose[:3]
            )
            r = tf.transform.rotation
            r.x, r.y, r.z, r.w = (float(v) for v in pose[3:7])
        return True

    @property
    def odom(self) -> bytes:
        """nav_msgs/Odometry, serialised."""
        return self._odom.bytes()

    @property
    def pose(self) -> bytes:
        """geometry_msgs/PoseWithCovarianceStamped, serialised."""
        return self._pose.bytes()
