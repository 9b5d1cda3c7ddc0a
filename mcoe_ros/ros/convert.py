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
