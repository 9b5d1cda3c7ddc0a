"""Byte layout of ROS 2 messages in their CDR serialisation, to read and write fixed-layout messages without building
Python message objects.

A serialised ROS 2 message (what ``rclpy.serialization.serialize_message`` returns, what a ``raw=True`` subscription
receives and what ``Publisher.publish(bytes)`` sends) is a 4-byte encapsulation header (``00 01`` little-endian CDR,
``00 00`` big-endian, then two option bytes) followed by the fields in declaration order, nested messages inline, each
primitive aligned to its own size (1, 2, 4 or 8 bytes) counted from the end of the header (classic CDR / XCDR1, as
rmw_fastrtps and rmw_cyclonedds write it), fixed arrays as their elements, strings as a uint32 length (including the
terminating NUL) followed by the characters and the NUL.

A message type whose every field is a primitive, a fixed array or a nested message of such fields (the Unitree
``LowState``) has the same byte layout for every message: :class:`CdrLayout` computes it once from the message class's
rosidl introspection (``get_fields_and_field_types``), and :class:`CdrReader` then takes the wanted numbers out of the
bytes with one numpy gather per type (~10 us for a LowState, against ~0.3 ms for rclpy's deserialisation into 20
nested Python objects and ~0.1 ms more to read them back). Strings have a fixed layout once their values are fixed
(the frame ids of an output message): :class:`CdrWriter` keeps a serialised template and overwrites the numbers.
Variable-length fields (sequences, strings of unknown value) raise :class:`UnsupportedLayout`.

Why this is safe: the layout follows from the message definition the process itself uses; users of the readers
(:class:`mcoe_ros.io.convert.LowStateDecoder`) compare them with the full deserialisation on the first messages and
fall back to it on any disagreement, and the tests compare both on recorded and random messages.
"""

from __future__ import annotations

import importlib
import struct
from dataclasses import dataclass

import numpy as np

HEADER = 4  #: bytes of the encapsulation header before the payload
#: ROS IDL primitive -> numpy kind and size (bytes); alignment = size
PRIMITIVES = {
    "bool": ("u", 1),
    "byte": ("u", 1),
    "char": ("u", 1),
    "octet": ("u", 1),
    "uint8": ("u", 1),
    "int8": ("i", 1),
    "uint16": ("u", 2),
    "int16": ("i", 2),
    "uint32": ("u", 4),
    "int32": ("i", 4),
    "uint64": ("u", 8),
    "int64": ("i", 8),
    "float": ("f", 4),
    "float32": ("f", 4),
    "double": ("f", 8),
    "float64": ("f", 8),
}


class UnsupportedLayout(ValueError):
    """The message's byte layout depends on its values (a sequence, or a string whose value is not given)."""


@dataclass(frozen=True)
class Field:
    """A primitive field (or fixed array of primitives): payload byte offset of its first element, numpy kind
    ('u', 'i', 'f'), element size in bytes, number of elements (1 for a scalar)."""

    offset: int
    kind: str
    size: int
    count: int

    def dtype(self, little_endian: bool) -> np.dtype:
        return np.dtype(("<" if little_endian else ">") + self.kind + str(self.size))


def message_class(type_name: str):
    """The Python message class of a ROS type name ('pkg/msg/Name' or 'pkg/Name') from its installed interface
    package (ImportError / AttributeError if it is not installed)."""
    pkg, name = type_name.split("/")[0], type_name.split("/")[-1]
    return getattr(importlib.import_module(f"{pkg}.msg"), name)


def _align(offset: int, size: int) -> int:
    return (offset + size - 1) // size * size


