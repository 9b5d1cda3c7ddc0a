"""Soak benchmark of the ROS node on a real graph (not a test): LowState at a fixed rate for a long time.

Starts ``mcoe_estimator`` as its console-script process (private DDS domain, no sim time), publishes the sample
bag's LowState messages in a loop at ``--rate`` Hz (reliable, like the Unitree bridge), subscribes to the node's
odometry, payload and /diagnostics, and samples the node's RSS from /proc (every 500 messages). Every ``--every``
seconds it prints a row: peak RSS, messages published / received by the node / declared lost by the node /
undeclared (published minus received minus declared lost), odometry rate, end-to-end latency p50/p99 (odometry
receive time minus its stamp, the input sample's time, which for headerless LowState is its publication time: the
reception time minus the middleware's queueing delay), the node's own processing latency p50/p99 over its last 2000
messages (callback entry to odometry published, from its diagnostics), its solve rate, payload mass, and the
diagnostics level and message. ``--markdown FILE`` writes the table.

    python benchmarks/soak_node.py --duration 1800 --markdown docs/soak.md

Note: looping the 10 s bag makes the data jump back every 10 s (a discontinuity of the joint and IMU streams);
the estimator has to cope with it like with any other implausible input.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

os.environ.setdefault("ROS_DOMAIN_ID", str(200 + os.getpid() % 30))  # outside the tests' 100..199
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import rclpy  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from geometry_msgs.msg import InertiaStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from rclpy.serialization import deserialize_message  # noqa: E402
from unitree_legged_msgs.msg import LowState  # noqa: E402

from mcoe_ros.io.bag import iter_raw  # noqa: E402
from mcoe_ros.testing.data import SAMPLE_BAG  # noqa: E402
from mcoe_ros.testing.spin import SpinThread  # noqa: E402

LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


class Listener:
    """Odometry (receive wall time, stamp), payload mass and the node's diagnostics."""

    def __init__(self, ctx):
        self.node = rclpy.create_node("soak_listener", context=ctx)
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.n_odom = 0
        self.mass = float("nan")
        self.diag: dict = {}
        self.level, self.message = -1, ""
        self.node.create_subscription(Odometry, "/mcoe/odom", self._odom, 100)
        self.node.create_subscription(InertiaStamped, "/mcoe/payload/inertia", self._payload, LATCHED)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._diag, 10)

    def _odom(self, msg):
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        with self.lock:
            self.latencies.append(time.time() - stamp)
            self.n_odom += 1

    def _payload(self, msg):
        self.mass = msg.inertia.m

    def _diag(self, msg):
        for status in msg.status:
            if "mcoe" in status.name:
                with self.lock:
                    self.diag = {kv.key: kv.value for kv in status.values}
                    level = status.level
                    self.level = level[0] if isinstance(level, bytes) else int(level)
                    self.message = status.message

    def take(self):
        with self.lock:
            lat, n = self.latencies, self.n_odom
            self.latencies, self.n_odom = [], 0
            return lat, n, dict(self.diag), self.level, self.message


def load_messages() -> list:
    return [deserialize_message(raw, LowState) for _t, _ty, _tn, raw in iter_raw(SAMPLE_BAG, ["low_state"])]


