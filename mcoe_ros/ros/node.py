"""ROS 2 node: Go1 sensor streams in, base odometry and payload inertia out (thin adapter over the core).

Inputs (``input.mode``): Unitree ``low_state`` (``unitree_legged_msgs`` or ``ros2_unitree_legged_msgs``;
no header, so the node clock's reception time is the stamp -- ROS time, i.e. /clock under use_sim_time --
made strictly increasing at the nominal rate by :class:`mcoe_ros.io.convert.HeaderlessStamper`), or
``joint_states`` + ``imu/data`` (header stamps). Subscriptions are best effort with a deep queue: they
match the Unitree bridge's reliable publisher and any SensorDataQoS publisher, and buffer a solve's worth
of samples.

The node is a thin adapter: messages go into :class:`mcoe_ros.io.feed.SensorFeed` (the same path as the replay).
Two rates: every input message's callback steps the input-rate odometry
(:class:`~mcoe_ros.estimation.propagation.Odometry`, the newest solve propagated through the newer samples) and
publishes ``odom``, ``pose`` and TF from the callback thread, stamped with the input sample's time
(:func:`mcoe_ros.io.messages.odometry_messages`); solves run in a worker thread on the newest window (ticks that came
due meanwhile are skipped and counted), never under the sample lock, and each
:class:`~mcoe_ros.estimation.estimate.Estimate` re-anchors the odometry (the re-propagation through the samples since
its newest node is stepped by the sensor callbacks, :data:`REBASE_STEPS` per message after its odometry is out, so
the solve thread does not hold the GIL for it) and becomes the solve-rate messages of
:func:`mcoe_ros.io.messages.estimate_messages` (``solve/odom``, payload). The Python solver holds the GIL while it
computes; the node lowers the interpreter's switch interval to :data:`GIL_SWITCH_INTERVAL` so that a sensor callback
waits at most about that long for it. The thread that spins the executor runs under SCHED_FIFO at
``node.sensor_priority`` when the system permits it (:meth:`EstimatorNode.raise_sensor_priority`): on a busy
machine another process woken on its core -- the odometry's own subscriber, woken by the publish -- then cannot
preempt it in the middle of a message (whole-run in-node latency p99 0.41-0.44 vs 0.87-1.66 ms at 500 Hz under load,
side by side, ``docs/performance.md`` run 12).

Outputs (relative names, so they follow the node namespace): ``odom`` (nav_msgs/Odometry), ``pose``
(PoseWithCovarianceStamped) at input rate, ``solve/odom`` at solve rate, ``payload/inertia``,
``payload/combined_inertia`` (InertiaStamped), ``payload/covariance`` (Float64MultiArray, 10x10) — the payload
topics are transient local, so an MPC that subscribes late still gets the last value — ``payload/rls/inertia`` when
the RLS estimator runs, ``/diagnostics``, and TF odom -> base when ``tf2_ros`` is importable. Service
``payload/reset`` (std_srvs/Trigger). Output stamps are sensor times (of the input sample, or of the solve's newest
node), never wall time.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections import Counter, deque

import numpy as np
import rclpy
import rclpy.exceptions
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import Imu, JointState
from std_srvs.srv import Trigger

from mcoe_ros.io import messages
from mcoe_ros.io.cdr import UnsupportedLayout
from mcoe_ros.io.convert import stamp_seconds
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.intake import HealthMonitor, StreamIntake
from mcoe_ros.io.params import DEFAULTS, NODE_NAME, PARAMETERS, ConfigError, load_params, node_config
from mcoe_ros.ros.convert import OdometryWriter, fill, message_class

DRAIN_MAX = 64  #: queued input messages handled in one callback (the executor serves timers/services in between)
DECODER_CHECKS = 20  #: first LowState messages whose in-place decoding is compared with rclpy's deserialisation
DECODER_CHECK_EVERY = 5000  #: and every this many messages after that
SENSOR_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=2000, reliability=ReliabilityPolicy.BEST_EFFORT)
#: re-propagation steps per input message after a solve (the sensor thread catches the new track up: a step is about
#: 0.1 ms; the solve thread would hold the GIL for all of them at once and delay the callbacks)
REBASE_STEPS = 4
REBASE_IDLE = 0.05  #: s without input after which the solve thread finishes a pending re-anchoring itself
GIL_SWITCH_INTERVAL = 0.0001  #: s; Python's default 5 ms would let the solver thread delay a callback that long
#: headerless LowState stamps on the wall clock (no use_sim_time) lead the (queueing-corrected) reception time by at
#: most this many periods: the stamper's default 50 ms is sized for /clock at 40 Hz, and on a live stream with jitter
#: the stamps ratcheted up to that lead (odometry stamped up to 46 ms in the future in the session-6 soak)
LIVE_STAMP_LEAD = 2.0
LATCHED_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)


class LatencyHistogram:
    """Run-wide latency distribution at a constant cost per sample: counts in ``bin_width`` s bins up to ``span`` s,
    one overflow bin above (its percentile is +inf)."""

    def __init__(self, bin_width: float = 1e-5, span: float = 0.1):
        self.bin_width = bin_width
        self.counts = np.zeros(int(round(span / bin_width)) + 1, dtype=np.int64)

    def add(self, seconds: float) -> None:
        self.counts[min(int(seconds / self.bin_width), self.counts.size - 1)] += 1

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def percentile(self, q: float) -> float:
        """Upper edge (s) of the bin holding the q-th percentile (nan without samples)."""
        total = self.total
        if total == 0:
            return float("nan")
        i = int(np.searchsorted(np.cumsum(self.counts), q / 100.0 * total))
        return float("inf") if i >= self.counts.size - 1 else (i + 1) * self.bin_width

    def above(self, seconds: float) -> int:
        """Samples of ``seconds`` or more (``seconds`` rounded to a bin edge)."""
        return int(self.counts[int(round(seconds / self.bin_width)) :].sum())


def _with_info(callback):
    """A (msg, MessageInfo) callback for create_subscription: rclpy >= Iron passes MessageInfo to two-argument
    callbacks; Humble's rclpy calls every callback with the message only (then info is None: no loss accounting
    from sequence numbers, queueing delay unknown)."""
    from rclpy.subscription import Subscription

    if hasattr(Subscription, "CallbackType"):
        return callback
    return lambda msg: callback(msg, None)


def import_low_state():
    """The Unitree LowState class from whichever interface package exists (None if neither)."""
    for pkg in ("unitree_legged_msgs", "ros2_unitree_legged_msgs"):
        try:
            module = __import__(f"{pkg}.msg", fromlist=["LowState"])
            return module.LowState
        except ImportError:
            continue
    return None


USAGE = """usage: mcoe_estimator [--help] [--ros-args --params-file FILE -p NAME:=VALUE -r __ns:=/NS ...]

