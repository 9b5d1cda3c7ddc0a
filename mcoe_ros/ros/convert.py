"""rclpy message helpers: message classes by type name, and filling a message from a field tree of
:mod:`mcoe_ros.io.messages`."""

from __future__ import annotations

import importlib


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


class OdometryWriter:
    """The input-rate messages (nav_msgs/Odometry, PoseWithCovarianceStamped, TransformStamped odom -> base) of an
    :class:`~mcoe_ros.estimation.propagation.Odometry`, written field by field into messages it owns.

    Same content as :func:`mcoe_ros.io.messages.odometry_messages` / :func:`~mcoe_ros.io.messages.transform` filled
    with :func:`fill` (a test checks it) at a fifth of the cost: it runs in the sensor callback at input rate. The
    messages are reused: publish them before the next :meth:`write` (publishing serialises them at once).
    """

    def __init__(self, odom_frame: str, base_frame: str):
        self.odom = message_class("nav_msgs/msg/Odometry")()
        self.pose = message_class("geometry_msgs/msg/PoseWithCovarianceStamped")()
        self.transform = message_class("geometry_msgs/msg/TransformStamped")()
        for msg in (self.odom, self.pose, self.transform):
            msg.header.frame_id = odom_frame
        self.odom.child_frame_id = self.transform.child_frame_id = base_frame

    def write(self, odo) -> None:
        sec, nanosec = divmod(int(round(odo.t * 1e9)), 1_000_000_000)
        for msg in (self.odom, self.pose, self.transform):
            msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nanosec
        (px, py, pz), (qx, qy, qz, qw) = (float(v) for v in odo.position), (float(v) for v in odo.quat_xyzw)
        for pose in (self.odom.pose.pose, self.pose.pose.pose):
            pose.position.x, pose.position.y, pose.position.z = px, py, pz
            pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = qx, qy, qz, qw
        tf = self.transform.transform
        tf.translation.x, tf.translation.y, tf.translation.z = px, py, pz
        tf.rotation.x, tf.rotation.y, tf.rotation.z, tf.rotation.w = qx, qy, qz, qw
        cov = (0.5 * (odo.pose_cov + odo.pose_cov.T)).reshape(-1)
        self.odom.pose.covariance = self.pose.pose.covariance = cov
        twist = self.odom.twist.twist
        twist.linear.x, twist.linear.y, twist.linear.z = (float(v) for v in odo.linear_velocity)
        twist.angular.x, twist.angular.y, twist.angular.z = (float(v) for v in odo.angular_velocity)
        self.odom.twist.covariance = (0.5 * (odo.twist_cov + odo.twist_cov.T)).reshape(-1)
