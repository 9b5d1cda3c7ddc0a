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
:class:`~mcoe_ros.estimation.estimate.Estimate` re-anchors the odometry (the expensive re-propagation also outside
the lock) and becomes the solve-rate messages of :func:`mcoe_ros.io.messages.estimate_messages` (``solve/odom``,
payload). The Python solver holds the GIL while it computes; the node lowers the interpreter's switch interval to
:data:`GIL_SWITCH_INTERVAL` so that a sensor callback waits at most about that long for it.

Outputs (relative names, so they follow the node namespace): ``odom`` (nav_msgs/Odometry), ``pose``
(PoseWithCovarianceStamped) at input rate, ``solve/odom`` at solve rate, ``payload/inertia``,
``payload/combined_inertia`` (InertiaStamped), ``payload/covariance`` (Float64MultiArray, 10x10) — the payload
topics are transient local, so an MPC that subscribes late still gets the last value — ``payload/rls/inertia`` when
the RLS estimator runs, ``/diagnostics``, and TF odom -> base when ``tf2_ros`` is importable. Service
``payload/reset`` (std_srvs/Trigger). Output stamps are sensor times (of the input sample, or of the solve's newest
node), never wall time.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque

import numpy as np
import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Imu, JointState
from std_srvs.srv import Trigger

from mcoe_ros.io import messages
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import NODE_NAME, PARAMETERS, ConfigError, node_config
from mcoe_ros.ros.convert import OdometryWriter, fill, message_class

SENSOR_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=500, reliability=ReliabilityPolicy.BEST_EFFORT)
GIL_SWITCH_INTERVAL = 0.0005  #: s; Python's default 5 ms would let the solver thread delay a callback that long
LATCHED_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)


def import_low_state():
    """The Unitree LowState class from whichever interface package exists (None if neither)."""
    for pkg in ("unitree_legged_msgs", "ros2_unitree_legged_msgs"):
        try:
            module = __import__(f"{pkg}.msg", fromlist=["LowState"])
            return module.LowState
        except ImportError:
            continue
    return None