The MCOE estimator ROS 2 node: Unitree LowState (or JointState + Imu) in; odometry, pose, payload inertia and
diagnostics out. Parameters (ROS parameters; config/go1.yaml lists them all with their defaults):
"""


def usage() -> str:
    """The --help text: usage and every parameter with its default, range or choices."""
    lines = [USAGE]
    for p in PARAMETERS:
        allowed = f" one of {list(p.choices)};" if p.choices else (f" {p.range_text()};" if p.bounds else "")
        lines.append(f"  {p.name} (default {p.default!r};{allowed} {p.description})")
    return "\n".join(lines)


#: parameters rclpy itself declares on every node (not ours, never unknown)
_ROS_PARAMETERS = {"use_sim_time", "start_type_description_service", "qos_overrides"}


class EstimatorNode(Node):
    """The ``mcoe_estimator`` ROS node (see module docstring)."""

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        unknown = sorted(
            k for k in self._parameter_overrides if k not in DEFAULTS and k.split(".")[0] not in _ROS_PARAMETERS
        )
        if unknown:
            raise ConfigError(f"unknown parameter '{unknown[0]}'" + (f" (and {unknown[1:]})" if unknown[1:] else ""))
        for p in PARAMETERS:  # dynamic typing: check_value (one line naming the parameter) decides, not rclpy
            extra = f" (one of: {', '.join(p.choices)})" if p.choices else ""
            extra += f" ({p.range_text()})" if p.bounds else ""
            desc = ParameterDescriptor(description=p.description + extra, dynamic_typing=True)
            self.declare_parameter(p.name, p.default, desc)
        self.config = node_config({p.name: self.get_parameter(p.name).value for p in PARAMETERS})
        mode = self.config.input.mode
        if mode == "low_state" and import_low_state() is None:
            raise ConfigError("input.mode is low_state but neither unitree_legged_msgs nor ros2_unitree_legged_msgs")
        try:
            self.feed = SensorFeed(self.config)
        except (ValueError, KeyError, RuntimeError, OSError) as err:  # e.g. a frame the URDF does not have
            raise ConfigError(f"parameters 'robot.*' do not fit the robot model: {err}") from err
        if not self.get_parameter("use_sim_time").value:  # a fine wall clock: see LIVE_STAMP_LEAD
            self.feed.stamper.max_lead = LIVE_STAMP_LEAD * self.config.input.low_state_period
        sys.setswitchinterval(GIL_SWITCH_INTERVAL)
        self._latency = deque(maxlen=2000)  #: callback entry -> odom/pose/TF published, s
        self._latency_run = LatencyHistogram()  #: the same since start
        self._odom_lock = threading.Lock()  #: orders odom publications of the two threads (strictly newer stamps)
        self._odom_t = -float("inf")  #: stamp of the last published odometry
        self.odom_frame = self.config.output.odom_frame
        self.base_frame = self.config.estimator.robot.base_frame
        self.tf = self._make_tf_broadcaster() if self.config.output.publish_tf else None
        self._odom_writer = OdometryWriter(self.odom_frame, self.base_frame, transform=self.tf is not None)
        self._last_error_log = 0.0
        self._drain_ok = True
        self._drained = 0  #: input messages taken by draining (not by an executor round)

        self.publishers_ = {}
        for name, (msgtype, latched) in messages.OUTPUTS.items():
            if name == "payload/rls/inertia" and not self.config.estimator.payload.uses_rls:
                continue
            self.publishers_[name] = self.create_publisher(message_class(msgtype), name, LATCHED_QOS if latched else 10)
        self.pub_diag = self.create_publisher(message_class(messages.DIAGNOSTICS_TYPE), messages.DIAGNOSTICS_TOPIC, 10)
        self.create_service(Trigger, "payload/reset", self._on_reset)

        inputs = self.config.input
        period, depth, gap = inputs.low_state_period, SENSOR_QOS.depth, self.config.estimator.grid.max_gap
        if mode == "low_state":
            self.intake = [StreamIntake("low_state", period, depth, max_gap=gap)]
            self._low_state_class = import_low_state()
            try:  # serialised messages read in place (see mcoe_ros.io.cdr); the full deserialisation checks it
                self._decoder = self.feed.low_state_decoder(self._low_state_class)
            except UnsupportedLayout as err:
                self._decoder = None
                self.get_logger().info(f"LowState is deserialised in full ({err})")
            self._decoder_checks = 0
            self._input_sub = self.create_subscription(
                self._low_state_class,
                inputs.low_state_topic,
                _with_info(self._on_low_state),
                SENSOR_QOS,
                raw=self._decoder is not None,
            )
        else:
            self.intake = [StreamIntake(n, period, depth, max_gap=gap) for n in ("joint_states", "imu")]
            self._input_sub = None  # two streams: the executor interleaves them (no draining)
            self.create_subscription(JointState, inputs.joint_states_topic, _with_info(self._on_joints), SENSOR_QOS)
            self.create_subscription(Imu, inputs.imu_topic, _with_info(self._on_imu), SENSOR_QOS)
        stale = self.config.output.stale_timeout
        self.health = HealthMonitor(stale, recent=max(stale, 2 * self.config.output.diagnostics_period))
        self._logged_rejected: Counter = Counter()
        self.create_timer(self.config.output.diagnostics_period, self._publish_diagnostics)
        # Sensor callbacks only buffer samples and advance the grid (cheap, under the lock); solves run in
        # a worker thread so that callbacks keep draining the subscription queues during a solve.
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._rebase = None  #: a solve's re-anchoring being caught up by the sensor callbacks (_catch_up)
        self._last_input = time.monotonic()  #: of the last input message handled
        self._running = True
        self._worker = threading.Thread(target=self._solve_loop, name="mcoe_solver", daemon=True)
        self._worker.start()
        self.get_logger().info(
            f"mcoe_estimator up: input {mode}, payload estimator {self.config.estimator.payload.estimator}"
        )

    # ---- inputs -------------------------------------------------------------------------------------
    def _guard(self, fn, *args) -> None:
        """Run an input handler and publish the input-rate odometry; nothing escapes to the executor, problems
        are counted and logged."""
        t0 = time.perf_counter()
        try:
            with self._lock:
                fn(*args)
                odo = self.feed.odometry()
            if odo is not None:  # published before the grid advances: contact detection is the expensive part
                self._publish_odometry(odo)
                latency = time.perf_counter() - t0
                self._latency.append(latency)
                self._latency_run.add(latency)
            with self._lock:
                self.feed.advance()
                self._catch_up()
            self._last_input = time.monotonic()
            self._wake.set()
        except Exception as err:  # keep running on anything unexpected, but say so
            self.feed.count_error("internal_error", repr(err))
            self._log_error(f"estimator error: {err!r}")

    def _solve_loop(self) -> None:
        self._lower_priority(self.config.node.solver_niceness)
        while self._running:
            self._wake.wait(0.1)
            self._wake.clear()
            try:
                self._finish_idle_rebase()
                with self._lock:
                    tick = self.feed.due()  # always the newest window
                if tick is None:
                    continue
                est = self.feed.solve(tick)  # never under the lock
                if est is None:
                    continue
                with self._lock:  # re-anchoring: the sensor callbacks step it (a newer solve replaces it)
                    self._rebase = self.feed.begin_rebase(est, tick) or self._rebase
                self._publish(est)
                self._wake.set()  # back soon: finish the re-anchoring if the input has stopped
            except Exception as err:  # the worker never dies; the failure is counted and logged
                if not self._running or not self.context.ok():
                    return
                self.feed.count_error("internal_error", repr(err))
                self._log_error(f"estimator error: {err!r}")

    def _finish_idle_rebase(self) -> None:
        """The solve thread finishes a pending re-anchoring when no input message has stepped it for
        :data:`REBASE_IDLE` s (the input stopped: e.g. the last solve of a stream) and publishes its odometry."""
        if self._rebase is None or time.monotonic() - self._last_input < REBASE_IDLE:
            return
        with self._lock:
            rebase, self._rebase = self._rebase, None
            if rebase is None:
                return
            rebase.run()
            self.feed.finish_rebase(rebase)
            odo = self.feed.estimator.propagator.output(self.feed.estimator.epoch or 0.0)
        if odo is not None:
            self._publish_odometry(odo)

    def _catch_up(self) -> None:
        """Step the pending re-anchoring by :data:`REBASE_STEPS` samples and make it current once it has caught up
        (the sensor thread, under the sample lock, after the message's odometry is out)."""
        rebase = self._rebase
        if rebase is not None and rebase.run_some(REBASE_STEPS):
            self._rebase = None
            self.feed.finish_rebase(rebase)

    def _lower_priority(self, niceness: int) -> None:
        """Nice this (the solve) thread by ``niceness``: on Linux a thread has its own nice value, so the sensor
        callbacks and the odometry win the CPU when the solve competes with them (the solve only runs later)."""
        if niceness <= 0:
            return
        try:
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + int(niceness))
        except (AttributeError, OSError) as err:  # not Linux, or not permitted: the solve keeps the node's priority
            self.get_logger().info(f"solve thread priority unchanged ({err!r})")

    def raise_sensor_priority(self) -> int | None:
        """Put the calling thread -- the one that spins the executor: sensor callbacks, input-rate odometry -- under
        SCHED_FIFO at ``node.sensor_priority`` (0: leave it), so that another process woken on its core (e.g. the
        odometry's own subscriber, woken by the publish) does not preempt it in the middle of a message. Returns the
        previous policy to restore with :func:`restore_scheduling` (None: unchanged; not permitted is said once)."""
        priority = int(self.config.node.sensor_priority)
        return set_realtime(priority, lambda why: self.get_logger().info(f"sensor thread scheduling unchanged ({why})"))

    def stop(self, timeout: float = 1.0) -> None:
        """Stop the solve worker: the running solve ends at its next iteration (stop flag); waits ``timeout`` s."""
        diag = self.feed.diagnostics()
        values = diag.key_values()
        keys = ["ticks", "held_ticks", "samples_accepted", "samples_rejected"] + sorted(
            k for k in values if k.startswith("rejected_")
        )
        lost = ", ".join(
            f"{s.name}: received {s.received}, lost {s.n_lost}, published before the match {s.before_match}"
            for s in self.intake
        )
        summary = ", ".join(f"{k}={values[k]}" for k in keys)
        self.get_logger().info(f"shutting down: {summary}; {lost}; status: {diag.message}")
        self._running = False
        self.feed.estimator.request_stop()
        self._wake.set()
        if self._worker.is_alive():
            self._worker.join(timeout=timeout)

    def destroy_node(self):
        if getattr(self, "_running", False):  # also called by rclpy on a node whose constructor failed
            self.stop()
        return super().destroy_node()

    def _log_error(self, text: str) -> None:
        now = time.monotonic()
        if now - self._last_error_log > 1.0:
            self._last_error_log = now
            self.get_logger().warning(text)

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _account(self, stream: StreamIntake, info, t_data: float | None = None) -> float:
        """Intake accounting of one message (MessageInfo from the middleware); returns its queueing delay, s."""
        self.health.input(time.monotonic())
        seq = info.get("publication_sequence_number") if info else None
        gid = info.get("publisher_gid") if info else None
        publisher = bytes(gid["data"]) if isinstance(gid, dict) and "data" in gid else None
        sent = info.get("source_timestamp") if info else None
        return stream.message(time.time(), None if not sent else sent * 1e-9, seq or None, publisher, t_data=t_data)

    def _on_low_state(self, data, info) -> None:
        """One LowState (CDR bytes when the decoder is in use, else the message), then the messages already queued
        behind it (:meth:`_drain`)."""
        self._low_state_message(data, info)
        self._drain()

    def _low_state_message(self, data, info) -> None:
        # No header: the stamp is the publication time on the node's clock (reception time minus the queueing
        # delay), so callback starvation neither delays stamps nor fakes gaps.
        delay = self._account(self.intake[0], info)
        t = self._now() - delay
        self._guard(self._low_state, data, t)

    def _low_state(self, data, t: float) -> None:
        checks_due = self._decoder_checks < DECODER_CHECKS or self.intake[0].received % DECODER_CHECK_EVERY == 0
        if self._decoder is not None and checks_due:
            self._check_decoder(data)
        if self._decoder is not None:
            stamp = self.feed.low_state_bytes(data, self._decoder, t)
        else:
            msg = data if isinstance(data, self._low_state_class) else deserialize_message(data, self._low_state_class)
            stamp = self.feed.low_state(msg, t)
        if stamp is not None:
            self.intake[0].data_time(stamp)

    def _check_decoder(self, raw) -> None:
        """Compare the in-place decoding with rclpy's deserialisation; on any difference use the latter from now on
        (said once, counted as ``cdr_decoder_mismatch``)."""
        self._decoder_checks += 1
        try:
            differs = self._decoder.check(raw, deserialize_message(raw, self._low_state_class))
        except Exception as err:  # noqa: BLE001 - e.g. a truncated message: rclpy's path decides below
            differs = f"check failed: {err!r}"
        if differs is not None:
            self._decoder = None
            self.feed.count_error("cdr_decoder_mismatch", f"LowState field {differs}")
            self.get_logger().error(
                f"in-place LowState decoding disagrees ({differs}): full deserialisation from now on"
            )

    def _drain(self) -> None:
        """Handle the input messages already waiting in the subscription queue (at most :data:`DRAIN_MAX`) in this
        callback: one executor round per message costs about as much as handling it, and a backlog (after a GIL
        hold, a burst) is what overflows the queue. Uses the take that rclpy's own executor and wait_for_message
        use; if it is unavailable, the executor alone delivers (as before)."""
        sub = self._input_sub
        if sub is None or not self._drain_ok:
            return
        for _ in range(DRAIN_MAX):
            try:
                with sub.handle:
                    taken = sub.handle.take_message(sub.msg_type, sub.raw)
            except Exception as err:  # noqa: BLE001 - API differences or a destroyed subscription: stop draining
                self._drain_ok = False
                self.get_logger().info(f"input draining off ({err!r})")
                return
            if taken is None:
                return
            self._drained += 1
            self._low_state_message(taken[0], taken[1] if len(taken) > 1 else None)

    def _on_joints(self, msg, info) -> None:
        self._account(self.intake[0], info, stamp_seconds(msg.header.stamp))
        self._guard(self.feed.joint_state, msg)

    def _on_imu(self, msg, info) -> None:
        self._account(self.intake[1], info, stamp_seconds(msg.header.stamp))
        self._guard(self.feed.imu, msg)

    # ---- outputs ------------------------------------------------------------------------------------
    def _publish(self, est) -> None:
        """A solve's messages (solve/odom, payload), from the solve thread."""
        if not self._running or not self.context.ok():  # shutting down: nothing to publish to
            return
        if not est.is_finite():  # the core never hands out NaN; this is the last line of defence
            self.feed.count_error("non_finite_output", "estimate suppressed")
            return
        # the solve's window (this thread ran it)
        window = self.feed.estimator.window_poses() if self.config.output.publish_window_path else None
        self._publish_trees(messages.estimate_messages(est, self.odom_frame, self.base_frame, window))

    def _publish_odometry(self, odo) -> None:
        """The input-rate odom, pose and TF, from the sensor callback thread (or the solve thread after a
        re-anchoring)."""
        if not self._running:
            return
        with self._odom_lock:  # only strictly newer stamps (the solve thread publishes one after re-anchoring)
            if odo.t <= self._odom_t:
                return
            writer = self._odom_writer
            if not writer.write(odo):
                self.feed.count_error("non_finite_output", "odometry suppressed")
                return
            self._odom_t = odo.t
            self.publishers_["odom"].publish(writer.odom)
            self.publishers_["pose"].publish(writer.pose)
            if self.tf is not None:
                self.tf.sendTransform(writer.transform)

    def _publish_trees(self, trees: dict) -> None:
        for name, tree in trees.items():
            pub = self.publishers_.get(name)
            if pub is not None:
                pub.publish(fill(pub.msg_type(), tree))
        self.health.output(time.monotonic())

    def _publish_diagnostics(self) -> None:
        diag = self.feed.diagnostics()
        diag.level, diag.message, recent = self.health.assess(time.monotonic(), diag, self.intake)
        for stream in self.intake:
            diag.extra.update(stream.key_values())
        diag.extra.update(recent)
        latency = np.array(self._latency) if self._latency else np.zeros(1)
        diag.extra["odom_latency_p50_ms"] = f"{1e3 * np.percentile(latency, 50):.3f}"
        diag.extra["odom_latency_p99_ms"] = f"{1e3 * np.percentile(latency, 99):.3f}"
        run = self._latency_run  # since start (10 us bins)
        diag.extra["odom_latency_run_p99_ms"] = f"{1e3 * run.percentile(99):.2f}"
        diag.extra["odom_latency_run_over_1ms"] = f"{run.above(1e-3)} of {run.total}"
        diag.extra["input_drained"] = str(self._drained)
        if self.config.input.mode == "low_state":
            diag.extra["low_state_decoding"] = "in_place" if self._decoder is not None else "deserialised"
        self._log_rejections(diag)
        # named after the fully qualified node name: several estimators (namespaces) share /diagnostics
        tree = messages.diagnostics_message(self.feed.estimator.last_time, diag, name=self.get_fully_qualified_name())
        self.pub_diag.publish(fill(self.pub_diag.msg_type(), tree))

    def _log_rejections(self, diag) -> None:
        """Log (at most once per diagnostics period) the samples rejected since the last log, with reasons."""
        new = Counter(diag.samples.rejected) - self._logged_rejected
        lost = sum(s.n_lost for s in self.intake) - self._logged_rejected["__lost__"]
        if new:
            self._logged_rejected.update(new)
            parts = [f"{k}={v} (last: {diag.samples.details.get(k, (0, '?'))[1]})" for k, v in new.most_common()]
            self.get_logger().warning(f"rejected {sum(new.values())} samples: " + "; ".join(parts))
        if lost > 0:
            self._logged_rejected["__lost__"] += lost
            causes = ", ".join(f"{s.name}: {dict(s.lost)}" for s in self.intake if s.n_lost)
            self.get_logger().warning(f"{lost} input messages lost before the callback (total by cause: {causes})")

    def _on_reset(self, request, response):
        with self._lock:
            self.feed.estimator.reset_payload()
        response.success = True
        response.message = "payload estimate reset to the prior (the pose is kept)"
        self.get_logger().info(response.message)
        return response

    def _make_tf_broadcaster(self):
        try:
            from tf2_ros import TransformBroadcaster
        except ImportError:
            self.get_logger().info("tf2_ros not importable: odom -> base TF broadcasting is off")
            return None
        return TransformBroadcaster(self)


