"""The one path from sensor messages into the estimator, used by the ROS node, the replay, benchmarks and tests.

:class:`SensorFeed` converts messages (rclpy and rosbags objects alike, duck-typed) to arrays in the model's joint
order (:mod:`mcoe_ros.io.convert`), stamps headerless Unitree LowState messages from their reception (or bag record)
time with :class:`~mcoe_ros.io.convert.HeaderlessStamper`, routes them to
:meth:`~mcoe_ros.estimation.estimator.Estimator.add_imu` / ``add_joints`` (LowState foot forces included), and
counts every message it cannot convert. Ticks run either synchronously (:meth:`poll`, the replay) or split between a
sample thread (:meth:`advance`) and a solve thread (:meth:`due` + :meth:`solve`, the ROS node).

Two rates: :meth:`odometry` (after every input message, before the grid advances) returns the input-rate
:class:`~mcoe_ros.estimation.propagation.Odometry` (the newest solve propagated through the newer samples); a solve's
:class:`~mcoe_ros.estimation.estimate.Estimate` carries the payload. :meth:`poll` re-anchors the odometry at every
solve itself; the node splits that into :meth:`begin_rebase` / ``Rebase.run`` / :meth:`finish_rebase`.
"""

from __future__ import annotations

from mcoe_ros.estimation.diagnostics import Diagnostics
from mcoe_ros.estimation.estimate import Estimate
from mcoe_ros.estimation.estimator import Estimator, TickInput
from mcoe_ros.estimation.propagation import Odometry, Rebase
from mcoe_ros.estimation.samples import InvalidSample, SampleStats
from mcoe_ros.io.convert import (
    HeaderlessStamper,
    JointStateMapper,
    LowStateDecoder,
    imu_arrays,
    low_state_arrays,
    stamp_seconds,
)
from mcoe_ros.io.params import NodeConfig

INPUT_MODES = ("low_state", "joint_states")


class SensorFeed:
    """Messages -> samples -> estimator (see module docstring). ``mode``: 'low_state' or 'joint_states'."""

    def __init__(self, config: NodeConfig | None = None, estimator: Estimator | None = None):
        self.config = config = config or NodeConfig()
        if config.input.mode not in INPUT_MODES:
            raise ValueError(f"input mode must be one of {INPUT_MODES}, got {config.input.mode!r}")
        self.mode = config.input.mode
        self.estimator = estimator or Estimator(config.estimator)
        robot = self.estimator.robot
        self._joint_map, self._foot_map = robot.joint_map, robot.foot_map
        self.stamper = HeaderlessStamper(config.input.low_state_period)
        self.mapper = JointStateMapper(robot.joint_names)
        self.stats = SampleStats()  #: messages that could not be converted

    # ---------------------------------------------------------------- messages in
    def low_state(self, msg, t_reception: float) -> float | None:
        """A Unitree LowState received (or recorded, or published: the time corrected for queueing delay) at
        ``t_reception`` s; returns the stamp it was given (None if it could not be converted)."""
        return self._stamped(lambda: low_state_arrays(msg, self._joint_map, self._foot_map), t_reception)

    def low_state_decoder(self, msg_class) -> LowStateDecoder:
        """A decoder of serialised LowState messages of ``msg_class`` for :meth:`low_state_bytes` (in this feed's
        joint and foot orders); :class:`~mcoe_ros.io.cdr.UnsupportedLayout` if the type has no fixed layout."""
        return LowStateDecoder(msg_class, self._joint_map, self._foot_map)

    def low_state_bytes(self, raw, decoder: LowStateDecoder, t_reception: float) -> float | None:
        """:meth:`low_state` for a serialised LowState (CDR bytes, e.g. from a ``raw=True`` subscription)."""
        return self._stamped(lambda: decoder.arrays(raw), t_reception)

    def _stamped(self, convert, t_reception: float) -> float | None:
        try:
            arrays = convert()
        except InvalidSample as err:
            self.stats.reject(err.reason, err.detail)
            return None
        t = self.stamper(t_reception)
        self.sample(t, *arrays)
        return t

    def sample(self, t: float, q, dq, tau, quat_wxyz, gyro, acc, foot_force=None) -> None:
        """One synchronous proprioceptive sample at time ``t`` s (already stamped): joint arrays (model order)
        q rad, dq rad/s, tau N m; IMU orientation (w, x, y, z), gyro rad/s, specific force m/s^2 (IMU frame);
        optional raw foot forces (model foot order). Arrays from any source (e.g. a simulated series) enter here."""
        est = self.estimator
        est.add_imu(t, quat_wxyz, gyro, acc)
        est.add_joints(t, q, dq, tau, foot_force=foot_force)

    def joint_state(self, msg) -> None:
        """A sensor_msgs/JointState (header stamp used)."""
        try:
            q, dq, tau = self.mapper.arrays(msg.name, msg.position, msg.velocity, msg.effort)
        except InvalidSample as err:
            self.stats.reject(err.reason, err.detail)
            return
        self.estimator.add_joints(stamp_seconds(msg.header.stamp), q, dq, tau)

    def imu(self, msg) -> None:
        """A sensor_msgs/Imu (header stamp used)."""
        self.estimator.add_imu(stamp_seconds(msg.header.stamp), *imu_arrays(msg))

    # ---------------------------------------------------------------- ticks
    def poll(self) -> list[Estimate]:
        """Advance the grid and run the tick that is due (synchronous)."""
        return self.estimator.poll()

    def advance(self) -> None:
        """Create the grid knots the buffered samples cover (sample thread)."""
        self.estimator.advance()

    def odometry(self) -> Odometry | None:
        """Step the input-rate odometry through the new samples (after every input message, before :meth:`advance`
        or :meth:`poll`; None before the first solve or without a new IMU sample)."""
        return self.estimator.propagate()

    def due(self) -> TickInput | None:
        return self.estimator.due()

    def solve(self, tick: TickInput) -> Estimate | None:
        return self.estimator.solve(tick)

    def begin_rebase(self, est: Estimate, tick: TickInput) -> Rebase | None:
        """Start re-anchoring the odometry at a solve (under the sample lock; run the result outside it)."""
        return self.estimator.begin_rebase(est, tick)

    def finish_rebase(self, rebase: Rebase | None) -> None:
        """Make a re-anchored odometry track current (under the sample lock)."""
        self.estimator.finish_rebase(rebase)

    def count_error(self, reason: str, detail: str) -> None:
        """Count a failure outside the estimator (e.g. an unexpected exception in an adapter)."""
        self.stats.reject(reason, detail)

    # ---------------------------------------------------------------- state out
    @property
    def sample_stats(self) -> SampleStats:
        """Every sample counter: conversion (this feed), validation and window buffers (the estimator)."""
        return SampleStats.merged(self.stats, self.estimator.sample_stats)

    def diagnostics(self) -> Diagnostics:
        diag = self.estimator.diagnostics()
        diag.samples = self.sample_stats
        return diag
