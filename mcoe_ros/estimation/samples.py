"""Timestamped sensor samples, their validation, and resampling onto the estimator grid.

Samples are what the adapters (ROS messages, bags, simulator) hand to the core. Joint arrays are in the
model's joint order (the adapters map hardware order by name). Times are seconds (float) on one clock
(message stamps, reception time, or bag record time).

Validation policy ("bad input gets a clear error and loses nothing"): a sample with NaN/Inf, wrong array
sizes, a stamp older than or equal to the last accepted one, or a quaternion far from unit norm is
rejected with a reason; a quaternion within 10 % of unit norm is normalised (repaired). Every decision is
counted in :class:`SampleStats` for diagnostics.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, deque
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np


class InvalidSample(ValueError):
    """A sample the estimator cannot use; ``reason`` is a short machine-friendly key."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass
class JointSample:
    """Joint encoders and torques: q (nj,) rad, dq (nj,) rad/s, tau (nj,) N m, model joint order."""

    t: float
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray


@dataclass
class ImuSample:
    """IMU in its own frame: quat (w, x, y, z) of the IMU frame in the world, gyro rad/s, acc m/s^2 (specific force);
    gyro_bias (3,) rad/s: what the estimator has already subtracted from ``gyro`` (``imu_bias.attitude_tracking``;
    ``gyro + gyro_bias`` is the sensor's reading), zeros for a raw sample; acc_bias (3,) m/s²: likewise for ``acc``
    (``imu_bias.vertical_accelerometer_tracking``); yaw_offset rad: the turn about the world vertical the estimator
    has given the reading's orientation (``imu_bias.stance_yaw``), 0 for a raw sample."""

    t: float
    quat: np.ndarray
    gyro: np.ndarray
    acc: np.ndarray
    gyro_bias: np.ndarray = field(default_factory=lambda: np.zeros(3))
    yaw_offset: float = 0.0
    acc_bias: np.ndarray = field(default_factory=lambda: np.zeros(3))

    @property
    def raw_gyro(self) -> np.ndarray:
        """(3,) rad/s, the gyro as the sensor reported it."""
        return self.gyro + self.gyro_bias

    @property
    def raw_acc(self) -> np.ndarray:
        """(3,) m/s², the specific force as the sensor reported it."""
        return self.acc + self.acc_bias

    @property
    def raw_quat(self) -> np.ndarray:
        """(4,) (w, x, y, z), the orientation as the sensor reported it."""
        return self.quat if self.yaw_offset == 0.0 else turned_about_vertical(self.quat, -self.yaw_offset)


def turned_about_vertical(quat_wxyz: np.ndarray, angle: float) -> np.ndarray:
    """(4,) (w, x, y, z): the orientation ``quat_wxyz`` (body to world) turned by ``angle`` rad about the world's
    vertical, exp(angle e_z) * q."""
    c, s = math.cos(0.5 * angle), math.sin(0.5 * angle)
    w, x, y, z = quat_wxyz
    return np.array([c * w - s * z, c * x - s * y, c * y + s * x, c * z + s * w])


_SEQUENCE = itertools.count(1)  # orders the last errors of different SampleStats when they are merged


@dataclass
class SampleStats:
    """Counters of accepted, repaired and rejected samples, by reason; each component owns its own."""

    accepted: Counter = field(default_factory=Counter)
    repaired: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)
    last_error: str = ""
    last_error_seq: int = 0
    details: dict = field(default_factory=dict)  #: the last detail of every reason (not overwritten by others)

    def reject(self, reason: str, detail: str) -> None:
        """Count one rejected sample and remember why ("reason: detail")."""
        self.rejected[reason] += 1
        self.last_error = f"{reason}: {detail}"
        self.last_error_seq = next(_SEQUENCE)
        self.details[reason] = (self.last_error_seq, detail)

    @classmethod
    def merged(cls, *parts: SampleStats) -> SampleStats:
        """Sum of several components' counters; the most recent last error."""
        out = cls()
        for part in parts:
            out.accepted.update(part.accepted)
            out.repaired.update(part.repaired)
            out.rejected.update(part.rejected)
            for reason, (seq, detail) in part.details.items():
                if seq > out.details.get(reason, (0, ""))[0]:
                    out.details[reason] = (seq, detail)
            if part.last_error_seq > out.last_error_seq:
                out.last_error, out.last_error_seq = part.last_error, part.last_error_seq
        return out

    @property
    def n_rejected(self) -> int:
        return int(sum(self.rejected.values()))

    @property
    def n_repaired(self) -> int:
        return int(sum(self.repaired.values()))


