"""The node's solve schedule on a slower machine, without ROS (a benchmark, not a test): the sample bag replayed with
the node's schedule, every solve (tick + re-anchoring) taking ``--slowdown`` times its wall time in sensor time.

While a solve runs the samples keep arriving (odometry, grid) and the ticks that come due are skipped; when it ends,
the newest window is solved (as the node's solve thread does). ``--slowdown 1`` is this machine with one solve thread;
larger values model a slower or loaded machine. Prints one row per slowdown: solves per sensor second, late ticks
(more than a window after the previous solve), problems rebuilt, iterations per solve, tick wall time p50/p99 (this
machine), final payload mass error and the solves' base position RMS error against the bag's ground truth.

    PYTHONPATH=$PWD python benchmarks/bench_late_ticks.py --slowdown 1 4 8 --end 10
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from mcoe_ros.io.bag import iter_messages
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.testing.data import SAMPLE_BAG


def run(slowdown: float, end: float) -> dict:
    feed = SensorFeed()
    est = feed.estimator
    truth, estimates, busy_until, t0 = {}, [], -np.inf, None
    for topic, t_ns, msg in iter_messages(SAMPLE_BAG, ["low_state", "ground_truth/odom", "ground_truth/payload"]):
        t0 = t_ns if t0 is None else t0
        t = (t_ns - t0) * 1e-9
        if t > end:
            break
        if topic == "ground_truth/odom":
            p = msg.pose.pose.position
            truth[round(t_ns * 1e-9, 4)] = np.array([p.x, p.y, p.z])
            continue
        if topic == "ground_truth/payload":
            truth["mass"] = msg.inertia.m
            continue
        feed.low_state(msg, t_ns * 1e-9)
        feed.odometry()
        est.advance()
        if t < busy_until:
            continue
        tick = est.due()
        if tick is None:
            continue
        w0 = time.perf_counter()
        e = est.solve(tick)
        if e is not None:
            est.rebase(e, tick)
            estimates.append(e)
        busy_until = t + slowdown * (time.perf_counter() - w0)
    c = est.counters
    good = [e for e in estimates if e.source != "hold"]
    errors = [np.linalg.norm(e.position - truth[round(e.t, 4)]) for e in good if round(e.t, 4) in truth]
    # the odometry and the truth share the start position (the estimator's odom frame starts at the first solve)
    times = np.array(c.solve_times) * 1e3
    return {
        "solves_hz": c.ticks / end,
        "late": c.late if hasattr(c, "late") else "-",
        "rebuilt": c.rebuilt,
        "held": c.held,
        "iterations": float(np.mean(c.iterations)) if c.iterations else 0.0,
        "p50": float(np.percentile(times, 50)),
        "p99": float(np.percentile(times, 99)),
        "mass_err": 100.0 * abs(good[-1].payload_pi[0] - truth["mass"]) / truth["mass"],
        "pos_rms_cm": 100.0 * float(np.sqrt(np.mean(np.square(errors)))) if errors else float("nan"),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--slowdown", type=float, nargs="+", default=[1.0, 4.0, 8.0])
    ap.add_argument("--end", type=float, default=10.0, help="seconds of the bag")
    args = ap.parse_args(argv)
    print(f"tree {os.getcwd()}; uptime load {os.getloadavg()}")
    print(
        "| slowdown | solves / s | late ticks | rebuilt | held | iterations | tick p50 / p99 ms "
        "| mass error | pos RMS |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for s in args.slowdown:
        r = run(s, args.end)
        print(
            f"| {s:g} | {r['solves_hz']:.1f} | {r['late']} | {r['rebuilt']} | {r['held']} | {r['iterations']:.2f} "
            f"| {r['p50']:.0f} / {r['p99']:.0f} | {r['mass_err']:.2f} % | {r['pos_rms_cm']:.2f} cm |",
            flush=True,
        )
    print(f"uptime load {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
