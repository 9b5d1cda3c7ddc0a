"""Two-rate output on a real rclpy graph: odometry rate, stamps and latency of the mcoe_estimator node under a 500 Hz
stream, and the cost of one propagation step.

Starts the node (console-script module, Python solver backend), plays the sample bag at the recorded pace
(``--mode joint_states``: JointState + Imu with header stamps, so every odom stamp can be matched to its input;
``--mode low_state``: the Go1 path, stamped by reception time) and records, in this process, every odom message:

- odom messages per input sample (IMU or LowState) after the first odom, and whether stamps strictly increase and
  equal input stamps (joint_states mode);
- end-to-end latency: odom reception wall time minus the wall time its input was published (joint_states mode; this
  includes both DDS hops and this process's executor);
- the node's own processing latency (callback entry -> odom, pose and TF published) from its /diagnostics
  (``odom_latency_p50_ms``, ``odom_latency_p99_ms``), with its solve rate, skipped ticks and corrections.

Run: OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_tworate.py [--mode joint_states] [--duration 10]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from mcoe_ros.testing.node_process import start_node, stop_node
from mcoe_ros.testing.spin import SpinThread

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "mcoe_ros", "data", "go1_sample")


def step_cost(n: int = 2000) -> tuple[float, float]:
    """(median, p99) wall time in us of one Propagator step on sample-bag data, after the first solve."""
    from mcoe_ros.io.bag import iter_messages
    from mcoe_ros.io.feed import SensorFeed

    feed = SensorFeed()
    times = []
    for _topic, t_ns, msg in iter_messages(SAMPLE, ["low_state"]):
        feed.low_state(msg, t_ns * 1e-9)
        if feed.estimator.propagator.track is None:
            feed.poll()  # until the first solve only: then propagation alone
            feed.odometry()
            continue
        feed.estimator.advance()
        start = time.perf_counter()
        feed.estimator.propagate()
        times.append(time.perf_counter() - start)
        if len(times) >= n:
            break
    us = 1e6 * np.array(times)
    return float(np.median(us)), float(np.percentile(us, 99))


def run_graph(mode: str, duration: float) -> dict:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import Imu, JointState
    from unitree_legged_msgs.msg import LowState

    from mcoe_ros.io.bag import iter_raw

    classes = {"low_state": LowState, "joint_states": JointState, "imu/data": Imu}
    topics = ["low_state"] if mode == "low_state" else ["joint_states", "imu/data"]
    trigger = "low_state" if mode == "low_state" else "imu/data"
    proc = start_node(f"input.mode:={mode}")
    ctx = rclpy.context.Context()
    rclpy.init(context=ctx)
    try:
        player = rclpy.create_node("bag_player", context=ctx)
        mpc = rclpy.create_node("mpc", context=ctx)
        reliable = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
        pubs = {t: player.create_publisher(classes[t], t, reliable if t == "low_state" else 50) for t in topics}
        odoms, diags = [], []
        mpc.create_subscription(Odometry, "/mcoe/odom", lambda m: odoms.append((time.perf_counter(), m)), 1000)
        mpc.create_subscription(DiagnosticArray, "/diagnostics", diags.append, 10)
        executor = SingleThreadedExecutor(context=ctx)
        executor.add_node(mpc)
        spinner = SpinThread(executor)
        msgs, t_first = [], None
        for topic, _type, t_ns, raw in iter_raw(SAMPLE, topics):
            t_first = t_ns if t_first is None else t_first
            if t_ns - t_first > duration * 1e9:
                break
            msgs.append((topic, t_ns, deserialize_message(raw, classes[topic])))
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline and not all(player.count_subscribers(t) for t in topics):
            time.sleep(0.1)
        time.sleep(0.5)
        sent = {}  # input stamp (ns) -> publish wall time
        wall0 = time.perf_counter()
        for topic, t_ns, msg in msgs:
            lag = (t_ns - t_first) * 1e-9 - (time.perf_counter() - wall0)
            if lag > 0:
                time.sleep(lag)
            if topic == trigger:
                sent[t_ns] = time.perf_counter()
            pubs[topic].publish(msg)
        time.sleep(2.0)
        spinner.stop()
    finally:
        rclpy.shutdown(context=ctx)
        out = stop_node(proc)
    stamps = np.array([m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec for _, m in odoms], dtype=np.int64)
    first_rx = odoms[0][0] if odoms else float("inf")
    n_inputs_after = sum(1 for wall in sent.values() if wall >= first_rx)  # published after the first odom arrived
    result = {
        "inputs": len(sent),
        "odoms": len(odoms),
        "odom_per_input_after_first": len(odoms) / max(n_inputs_after, 1),
        "stamps_increasing": bool(np.all(np.diff(stamps) > 0)),
    }
    if mode == "joint_states" and odoms:
        keys = np.array(sorted(sent))
        idx = np.clip(np.searchsorted(keys, stamps), 1, len(keys) - 1)
        idx = np.where(np.abs(keys[idx - 1] - stamps) < np.abs(keys[idx] - stamps), idx - 1, idx)  # nearest
        matched = np.abs(keys[idx] - stamps) <= 1000  # float seconds carry the stamp to < 1 us
        result["stamps_equal_input"] = float(np.mean(matched))
        lat = np.array([rx - sent[int(keys[i])] for (rx, _), i, ok in zip(odoms, idx, matched, strict=True) if ok])
        result["end_to_end_ms"] = {"p50": 1e3 * np.median(lat), "p99": 1e3 * np.percentile(lat, 99)}
    if diags:
        values = {kv.key: kv.value for kv in diags[-1].status[0].values}
        wanted = ("odom_latency_p50_ms", "odom_latency_p99_ms", "solve_rate_hz", "ticks", "skipped_ticks")
        result["node"] = {
            k: values.get(k) for k in (*wanted, "odom_correction_p95_mm", "samples_rejected", "last_error")
        }
    result["node_traceback"] = out[out.index("Traceback") :][:3000] if "Traceback" in out else None
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="joint_states", choices=("joint_states", "low_state"))
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--no-step", action="store_true", help="skip the per-step cost")
    a = ap.parse_args()
    print(f"uptime: {os.popen('uptime').read().strip()}")
    if not a.no_step:
        med, p99 = step_cost()
        print(f"propagation step (feed.estimator.propagate, one sample): median {med:.1f} us, p99 {p99:.1f} us")
    res = run_graph(a.mode, a.duration)
    for k, v in res.items():
        print(f"{k}: {v}")
    print(f"uptime: {os.popen('uptime').read().strip()}")


if __name__ == "__main__":
    main()
