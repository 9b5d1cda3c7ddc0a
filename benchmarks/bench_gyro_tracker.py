"""Cost of the gyro-bias tracker on the sample path, with and without the stance feet's yaw (not a test).

Two estimators (``imu_bias.stance_yaw`` on / off; both with ``imu_bias.attitude_tracking``, and one with neither)
are fed the same simulated recording sample by sample, in alternation, so the columns of a row come from the same
moments: per sample the IMU sample in (``Estimator.add_imu``: the tracker's step and, with the stance feet, the
reading turned to its heading) and the grid advance (``Estimator.advance``: contact detection and, with the stance
feet, the knots given to :class:`mcoe_ros.estimation.gyro_bias.StanceYaw`). The due solves run in between, untimed.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_gyro_tracker.py [--bag DIR] [--seconds 6]

Timings are noisy on a shared machine: compare the columns of one run (``uptime`` is printed).
"""

from __future__ import annotations

import argparse
import subprocess
import time

import numpy as np

from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import node_config
from mcoe_ros.testing.data import SAMPLE_BAG
from mcoe_ros.testing.datasets import load_bag

VARIANTS = {
    "no tracker": {"imu_bias.attitude_tracking": False},
    "tracker (tilt only)": {"imu_bias.stance_yaw": False},
    "tracker + stance yaw (default)": {},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bag", default=SAMPLE_BAG, help="a simulator recording (default: the sample bag)")
    ap.add_argument("--seconds", type=float, default=6.0, help="seconds of the recording to feed")
    args = ap.parse_args()
    series, _ = load_bag(args.bag)
    feeds = {name: SensorFeed(node_config(over)) for name, over in VARIANTS.items()}
    times = {name: ([], []) for name in feeds}
    n = int(np.searchsorted(series.t, args.seconds))
    for k in range(n):
        t = float(series.t[k])
        quat, gyro, acc = series.imu(k)
        for name, feed in feeds.items():
            est = feed.estimator
            t0 = time.perf_counter()
            est.add_imu(t, quat, gyro, acc)
            t1 = time.perf_counter()
            est.add_joints(t, series.q[k], series.dq[k], series.tau[k])
            t2 = time.perf_counter()
            est.advance()
            t3 = time.perf_counter()
            times[name][0].append(t1 - t0)
            times[name][1].append(t3 - t2)
            feed.poll()  # the due solve, untimed
    print(f"{n} samples of {args.bag}\n")
    print("| variant | add_imu median µs | p99 µs | advance median µs | p99 µs | vertical bias mrad/s |")
    print("|---|---|---|---|---|---|")
    for name, (imu, adv) in times.items():
        tracker = feeds[name].estimator.gyro_tracker
        bias = "—" if tracker is None else f"{1e3 * tracker.bias[2]:+.1f} ± {1e3 * np.sqrt(tracker.variance[2]):.1f}"
        imu_us, adv_us = 1e6 * np.array(imu), 1e6 * np.array(adv)
        print(
            f"| {name} | {np.median(imu_us):.1f} | {np.percentile(imu_us, 99):.1f} | {np.median(adv_us):.1f} | "
            f"{np.percentile(adv_us, 99):.1f} | {bias} |"
        )
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    print(f"\n`uptime`: {uptime}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