def set_realtime(priority: int, say=None) -> int | None:
    """SCHED_FIFO at ``priority`` (1..99) for the calling thread (Linux applies it per thread; threads it starts later
    inherit it). Returns the previous policy for :func:`restore_scheduling`, None if ``priority`` is 0 or the system
    refuses (no CAP_SYS_NICE / rtprio limit, not Linux): then ``say(reason)`` is called."""
    if priority <= 0:
        return None
    try:
        previous = os.sched_getscheduler(0)
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        return previous
    except (AttributeError, OSError) as err:
        if say is not None:
            say(f"SCHED_FIFO {priority} not permitted: {err!r}")
        return None


def restore_scheduling(previous: int | None) -> None:
    """Undo :func:`set_realtime` on the calling thread (back to ``previous``, priority 0)."""
    if previous is not None:
        os.sched_setscheduler(0, previous, os.sched_param(0))


def main(args=None) -> int:
    argv = list(sys.argv[1:] if args is None else args)
    ros_args = argv.index("--ros-args") if "--ros-args" in argv else len(argv)
    if any(a in ("-h", "--help") for a in argv[:ros_args]):
        print(usage())
        return 0
    try:  # our reading of the parameter files first: one line naming the file and key (rcl's is two, less clear)
        for path in (argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--params-file"):
            load_params(path, required=False)
    except ConfigError as err:
        print(f"mcoe_estimator: configuration error: {err}", file=sys.stderr)
        return 2
    # Our own SIGINT/SIGTERM handling: the context stays valid until the node has stopped and logged
    # (no "Failed to publish log message to rosout"), and the spin loop notices within 0.1 s.
    try:
        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    except Exception as err:  # e.g. an unparsable --params-file (rcl's message names the file)
        print(f"mcoe_estimator: configuration error: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        node = EstimatorNode()
    except (ConfigError, rclpy.exceptions.ParameterException) as err:
        # exit without the middleware's teardown: nothing ran yet, and in a test session starting a dozen failing
        # nodes at once a process hung after this line until killed (twice in ~6 full runs; the context shutdown or
        # the interpreter's teardown of the half-built node, not reproduced alone)
        print(f"mcoe_estimator: configuration error: {err}", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(2)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    scheduling = node.raise_sensor_priority()  # this thread spins: the sensor callbacks run on it
    try:
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RuntimeError:
        # SIGINT shuts the context down: a take from a still-full subscription queue then fails inside rclpy.spin
        if rclpy.ok():
            raise
    finally:
        restore_scheduling(scheduling)
        node.stop()
        executor.shutdown(timeout_sec=0.5)
        node.destroy_node()
        rclpy.try_shutdown()
    if node._worker.is_alive():  # a solve step still running after the 1 s stop: do not wait for it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