class CdrLayout:
    """Payload byte offsets of every primitive field of a message type (see module docstring).

    ``fields`` maps a dotted path (``imu.gyroscope``, ``motor_state[3].q``, ``header.stamp.sec``) to a
    :class:`Field`; ``strings`` gives the values of the string fields by path (their layout depends on them);
    ``size`` is the payload size in bytes (without the header).
    """

    def __init__(self, msg_class, strings: dict[str, str] | None = None):
        self.msg_class = msg_class
        self.strings = dict(strings or {})
        self.fields: dict[str, Field] = {}
        self._string_at: dict[str, int] = {}  #: path -> payload offset of the string's length word
        self.size = self._walk(msg_class, "", 0)
        unused = set(self.strings) - set(self._string_at)
        if unused:
            raise ValueError(f"{msg_class.__name__} has no string field {sorted(unused)[0]!r}")

    def _walk(self, msg_class, prefix: str, offset: int) -> int:
        for name, type_name in msg_class.get_fields_and_field_types().items():
            path = prefix + name
            base, count = type_name, None
            if type_name.endswith("]"):
                base, dims = type_name[:-1].split("[")
                if not dims or dims.startswith("<="):
                    raise UnsupportedLayout(f"{path}: {type_name} (a sequence has no fixed layout)")
                count = int(dims)
            if base.startswith(("sequence<", "wstring")) or base.startswith("string<="):
                raise UnsupportedLayout(f"{path}: {type_name} has no fixed layout")
            if base == "string":
                if count is not None or path not in self.strings:
                    raise UnsupportedLayout(f"{path}: a string of unknown value has no fixed layout")
                offset = _align(offset, 4)
                self._string_at[path] = offset
                offset += 4 + len(self.strings[path].encode()) + 1
            elif base in PRIMITIVES:
                kind, size = PRIMITIVES[base]
                offset = _align(offset, size)
                self.fields[path] = Field(offset, kind, size, count or 1)
                offset += size * (count or 1)
            else:
                nested = message_class(base)
                if count is None:
                    offset = self._walk(nested, path + ".", offset)
                else:
                    for i in range(count):
                        offset = self._walk(nested, f"{path}[{i}].", offset)
        return offset

    def template(self, little_endian: bool = True) -> bytearray:
        """Serialised bytes of a message with every number zero and the given strings (header included; padded to a
        multiple of 4 bytes, as rmw serialisers do)."""
        buf = bytearray(HEADER + _align(self.size, 4))
        buf[1] = 1 if little_endian else 0
        for path, at in self._string_at.items():
            text = self.strings[path].encode() + b"\0"
            struct.pack_into("<I" if little_endian else ">I", buf, HEADER + at, len(text))
            buf[HEADER + at + 4 : HEADER + at + 4 + len(text)] = text
        return buf


class CdrReader:
    """Reads named groups of numbers out of serialised messages of one fixed layout, as float64 arrays.

    ``groups`` maps a name to a list of field paths; a group's fields must share one numpy type (e.g. the float32
    joint angles of 12 motors); a path names a whole field (all its elements). :meth:`read` returns the groups in
    order. Little- and big-endian payloads are both read (by the header's byte 1).
    """

    def __init__(self, layout: CdrLayout, groups: dict[str, list[str]]):
        self.layout = layout
        self.names = list(groups)
        self._index = []  #: per group: (byte index array (n, size), kind, size)
        for name, paths in groups.items():
            fields = [layout.fields[p] for p in paths]
            kinds = {(f.kind, f.size) for f in fields}
            if len(kinds) != 1:
                raise ValueError(f"group {name!r} mixes types {sorted(kinds)}")
            kind, size = kinds.pop()
            starts = np.concatenate([f.offset + size * np.arange(f.count) for f in fields]) + HEADER
            self._index.append((starts[:, None] + np.arange(size), kind, size))
        self.min_bytes = HEADER + layout.size

    def read(self, raw) -> tuple[np.ndarray, ...]:
        """The groups' numbers (float64 arrays) of one serialised message (bytes-like); ValueError if too short or
        not CDR."""
        buf = np.frombuffer(raw, dtype=np.uint8)
        if buf.size < self.min_bytes or buf[0] != 0 or buf[1] > 1:
            raise ValueError(f"not a {self.layout.msg_class.__name__} (CDR, {self.min_bytes} bytes): {buf.size} bytes")
        order = "<" if buf[1] == 1 else ">"
        return tuple(
            buf[index].reshape(-1).view(order + kind + str(size)).astype(float) for index, kind, size in self._index
        )


class CdrWriter:
    """Serialises messages of one fixed layout (strings fixed) by overwriting the numbers of a template.

    ``blocks`` maps a name to a list of float64 field paths that lie back to back in the payload (e.g. a pose's
    position, orientation and covariance); :meth:`set` writes a block, :meth:`set_stamp` a ``builtin_interfaces/Time``
    field, :meth:`bytes` returns the message (little-endian CDR).
    """

    def __init__(self, layout: CdrLayout, blocks: dict[str, list[str]]):
        self.layout = layout
        self.buffer = layout.template(little_endian=True)
        self._views: dict[str, np.ndarray] = {}
        for name, paths in blocks.items():
            fields = [layout.fields[p] for p in paths]
            start, n = fields[0].offset, 0
            for f in fields:
                if (f.kind, f.size) != ("f", 8) or f.offset != start + 8 * n:
                    raise ValueError(f"block {name!r}: {paths} are not consecutive float64 fields")
                n += f.count
            self._views[name] = np.ndarray((n,), dtype="<f8", buffer=self.buffer, offset=HEADER + start)

    def set(self, name: str, values) -> None:
        self._views[name][:] = values

    def set_stamp(self, path: str, t: float) -> None:
        """Write the time ``t`` (s) into the ``builtin_interfaces/Time`` field at ``path`` (sec, nanosec)."""
        sec, nanosec = divmod(int(round(t * 1e9)), 1_000_000_000)
        sec_f, ns_f = self.layout.fields[path + ".sec"], self.layout.fields[path + ".nanosec"]
        struct.pack_into("<i", self.buffer, HEADER + sec_f.offset, sec)
        struct.pack_into("<I", self.buffer, HEADER + ns_f.offset, nanosec)

    def bytes(self) -> bytes:
        return bytes(self.buffer)
