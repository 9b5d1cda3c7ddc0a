"""Cost of the ROS node's per-message path, phase by phase, without the executor (not a test).

Feeds the sample bag's LowState messages (as the CDR bytes a ``raw=True`` subscription receives) through the node's
sensor path -- decode, samples in, input-rate odometry step, odometry + pose published, grid advance with contact
detection -- running the due solves in between (not timed), and times every phase per message. Each message is
decoded and published both ways, in alternation, so that the two columns of a row come from the same moments:

- decode: rclpy's deserialisation into a LowState object and reading it back (:func:`mcoe_ros.io.convert.
  low_state_arrays`, the path before) vs reading the numbers in place (:class:`mcoe_ros.io.convert.LowStateDecoder`);
- publish: Odometry and PoseWithCovarianceStamped message objects filled field by field and published vs the same
  messages as CDR bytes (:class:`mcoe_ros.ros.convert.OdometryWriter`).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_node_path.py [--messages 3000]

Timings are noisy on a shared machine: compare the columns of one run (``uptime`` is printed).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import rclpy
from geometry_msgs.msg import PoseWithCovarianceStamped
from nav_msgs.msg import Odometry
from rclpy.serialization import deserialize_message
from unitree_legged_msgs.msg import LowState

from mcoe_ros.io.bag import bag_topics, iter_raw
from mcoe_ros.io.convert import low_state_arrays
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import NodeConfig
from mcoe_ros.ros.convert import OdometryWriter
from mcoe_ros.testing.data import SAMPLE_BAG


def _fill_objects(odom: Odometry, pose: PoseWithCovarianceStamped, odo) -> None:
    """The message-object path: every field assigned from Python (what the node published before)."""
    sec, nanosec = divmod(int(round(odo.t * 1e9)), 1_000_000_000)
    (px, py, pz), (qx, qy, qz, qw) = (float(v) for v in odo.position), (float(v) for v in odo.quat_xyzw)
    for msg in (odom, pose):
        msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nanosec
        p = msg.pose.pose
        p.position.x, p.position.y, p.position.z = px, py, pz
        p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w = qx, qy, qz, qw
        msg.pose.covariance = (0.5 * (odo.pose_cov + odo.pose_cov.T)).reshape(-1)
    t = odom.twist.twist
    t.linear.x, t.linear.y, t.linear.z = (float(v) for v in odo.linear_velocity)
    t.angular.x, t.angular.y, t.angular.z = (float(v) for v in odo.angular_velocity)
    odom.twist.covariance = (0.5 * (odo.twist_cov + odo.twist_cov.T)).reshape(-1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=3000, help="LowState messages of the sample bag to feed")
    ap.add_argument("--skip", type=int, default=500, help="first messages not timed (the first solves)")
    args = ap.parse_args(argv)
    os.environ.setdefault("ROS_DOMAIN_ID", str(200 + os.getpid() % 30))
    rclpy.init()
    node = rclpy.create_node("bench_node_path")
    pubs = {
        "objects": (
            node.create_publisher(Odometry, "bench/odom_a", 10),
            node.create_publisher(PoseWithCovarianceStamped, "bench/pose_a", 10),
        ),
        "bytes": (
            node.create_publisher(Odometry, "bench/odom_b", 10),
            node.create_publisher(PoseWithCovarianceStamped, "bench/pose_b", 10),
        ),
    }
    feed = SensorFeed(NodeConfig())
    decoder = feed.low_state_decoder(LowState)
    writer = OdometryWriter("odom", "base", transform=False)
    odom_msg, pose_msg = Odometry(), PoseWithCovarianceStamped()
    odom_msg.header.frame_id = pose_msg.header.frame_id = "odom"
    odom_msg.child_frame_id = "base"
    topic = next(name for name, info in bag_topics(SAMPLE_BAG).items() if info.msgtype.endswith("LowState"))
    raws = [(t_ns, raw) for _, _, t_ns, raw in iter_raw(SAMPLE_BAG, [topic])][: args.messages]
    names = ["decode (rclpy objects)", "decode (in place)", "samples in", "odometry step", "publish (objects)",
             "publish (CDR bytes)", "grid advance + contacts"]  # fmt: skip
    times = {n: [] for n in names}
    t0 = raws[0][0]
    jmap, fmap = feed.estimator.robot.joint_map, feed.estimator.robot.foot_map
    for i, (t_ns, raw) in enumerate(raws):
        timed = i >= args.skip
        a = time.perf_counter()
        arrays_ref = low_state_arrays(deserialize_message(raw, LowState), jmap, fmap)
        b = time.perf_counter()
        arrays = decoder.arrays(raw)
        c = time.perf_counter()
        feed.sample((t_ns - t0) * 1e-9, *arrays)
        d = time.perf_counter()
        odo = feed.odometry()
        e = time.perf_counter()
        f = g = e
        if odo is not None:
            _fill_objects(odom_msg, pose_msg, odo)
            pubs["objects"][0].publish(odom_msg)
            pubs["objects"][1].publish(pose_msg)
            f = time.perf_counter()
            writer.write(odo)
            pubs["bytes"][0].publish(writer.odom)
            pubs["bytes"][1].publish(writer.pose)
            g = time.perf_counter()
        feed.advance()
        h = time.perf_counter()
        tick = feed.due()
        if tick is not None:
            est = feed.solve(tick)
            if est is not None:
                rebase = feed.begin_rebase(est, tick)
                if rebase is not None:
                    rebase.run()
                    feed.finish_rebase(rebase)
        if timed:
            assert all(np.array_equal(x, y) for x, y in zip(arrays, arrays_ref, strict=True))
            for name, dt in zip(names, (b - a, c - b, d - c, e - d, f - e, g - f, h - g), strict=True):
                times[name].append(dt * 1e6)
    print(f"uptime: {os.popen('uptime').read().strip()}")
    print(f"{len(times[names[0]])} messages of the sample bag (after {args.skip}), per message, microseconds\n")
    print("| phase | median | mean | p99 |")
    print("|---|---|---|---|")
    for name in names:
        v = np.array(times[name])
        print(f"| {name} | {np.median(v):.1f} | {v.mean():.1f} | {np.percentile(v, 99):.1f} |")
    med = {n: np.median(times[n]) for n in names}
    rest = med["samples in"] + med["odometry step"] + med["grid advance + contacts"]
    before = med["decode (rclpy objects)"] + med["publish (objects)"] + rest
    after = med["decode (in place)"] + med["publish (CDR bytes)"] + rest
    print(f"| **path before** (objects) | {before:.1f} | | |")
    print(f"| **path now** (in place, bytes) | {after:.1f} | | |")
    print(
        f"\nnow / before = {after / before:.2f} (sum of medians; the executor's own cost per message is not included)"
    )
    node.destroy_node()
    rclpy.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