def _vector(name: str, value, size: int) -> np.ndarray:
    arr = value if type(value) is np.ndarray and value.dtype == np.float64 else np.asarray(value, dtype=float)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    if arr.shape != (size,):
        raise InvalidSample("wrong_size", f"{name} has {arr.size} entries, expected {size}")
    if not np.all(np.isfinite(arr)):
        raise InvalidSample("non_finite", f"{name} contains NaN or Inf")
    return arr


POSITION_MARGIN = 0.3  #: rad beyond the URDF position limits (calibration offsets, encoder wrap)
LIMIT_FACTOR = 2.0  #: times the URDF velocity and effort limits (encoder-differentiated speed spikes)
GYRO_RANGE = 35.0  #: rad/s (2000 deg/s: the largest range of common MEMS IMUs)
ACC_RANGE = 16 * 9.81  #: m/s^2 (16 g)


@dataclass(frozen=True)
class PlausibilityLimits:
    """What a real sensor can report (model joint order): joint positions within the URDF limits widened by
    ``POSITION_MARGIN``, joint speeds and torques within ``LIMIT_FACTOR`` times the URDF limits, IMU within the
    ranges of legged-robot IMUs. Samples outside are rejected ('out_of_limits') before they reach the window."""

    q_low: np.ndarray  #: rad
    q_high: np.ndarray  #: rad
    dq_max: np.ndarray  #: rad/s
    tau_max: np.ndarray  #: N m
    gyro_max: float = GYRO_RANGE
    acc_max: float = ACC_RANGE

    @classmethod
    def from_model(cls, lower, upper, velocity, effort) -> PlausibilityLimits:
        """From a URDF's joint limits (arrays over the actuated joints; unlimited entries are huge or inf)."""
        lower, upper = np.asarray(lower, float), np.asarray(upper, float)
        big = np.finfo(float).max / 4
        unbounded_v, unbounded_e = np.asarray(velocity, float) > big, np.asarray(effort, float) > big
        return cls(
            np.where(lower < -big, -np.inf, lower - POSITION_MARGIN),
            np.where(upper > big, np.inf, upper + POSITION_MARGIN),
            np.where(unbounded_v, np.inf, LIMIT_FACTOR * np.asarray(velocity, float)),
            np.where(unbounded_e, np.inf, LIMIT_FACTOR * np.asarray(effort, float)),
        )

    @cached_property
    def _joint_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) of (q, dq, tau) stacked: one comparison for the common, plausible sample."""
        return np.concatenate((self.q_low, -self.dq_max, -self.tau_max)), np.concatenate(
            (self.q_high, self.dq_max, self.tau_max)
        )

    def check_joint(self, q: np.ndarray, dq: np.ndarray, tau: np.ndarray) -> None:
        low, high = self._joint_bounds
        stacked = np.concatenate((q, dq, tau))
        if ((stacked >= low) & (stacked <= high)).all():
            return
        for name, value, low, high, unit in (
            ("q", q, self.q_low, self.q_high, "rad"),
            ("dq", dq, -self.dq_max, self.dq_max, "rad/s"),
            ("tau", tau, -self.tau_max, self.tau_max, "N m"),
        ):
            bad = np.flatnonzero((value < low) | (value > high))
            if bad.size:
                i = int(bad[0])
                raise InvalidSample(
                    "out_of_limits", f"{name}[{i}] = {value[i]:.4g} {unit} outside [{low[i]:.3g}, {high[i]:.3g}]"
                )

    def check_imu(self, gyro: np.ndarray, acc: np.ndarray) -> None:
        if gyro.dot(gyro) <= self.gyro_max**2 and acc.dot(acc) <= self.acc_max**2:
            return
        for name, value, limit, unit in (("gyro", gyro, self.gyro_max, "rad/s"), ("acc", acc, self.acc_max, "m/s^2")):
            norm = float(np.linalg.norm(value))
            if norm > limit:
                raise InvalidSample("out_of_limits", f"|{name}| = {norm:.4g} {unit} above the sensor range {limit:g}")


def validate_joint(t: float, q, dq, tau, nj: int, limits: PlausibilityLimits | None = None) -> JointSample:
    """Checked :class:`JointSample` (raises :class:`InvalidSample`)."""
    if not np.isfinite(t):
        raise InvalidSample("non_finite", "joint stamp is not finite")
    sample = JointSample(float(t), _vector("q", q, nj), _vector("dq", dq, nj), _vector("tau", tau, nj))
    if limits is not None:
        limits.check_joint(sample.q, sample.dq, sample.tau)
    return sample


def validate_imu(t: float, quat, gyro, acc, limits: PlausibilityLimits | None = None) -> tuple[ImuSample, bool]:
    """Checked :class:`ImuSample` and whether the quaternion was renormalised (raises :class:`InvalidSample`)."""
    if not np.isfinite(t):
        raise InvalidSample("non_finite", "imu stamp is not finite")
    qv = _vector("quaternion", quat, 4)
    norm = float(np.linalg.norm(qv))
    if not 0.9 <= norm <= 1.1:
        raise InvalidSample("bad_quaternion", f"quaternion norm {norm:.3g} is not close to 1")
    repaired = abs(norm - 1.0) > 1e-6
    sample = ImuSample(float(t), qv / norm, _vector("gyro", gyro, 3), _vector("acc", acc, 3))
    if limits is not None:
        limits.check_imu(sample.gyro, sample.acc)
    return sample, repaired


class StampedBuffer:
    """Time-ordered ring buffer of samples of one stream with out-of-order/duplicate rejection.

    ``horizon`` seconds of history are kept (older samples are dropped when new ones arrive).
    """

    def __init__(self, name: str, horizon: float, stats: SampleStats):
        self.name = name
        self.horizon = horizon
        self.stats = stats
        self.items: deque = deque()

    @property
    def last_t(self) -> float:
        return self.items[-1].t if self.items else -np.inf

    def push(self, sample) -> bool:
        """Append a validated sample; False (and counted) if its stamp is not strictly increasing."""
        if sample.t <= self.last_t:
            reason = "duplicate_stamp" if sample.t == self.last_t else "out_of_order"
            self.stats.reject(reason, f"{self.name} stamp {sample.t:.6f} s <= last {self.last_t:.6f} s")
            return False
        self.items.append(sample)
        self.stats.accepted[self.name] += 1
        while self.items and self.items[0].t < sample.t - self.horizon:
            self.items.popleft()
        return True

    def clear(self) -> None:
        self.items.clear()

    def bracket(self, t: float):
        """(a, b, w) with samples a.t <= t <= b.t and interpolation weight w of b; None if t is outside."""
        items = self.items
        if not items or t < items[0].t or t > items[-1].t:
            return None
        lo, hi = 0, len(items) - 1
        while hi - lo > 1:  # binary search on a deque (O(log n) index access near the ends)
            mid = (lo + hi) // 2
            if items[mid].t <= t:
                lo = mid
            else:
                hi = mid
        a, b = items[lo], items[hi]
        if b.t == a.t:
            return a, b, 0.0
        return a, b, (t - a.t) / (b.t - a.t)


def interp_joint(buf: StampedBuffer, t: float) -> JointSample | None:
    """Linear interpolation of a joint stream at time t (None outside the buffered span)."""
    br = buf.bracket(t)
    if br is None:
        return None
    a, b, w = br
    return JointSample(t, (1 - w) * a.q + w * b.q, (1 - w) * a.dq + w * b.dq, (1 - w) * a.tau + w * b.tau)


def interp_imu(buf: StampedBuffer, t: float) -> ImuSample | None:
    """Interpolation of an IMU stream at time t: normalised lerp of the quaternion (same hemisphere)."""
    br = buf.bracket(t)
    if br is None:
        return None
    a, b, w = br
    qb = b.quat if float(a.quat @ b.quat) >= 0.0 else -b.quat
    quat = (1 - w) * a.quat + w * qb
    return ImuSample(
        t,
        quat / np.linalg.norm(quat),
        (1 - w) * a.gyro + w * b.gyro,
        (1 - w) * a.acc + w * b.acc,
        (1 - w) * a.gyro_bias + w * b.gyro_bias,
        a.yaw_offset + w * math.remainder(b.yaw_offset - a.yaw_offset, 2.0 * math.pi),  # the short way across ±π
        (1 - w) * a.acc_bias + w * b.acc_bias,
    )
