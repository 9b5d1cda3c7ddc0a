"""ROS 2 node: Go1 sensor streams in, base odometry and payload inertia out (thin adapter over the core).

Inputs (``input.mode``): Unitree ``low_state`` (``unitree_legged_msgs`` or ``ros2_unitree_legged_msgs``;
no header, so the node clock's reception time is the stamp -- ROS time, i.e. /clock under use_sim_time --
made strictly increasing at the nominal rate by :class:`mcoe_ros.inputs.HeaderlessStamper`), or
``joint_states`` + ``imu/data`` (header stamps). Subscriptions are best effort with a deep queue: they
match the Unitree bridge's reliable publisher and any SensorDataQoS publisher, and buffer a solve's worth
of samples.

Outputs (relative names, so they follow the node namespace): ``odom`` (nav_msgs/Odometry), ``pose``
(PoseWithCovarianceStamped), ``payload/inertia``, ``payload/combined_inertia`` (InertiaStamped),
``payload/covariance`` (Float64MultiArray, 10x10) — the payload topics are transient local, so an MPC
that subscribes late still gets the last value — ``payload/rls/inertia`` when the RLS estimator runs,
``/diagnostics``, and TF odom -> base when ``tf2_ros`` is importable. Service ``payload/reset``
(std_srvs/Trigger). Output stamps are the sensor time of the estimate, never wall time.
"""

from __future__ import annotations

import sys
import threading
import time

import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import InertiaStamped, PoseWithCovarianceStamped, TransformStamped
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger

from mcoe_ros import messages
from mcoe_ros.config import NODE_NAME, PARAMETERS, ConfigError, resolve
from mcoe_ros.estimator import Estimator
from mcoe_ros.inputs import HeaderlessStamper, JointStateMapper, imu_arrays, low_state_arrays, stamp_seconds
from mcoe_ros.ros.convert import fill
from mcoe_ros.samples import InvalidSample

