"""rosbag2 I/O with the pure-Python ``rosbags`` library (no rclpy): typestore, message builders, writer, reader.

Typestore: ROS 2 Humble standard messages (wire-compatible with Jazzy/Kilted for every type used here)
plus the project's Unitree messages (``mcoe_ros/interfaces/unitree_legged_msgs/msg/*.msg``) registered
under both package names, ``unitree_legged_msgs/msg/*`` and ``ros2_unitree_legged_msgs/msg/*``
(same definitions, same CDR bytes).

Time: bag record times and header stamps are int nanoseconds; :func:`time_msg` converts seconds.
Formats: ``mcap`` (default; optional zstd chunk compression, read natively by ``ros2 bag``) and ``sqlite3``.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
from rosbags.rosbag2 import Reader, Writer
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode, StoragePlugin
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

import mcoe_ros

UNITREE_PACKAGES: tuple[str, ...] = ("unitree_legged_msgs", "ros2_unitree_legged_msgs")
FORMATS: tuple[str, ...] = ("mcap", "sqlite3")


def unitree_msg_dir() -> str:
    """Folder holding the project's Unitree ``.msg`` files (installed package data)."""
    return os.path.join(os.path.dirname(mcoe_ros.__file__), "interfaces", "unitree_legged_msgs", "msg")


@lru_cache(maxsize=1)
def typestore() -> Typestore:
    """Shared typestore: ROS 2 Humble + Unitree types under both package names. Do not mutate."""
    store = get_typestore(Stores.ROS2_HUMBLE)
    files = sorted(glob.glob(os.path.join(unitree_msg_dir(), "*.msg")))
    if not files:
        raise FileNotFoundError(f"no Unitree .msg files in {unitree_msg_dir()}")
    for pkg in UNITREE_PACKAGES:
        types: dict = {}
        for path in files:
            name = os.path.splitext(os.path.basename(path))[0]
            with open(path, encoding="utf-8") as fh:
                types.update(get_types_from_msg(fh.read(), f"{pkg}/msg/{name}"))
        store.register(types)
    return store


def msg_class(msgtype: str) -> Any:
    """Message dataclass for a type name such as ``sensor_msgs/msg/Imu``."""
    return typestore().types[msgtype]