def node_command(node: str | None = None, params: tuple[str, ...] = ()) -> list[str]:
    overrides = [a for p in params for a in ("-p", p)]
    if node:  # e.g. a wrapper script that profiles the node
        return [sys.executable, node, "--ros-args", "-r", "__ns:=/mcoe", *overrides]
    script = os.path.join(os.path.dirname(sys.executable), "mcoe_estimator")
    if not os.path.exists(script):
        script = shutil.which("mcoe_estimator") or ""
    if not script:
        raise SystemExit("soak_node: the mcoe_estimator console script is not installed")
    return [script, "--ros-args", "-r", "__ns:=/mcoe", *overrides]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of streaming")
    ap.add_argument("--rate", type=float, default=500.0, help="LowState rate, Hz")
    ap.add_argument("--every", type=float, default=10.0, help="seconds between table rows")
    ap.add_argument("--markdown", help="write the table (and the summary) to this file")
    ap.add_argument(
        "--warmup", type=float, default=300.0, help="seconds of warm-up left out of the steady RSS slope (see docs)"
    )
    ap.add_argument("--node", help="a Python script to run instead of the mcoe_estimator console script")
    ap.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        help="a node parameter NAME:=VALUE (repeatable), e.g. node.sensor_priority:=0",
    )
    args = ap.parse_args(argv)

    msgs = load_messages()
    log_path = os.path.join(tempfile.gettempdir(), f"soak_node_{os.getpid()}.log")
    log = open(log_path, "w")  # noqa: SIM115 - kept open for the node's lifetime
    proc = subprocess.Popen(node_command(args.node, tuple(args.param)), stdout=log, stderr=subprocess.STDOUT)
    ctx = rclpy.context.Context()
    rclpy.init(context=ctx)
    listener = Listener(ctx)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(listener.node)
    spinner = SpinThread(executor)
    player = rclpy.create_node("soak_player", context=ctx)
    pub = player.create_publisher(LowState, "/low_state", QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE))
    deadline = time.monotonic() + 180.0  # a loaded machine needs a while to import and build the models
    while time.monotonic() < deadline and not pub.get_subscription_count():
        time.sleep(0.1)
    if not pub.get_subscription_count():
        proc.kill()
        raise SystemExit(f"soak_node: the node never subscribed (log: {log_path})")
    time.sleep(1.0)

    header = (
        "| t s | peak RSS MB | published | received | declared lost | undeclared | odom Hz | latency p50 ms "
        "| latency p99 ms | in-node p50 ms | in-node p99 ms | solves Hz | payload kg | diag | load 1 min |"
    )
    rows = [header, "|" + "---|" * 15]
    print(f"soak: {args.duration:.0f} s of LowState at {args.rate:g} Hz; node pid {proc.pid}; log {log_path}")
    print(header, flush=True)
    period = 1.0 / args.rate
    t0 = time.monotonic()
    next_row = t0 + args.every
    published, i = 0, 0
    rss, row_t, all_lat = [], [], []
    peak = 0.0  #: peak RSS since the last row
    t_last_row = t0
    while True:
        now = time.monotonic()
        if now - t0 >= args.duration:
            break
        target = t0 + published * period
        if target > now:
            time.sleep(target - now)
        pub.publish(msgs[i])
        i = (i + 1) % len(msgs)
        published += 1
        if published % 500 == 0:
            peak = max(peak, rss_mb(proc.pid))
        if time.monotonic() >= next_row:
            row = _row(listener, peak, published, time.monotonic() - t_last_row, time.monotonic() - t0, all_lat)
            peak = 0.0
            t_last_row = time.monotonic()
            rss.append(row[1])
            row_t.append(row[0])
            rows.append(_fmt(row))
            print(rows[-1], flush=True)
            next_row += args.every
    # let the node drain its queue: until every published message is received or declared lost (or 120 s)
    deadline, last, t_change = time.monotonic() + 120.0, None, time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(1.0)
        with listener.lock:
            d = dict(listener.diag)
        now = (int(d.get("in_low_state_received", 0)), int(d.get("in_low_state_lost", 0)))
        if sum(now) >= published:
            time.sleep(1.5)  # one more diagnostics message
            break
        if now != last:
            last, t_change = now, time.monotonic()
        elif time.monotonic() - t_change > 15.0:
            break
    row = _row(
        listener, max(peak, rss_mb(proc.pid)), published, time.monotonic() - t_last_row, time.monotonic() - t0, all_lat
    )
    rss.append(row[1])
    rows.append(_fmt(row))
    print(rows[-1], flush=True)
    t_stop = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        rc = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = "killed"
    stop_s = time.monotonic() - t_stop
    spinner.stop()
    rclpy.shutdown(context=ctx)
    # The resident size swings by a few hundred MB with the solver's state (a restart frees the old problem's
    # workspace before the next one is built), so growth compares the peaks: the mean of the per-row peaks over the
    # last quarter of the run against the first quarter (the first row, start-up, left out).
    quarter = max(1, (len(rss) - 1) // 4)
    base = float(np.mean(rss[1 : 1 + quarter])) if len(rss) > 2 else rss[0]
    end = float(np.mean(rss[-quarter:]))
    growth = 100.0 * (end - base) / base
    # Steady growth: a straight line through the per-row peaks after the warm-up (FastDDS pools, the odometry buffers
    # filling up, the first solver restarts); the drain row at the end is left out.
    steady = [(t, r) for t, r in zip(row_t, rss, strict=False) if t >= args.warmup]
    slope_text = "too short for a steady slope"
    if len(steady) >= 3:
        ts, rs = np.array(steady).T
        slope = float(np.polyfit(ts / 60.0, rs, 1)[0])  # MB per minute
        per_30 = 100.0 * 30.0 * slope / float(rs[0])
        slope_text = f"{slope:+.3f} MB/min = {per_30:+.2f} % per 30 min (of {rs[0]:.1f} MB)"
    lat = np.asarray(all_lat) if all_lat else np.zeros(1)
    summary = [
        "",
        f"- duration {args.duration:.0f} s at {args.rate:g} Hz; published {published}; final row: received "
        f"{row[3]}, declared lost {row[4]}, undeclared {row[5]}"
        + (f"; node parameters {' '.join(args.param)}" if args.param else ""),
        f"- peak RSS per row: first quarter {base:.1f} MB -> last quarter {end:.1f} MB: growth {growth:+.2f} %",
        f"- steady RSS slope after {args.warmup:.0f} s of warm-up (line through the per-row peaks): {slope_text}",
        f"- processing latency over the run: p50 {1e3 * np.percentile(lat, 50):.0f} ms, "
        f"p99 {1e3 * np.percentile(lat, 99):.0f} ms ({lat.size} odometry messages)",
        f"- shutdown (SIGINT) took {stop_s:.2f} s, exit code {rc}; uptime load at the end {os.getloadavg()}",
    ]
    keys = (
        "ticks",
        "held_ticks",
        "skipped_ticks",
        "rebuilt_ticks",
        "late_ticks",
        "solve_time_p50_ms",
        "solve_time_p99_ms",
    )
    with listener.lock:
        diag = dict(listener.diag)
    summary.append("- node schedule: " + ", ".join(f"{k} {diag.get(k, 'n/a')}" for k in keys))
    summary.append(
        "- in-node latency over the whole run (node's 10 us histogram): p99 "
        f"{diag.get('odom_latency_run_p99_ms', 'n/a')} ms, "
        f"above 1 ms: {diag.get('odom_latency_run_over_1ms', 'n/a')} messages"
    )
    with open(log_path) as fh:
        text = fh.read()
    summary.append(
        f"- node log: {text.count('Traceback')} tracebacks, {text.count('Failed to publish')} rosout failures"
    )
    print("\n".join(summary))
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write("\n".join(rows + summary) + "\n")
    return 0


def _row(listener: Listener, peak_rss: float, published: int, span: float, t: float, all_lat: list) -> tuple:
    lat, n, diag, level, message = listener.take()
    all_lat.extend(lat)
    received = int(diag.get("in_low_state_received", 0))
    lost = int(diag.get("in_low_state_lost", 0))
    p50, p99 = (1e3 * np.percentile(lat, 50), 1e3 * np.percentile(lat, 99)) if lat else (np.nan, np.nan)
    return (
        t,
        peak_rss,
        published,
        received,
        lost,
        published - received - lost,
        n / span,
        p50,
        p99,
        listener.mass,
        f"{level}: {message[:60]}",
        os.getloadavg()[0],
        float(diag.get("odom_latency_p50_ms", "nan")),
        float(diag.get("odom_latency_p99_ms", "nan")),
        float(diag.get("solve_rate_hz", "nan")),
    )


def _fmt(r: tuple) -> str:
    return (
        f"| {r[0]:.0f} | {r[1]:.1f} | {r[2]} | {r[3]} | {r[4]} | {r[5]} | {r[6]:.1f} | {r[7]:.0f} | {r[8]:.0f} "
        f"| {r[12]:.2f} | {r[13]:.2f} | {r[14]:.1f} | {r[9]:.2f} | {r[10]} | {r[11]:.2f} |"
    )


if __name__ == "__main__":
    raise SystemExit(main())