SENSOR_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=500, reliability=ReliabilityPolicy.BEST_EFFORT)
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
    """The ``mcoe_estimator`` node (see module docstring)."""

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        for p in PARAMETERS:
            extra = f" (one of: {', '.join(p.choices)})" if p.choices else ""
            self.declare_parameter(p.name, p.default, ParameterDescriptor(description=p.description + extra))
        self.params = resolve({p.name: self.get_parameter(p.name).value for p in PARAMETERS})
        self.core = Estimator(self.params)
        self.odom_frame = self.params["output.odom_frame"]
        self.base_frame = self.params["robot.base_frame"]
        self._last_error_log = 0.0

        self.pub_odom = self.create_publisher(Odometry, "odom", 10)
        self.pub_pose = self.create_publisher(PoseWithCovarianceStamped, "pose", 10)
        self.pub_payload = self.create_publisher(InertiaStamped, "payload/inertia", LATCHED_QOS)
        self.pub_combined = self.create_publisher(InertiaStamped, "payload/combined_inertia", LATCHED_QOS)
        self.pub_cov = self.create_publisher(Float64MultiArray, "payload/covariance", LATCHED_QOS)
        self.pub_rls = None
        if "rls" in self.params["estimator.payload_estimator"]:
            self.pub_rls = self.create_publisher(InertiaStamped, "payload/rls/inertia", LATCHED_QOS)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.create_service(Trigger, "payload/reset", self._on_reset)
        self.tf = self._make_tf_broadcaster() if self.params["output.publish_tf"] else None

        mode = self.params["input.mode"]
        if mode == "low_state":
            low_state = import_low_state()
            if low_state is None:
                raise ConfigError(
                    "input.mode is low_state but neither unitree_legged_msgs nor ros2_unitree_legged_msgs"
                )
            self._stamper = HeaderlessStamper(self.params["input.low_state_period"])
            self.create_subscription(low_state, self.params["input.low_state_topic"], self._on_low_state, SENSOR_QOS)
        else:
            self.mapper = JointStateMapper(self.core.robot.joint_names)
            self.create_subscription(JointState, self.params["input.joint_states_topic"], self._on_joints, SENSOR_QOS)
            self.create_subscription(Imu, self.params["input.imu_topic"], self._on_imu, SENSOR_QOS)
        self.create_timer(self.params["output.diagnostics_period"], self._publish_diagnostics)
        # Sensor callbacks only buffer samples and advance the grid (cheap, under the lock); solves run in
        # a worker thread so that callbacks keep draining the subscription queues during a solve.
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._running = True
        self._worker = threading.Thread(target=self._solve_loop, name="mcoe_solver", daemon=True)
        self._worker.start()
        self.get_logger().info(f"mcoe_estimator up: input {mode}, payload estimator {self.core.payload_mode}")

    # ---- inputs -------------------------------------------------------------------------------------
    def _guard(self, fn, *args) -> None:
        """Run an input handler; nothing escapes to the executor, problems are counted and logged."""
        try:
            with self._lock:
                fn(*args)
                self.core.advance()
            self._wake.set()
        except InvalidSample as err:
            self.core.count_invalid(err)
            self._log_error(f"rejected input: {err}")
        except Exception as err:  # keep running on anything unexpected, but say so
            self.core.count_invalid(InvalidSample("internal_error", repr(err)))
            self._log_error(f"estimator error: {err!r}")

    def _solve_loop(self) -> None:
        while self._running:
            self._wake.wait(0.1)
            self._wake.clear()
            try:
                with self._lock:
                    tick = self.core.due()
                if tick is None:
                    continue
                est = self.core.solve(tick)
                if est is not None:
                    self._publish(est)
            except Exception as err:  # the worker never dies; the failure is counted and logged
                if not self._running or not self.context.ok():
                    return
                self.core.count_invalid(InvalidSample("internal_error", repr(err)))
                self._log_error(f"estimator error: {err!r}")

    def destroy_node(self):
        level, text, values = self.core.diagnostics()
        keys = ["ticks", "held_ticks", "samples_accepted", "samples_rejected"] + sorted(
            k for k in values if k.startswith("rejected_")
        )
        summary = ", ".join(f"{k}={values[k]}" for k in keys)
        self.get_logger().info(f"shutting down: {summary}; status: {text}")
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
        self._guard(self._handle_low_state, msg, self._stamper(self._now()))

    def _handle_low_state(self, msg, t: float) -> None:
        q, dq, tau, quat, gyro, acc, foot = low_state_arrays(msg, self.core.robot.joint_map, self.core.robot.foot_map)
        self.core.add_imu(t, quat, gyro, acc)
        self.core.add_joints(t, q, dq, tau, foot_force=foot)

    def _on_joints(self, msg) -> None:
        self._guard(self._handle_joints, msg)

    def _handle_joints(self, msg) -> None:
        q, dq, tau = self.mapper.arrays(msg.name, msg.position, msg.velocity, msg.effort)
        self.core.add_joints(stamp_seconds(msg.header.stamp), q, dq, tau)

    def _on_imu(self, msg) -> None:
        self._guard(self._handle_imu, msg)

    def _handle_imu(self, msg) -> None:
        self.core.add_imu(stamp_seconds(msg.header.stamp), *imu_arrays(msg))

    # ---- outputs ------------------------------------------------------------------------------------
    def _publish(self, est) -> None:
        if not self._running or not self.context.ok():  # shutting down: nothing to publish to
            return
        if not est.is_finite():  # the core never hands out NaN; this is the last line of defence
            self.core.count_invalid(InvalidSample("non_finite_output", "estimate suppressed"))
            return
        self.pub_odom.publish(fill(Odometry(), messages.odometry(est, self.odom_frame, self.base_frame)))
        self.pub_pose.publish(fill(PoseWithCovarianceStamped(), messages.pose_with_covariance(est, self.odom_frame)))
        payload_frame = self.params["robot.payload_frame"]
        self.pub_payload.publish(fill(InertiaStamped(), messages.inertia_stamped(est.t, est.payload_pi, payload_frame)))
        parent = self.core.robot.payload_parent_frame
        self.pub_combined.publish(fill(InertiaStamped(), messages.inertia_stamped(est.t, est.combined_pi, parent)))
        self.pub_cov.publish(fill(Float64MultiArray(), messages.matrix(est.payload_cov)))
        if self.pub_rls is not None and self.core.rls_pi is not None:
            tree = messages.inertia_stamped(est.t, self.core.rls_pi, payload_frame)
            self.pub_rls.publish(fill(InertiaStamped(), tree))
        if self.tf is not None:
            self.tf.sendTransform(fill(TransformStamped(), messages.transform(est, self.odom_frame, self.base_frame)))

    def _publish_diagnostics(self) -> None:
        level, text, values = self.core.diagnostics()
        tree = messages.diagnostic_array(self.core.last_time, "mcoe_estimator", "go1", level, text, values)
        self.pub_diag.publish(fill(DiagnosticArray(), tree))

    def _on_reset(self, request, response):
        with self._lock:
            self.core.reset_payload()
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
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