# ---------------------------------------------------------------- message builders
def time_msg(t: float | int) -> Any:
    """builtin_interfaces/msg/Time from seconds (float) or nanoseconds (int)."""
    ns = int(t) if isinstance(t, (int, np.integer)) else int(round(float(t) * 1e9))
    return msg_class("builtin_interfaces/msg/Time")(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def header_msg(t: float | int, frame_id: str) -> Any:
    """std_msgs/msg/Header with stamp ``t`` (s float or ns int) and ``frame_id``."""
    return msg_class("std_msgs/msg/Header")(stamp=time_msg(t), frame_id=frame_id)


def vector3_msg(v: Sequence[float]) -> Any:
    return msg_class("geometry_msgs/msg/Vector3")(x=float(v[0]), y=float(v[1]), z=float(v[2]))


def point_msg(v: Sequence[float]) -> Any:
    return msg_class("geometry_msgs/msg/Point")(x=float(v[0]), y=float(v[1]), z=float(v[2]))


def quaternion_msg(q_wxyz: Sequence[float]) -> Any:
    """geometry_msgs/msg/Quaternion from (w, x, y, z)."""
    w, x, y, z = (float(c) for c in q_wxyz)
    return msg_class("geometry_msgs/msg/Quaternion")(x=x, y=y, z=z, w=w)


def time_ns_of(stamp: Any) -> int:
    """Nanoseconds of a builtin_interfaces/msg/Time."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def build_msg(msgtype: str, tree: dict) -> Any:
    """rosbags message of ``msgtype`` from a field tree (nested dicts/lists, e.g. from :mod:`mcoe_ros.io.messages`).

    Fields missing from the tree take their zero value (numbers 0, strings "", arrays of zeros).
    """
    from rosbags.typesys.base import Nodetype

    store = typestore()

    def base_value(btype: str, value):
        if btype == "string":
            return "" if value is None else str(value)
        if btype in ("float32", "float64"):
            return 0.0 if value is None else float(value)
        if btype == "bool":
            return bool(value)
        return 0 if value is None else int(value)

    def array_value(elem, value, size):
        kind, desc = elem
        value = [] if value is None else value
        if kind == Nodetype.BASE:
            dtype = {"float32": np.float32, "float64": np.float64, "bool": np.bool_}.get(desc[0])
            if desc[0] == "string":
                return [base_value("string", v) for v in value] or [""] * size
            if dtype is None:
                dtype = getattr(np, desc[0], np.uint8) if desc[0] not in ("byte", "char") else np.uint8
            arr = np.asarray(value, dtype=dtype)
            return arr if arr.size or not size else np.zeros(size, dtype=dtype)
        items = [build(desc, v) for v in value]
        return items or [build(desc, {}) for _ in range(size)]

    def build(name: str, sub: dict):
        _consts, fields = store.fielddefs[name]
        kwargs = {}
        for fname, (kind, desc) in fields:
            value = sub.get(fname) if sub else None
            if kind == Nodetype.BASE:
                kwargs[fname] = base_value(desc[0], value)
            elif kind == Nodetype.NAME:
                kwargs[fname] = build(desc, value or {})
            elif kind == Nodetype.ARRAY:
                kwargs[fname] = array_value(desc[0], value, desc[1])
            else:  # SEQUENCE
                kwargs[fname] = array_value(desc[0], value, 0)
        return store.types[name](**kwargs)

    return build(msgtype, tree)


# ---------------------------------------------------------------- writing
def offered_qos(latched: bool) -> Qos:
    """The QoS the node offers on an output topic (recorded in the bag's metadata, used by ``ros2 bag play``)."""
    unspecified = QosTime(0, 0)
    return Qos(
        history=QosHistory.KEEP_LAST,
        depth=1 if latched else 10,
        reliability=QosReliability.RELIABLE,
        durability=QosDurability.TRANSIENT_LOCAL if latched else QosDurability.VOLATILE,
        deadline=unspecified,
        lifespan=unspecified,
        liveliness=QosLiveliness.AUTOMATIC,
        liveliness_lease_duration=unspecified,
        avoid_ros_namespace_conventions=False,
    )


class BagWriter:
    """Thin context manager over ``rosbags.rosbag2.Writer`` that serializes messages with :func:`typestore`.

    ``write(topic, msgtype, t_ns, msg)`` registers a connection on first use of a topic.
    ``compression``: ``"none"`` or ``"zstd"`` (mcap chunk compression; sqlite3 only supports ``"none"``).
    """

    def __init__(self, path: str | os.PathLike, fmt: str = "mcap", compression: str = "none"):
        if fmt not in FORMATS:
            raise ValueError(f"bag format must be one of {FORMATS}, got '{fmt}'")
        if compression not in ("none", "zstd"):
            raise ValueError(f"compression must be 'none' or 'zstd', got '{compression}'")
        if compression != "none" and fmt != "mcap":
            raise ValueError("compression is only supported for the mcap format")
        self.path = Path(path)
        plugin = StoragePlugin.MCAP if fmt == "mcap" else StoragePlugin.SQLITE3
        self._writer = Writer(self.path, version=9, storage_plugin=plugin)
        if compression == "zstd":
            self._writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        self._connections: dict[str, Any] = {}
        self.store = typestore()

    def __enter__(self) -> BagWriter:
        self._writer.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self._writer.close()

    def write(self, topic: str, msgtype: str, t_ns: int, msg: Any, latched: bool = False) -> None:
        """Write one message; the topic's first message registers it with its offered QoS (reliable, keep last;
        ``latched``: depth 1, transient local, so a played-back latched topic reaches late subscribers)."""
        conn = self._connections.get(topic)
        if conn is None:
            conn = self._writer.add_connection(
                topic, msgtype, typestore=self.store, offered_qos_profiles=[offered_qos(latched)]
            )
            self._connections[topic] = conn
        elif conn.msgtype != msgtype:
            raise ValueError(f"topic '{topic}' already has type {conn.msgtype}, not {msgtype}")
        self._writer.write(conn, int(t_ns), self.store.serialize_cdr(msg, msgtype))


# ---------------------------------------------------------------- reading
@dataclass(frozen=True)
class TopicSummary:
    """One topic of a bag: message type and count."""

    msgtype: str
    count: int


def bag_topics(path: str | os.PathLike) -> dict[str, TopicSummary]:
    """{topic: TopicSummary} of a rosbag2 directory (mcap or sqlite3)."""
    with Reader(path) as reader:
        return {name: TopicSummary(info.msgtype or "", int(info.msgcount)) for name, info in reader.topics.items()}


def iter_raw(path: str | os.PathLike, topics: Iterable[str] | None = None) -> Iterator[tuple[str, str, int, bytes]]:
    """Yield (topic, msgtype, record time ns, CDR bytes) in record-time order; ``topics`` filters."""
    wanted = None if topics is None else set(topics)
    with Reader(path) as reader:
        conns = [c for c in reader.connections if wanted is None or c.topic in wanted]
        if not conns:
            return
        for conn, t_ns, raw in reader.messages(connections=conns):
            yield conn.topic, conn.msgtype, int(t_ns), raw


def iter_messages(path: str | os.PathLike, topics: Iterable[str] | None = None) -> Iterator[tuple[str, int, Any]]:
    """Yield (topic, record time ns, deserialized message) in record-time order; ``topics`` filters.

    Unitree types recorded under either package name deserialize (both are registered).
    """
    store = typestore()
    for topic, msgtype, t_ns, raw in iter_raw(path, topics):
        yield topic, t_ns, store.deserialize_cdr(raw, msgtype)