class EstimatorNode(Node):
    """The ``mcoe_estimator`` ROS node (see module docstring)."""

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        for p in PARAMETERS:
            extra = f" (one of: {', '.join(p.choices)})" if p.choices else ""
            self.declare_parameter(p.name, p.default, ParameterDescriptor(description=p.description + extra))
        self.config = node_config({p.name: self.get_parameter(p.name).value for p in PARAMETERS})
        mode = self.config.input.mode
        if mode == "low_state" and import_low_state() is None:
            raise ConfigError("input.mode is low_state but neither unitree_legged_msgs nor ros2_unitree_legged_msgs")
        self.feed = SensorFeed(self.config)
        sys.setswitchinterval(GIL_SWITCH_INTERVAL)
        self._latency = deque(maxlen=2000)  #: callback entry -> odom/pose/TF published, s
        self._odom_lock = threading.Lock()  #: orders odom publications of the two threads (strictly newer stamps)
        self._odom_t = -float("inf")  #: stamp of the last published odometry
        self.odom_frame = self.config.output.odom_frame
        self.base_frame = self.config.estimator.robot.base_frame
        self._odom_writer = OdometryWriter(self.odom_frame, self.base_frame)
        self._last_error_log = 0.0

        self.publishers_ = {}
        for name, (msgtype, latched) in messages.OUTPUTS.items():
            if name == "payload/rls/inertia" and not self.config.estimator.payload.uses_rls:
                continue
            self.publishers_[name] = self.create_publisher(message_class(msgtype), name, LATCHED_QOS if latched else 10)
        self.pub_diag = self.create_publisher(message_class(messages.DIAGNOSTICS_TYPE), messages.DIAGNOSTICS_TOPIC, 10)
        self.create_service(Trigger, "payload/reset", self._on_reset)
        self.tf = self._make_tf_broadcaster() if self.config.output.publish_tf else None

        inputs = self.config.input
        if mode == "low_state":
            self.create_subscription(import_low_state(), inputs.low_state_topic, self._on_low_state, SENSOR_QOS)
        else:
            self.create_subscription(JointState, inputs.joint_states_topic, self._on_joints, SENSOR_QOS)
            self.create_subscription(Imu, inputs.imu_topic, self._on_imu, SENSOR_QOS)
        self.create_timer(self.config.output.diagnostics_period, self._publish_diagnostics)
        # Sensor callbacks only buffer samples and advance the grid (cheap, under the lock); solves run in
        # a worker thread so that callbacks keep draining the subscription queues during a solve.
        self._lock = threading.Lock()
        self._wake = threading.Event()
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
                self._latency.append(time.perf_counter() - t0)
            with self._lock:
                self.feed.advance()
            self._wake.set()
        except Exception as err:  # keep running on anything unexpected, but say so
            self.feed.count_error("internal_error", repr(err))
            self._log_error(f"estimator error: {err!r}")

    def _solve_loop(self) -> None:
        while self._running:
            self._wake.wait(0.1)
            self._wake.clear()
            try:
                with self._lock:
                    tick = self.feed.due()  # always the newest window
                if tick is None:
                    continue
                est = self.feed.solve(tick)  # never under the lock
                if est is None:
                    continue
                with self._lock:
                    rebase = self.feed.begin_rebase(est, tick)
                if rebase is not None:
                    rebase.run()  # re-propagation through the buffered samples, outside the lock
                    for _ in range(3):  # and through most of the samples that arrived meanwhile
                        with self._lock:
                            newer = self.feed.estimator.propagator.newer_than(rebase.track.last_seq)
                        if len(newer) <= 2:
                            break
                        rebase.run(newer)
                    with self._lock:
                        self.feed.finish_rebase(rebase)
                        odo = self.feed.estimator.propagator.output(self.feed.estimator.epoch or 0.0)
                    if odo is not None:  # e.g. the first solve, or a solve after the input stopped
                        self._publish_odometry(odo)
                self._publish(est)
            except Exception as err:  # the worker never dies; the failure is counted and logged
                if not self._running or not self.context.ok():
                    return
                self.feed.count_error("internal_error", repr(err))
                self._log_error(f"estimator error: {err!r}")

    def destroy_node(self):
        diag = self.feed.diagnostics()
        values = diag.key_values()
        keys = ["ticks", "held_ticks", "samples_accepted", "samples_rejected"] + sorted(
            k for k in values if k.startswith("rejected_")
        )
        summary = ", ".join(f"{k}={values[k]}" for k in keys)
        self.get_logger().info(f"shutting down: {summary}; status: {diag.message}")
        self._running = False
        self._wake.set()
        if self._worker.is_alive():
            self._worker.join(timeout=5.0)
        return super().destroy_node()

    def _log_error(self, text: str) -> None:
        now = time.monotonic()
        if now - self._last_error_log > 1.0:
            self._last_error_log = now
            self.get_logger().warning(text)

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_low_state(self, msg) -> None:
        self._guard(self.feed.low_state, msg, self._now())

    def _on_joints(self, msg) -> None:
        self._guard(self.feed.joint_state, msg)

    def _on_imu(self, msg) -> None:
        self._guard(self.feed.imu, msg)

    # ---- outputs ------------------------------------------------------------------------------------
    def _publish(self, est) -> None:
        """A solve's messages (solve/odom, payload), from the solve thread."""
        if not self._running or not self.context.ok():  # shutting down: nothing to publish to
            return
        if not est.is_finite():  # the core never hands out NaN; this is the last line of defence
            self.feed.count_error("non_finite_output", "estimate suppressed")
            return
        self._publish_trees(messages.estimate_messages(est, self.odom_frame, self.base_frame))

    def _publish_odometry(self, odo) -> None:
        """The input-rate odom, pose and TF, from the sensor callback thread."""
        if not self._running:
            return
        if not odo.is_finite():
            self.feed.count_error("non_finite_output", "odometry suppressed")
            return
        with self._odom_lock:  # only strictly newer stamps (the solve thread publishes one after re-anchoring)
            if odo.t <= self._odom_t:
                return
            self._odom_t = odo.t
            writer = self._odom_writer
            writer.write(odo)
            self.publishers_["odom"].publish(writer.odom)
            self.publishers_["pose"].publish(writer.pose)
            if self.tf is not None:
                self.tf.sendTransform(writer.transform)

    def _publish_trees(self, trees: dict) -> None:
        for name, tree in trees.items():
            pub = self.publishers_.get(name)
            if pub is not None:
                pub.publish(fill(pub.msg_type(), tree))

    def _publish_diagnostics(self) -> None:
        diag = self.feed.diagnostics()
        latency = np.array(self._latency) if self._latency else np.zeros(1)
        diag.extra["odom_latency_p50_ms"] = f"{1e3 * np.percentile(latency, 50):.3f}"
        diag.extra["odom_latency_p99_ms"] = f"{1e3 * np.percentile(latency, 99):.3f}"
        tree = messages.diagnostics_message(self.feed.estimator.last_time, diag)
        self.pub_diag.publish(fill(self.pub_diag.msg_type(), tree))

    def _on_reset(self, request, response):
        with self._lock:
            self.feed.estimator.reset_payload()
        response.success = True
        response.message = "payload estimate reset to the prior"
        self.get_logger().info(response.message)
        return response

    def _make_tf_broadcaster(self):
        try:
            from tf2_ros import TransformBroadcaster
        except ImportError:
            self.get_logger().info("tf2_ros not importable: odom -> base TF broadcasting is off")
            return None
        return TransformBroadcaster(self)


def main(args=None) -> int:
    rclpy.init(args=args)
    try:
        node = EstimatorNode()
    except ConfigError as err:
        print(f"mcoe_estimator: configuration error: {err}", file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
        pass
    except RuntimeError:
        # SIGINT shuts the context down: a take from a still-full subscription queue then fails inside rclpy.spin
        if rclpy.ok():
            raise
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
