"""How the input-rate odometry's step was chosen: its error against the solves over open-loop horizons, by variant.

Replays the first seconds of the sample bag through the feed (a solve per ``tick_period``), keeping every solve with
its newest knot. Then, for every solve i, a propagator track anchored at solve i is stepped through the input samples
(no re-anchoring) to the newest node of a later solve j, H = t_j - t_i later, and compared with it: position and
velocity differences, what a re-anchoring after an H-long solve would correct. Variants: the IMU + leg-kinematics
filter (default), the accelerometer alone (no stance-foot update), the legs alone (constant velocity between the
stance-foot updates). Also the cost of one step (median, this machine: see ``uptime``).

Run: OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_propagation.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pinocchio as pin

from mcoe_ros.estimation.propagation import Propagator
from mcoe_ros.io.bag import iter_messages
from mcoe_ros.io.feed import SensorFeed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "mcoe_ros", "data", "go1_sample")
VARIANTS = {
    "imu+legs (default)": {},
    "imu only": {"use_legs": False},
    "legs only": {"use_accelerometer": False},
    "imu+legs, IMU orientation": {"integrate_gyro": False},
}


def record(seconds: float, start: float = 0.0):
    """(feed, solves [(estimate, newest knot)], entries of the propagator) over ``seconds`` of the bag from
    ``start`` s (the estimator starts there)."""
    feed = SensorFeed()
    est = feed.estimator
    est.propagator.horizon = seconds + 1.0  # keep every entry
    solves, t0 = [], None
    for _topic, t_ns, msg in iter_messages(SAMPLE, ["low_state"]):
        t0 = t_ns if t0 is None else t0
        if (t_ns - t0) * 1e-9 < start:
            continue
        if (t_ns - t0) * 1e-9 > start + seconds:
            break
        feed.low_state(msg, t_ns * 1e-9)
        feed.odometry()
        est.advance()
        tick = est.due()
        if tick is not None:
            out = est.solve(tick)
            if out is not None:
                solves.append((out, tick.knots[-1]))
                est.rebase(out, tick)
    return feed, solves, list(est.propagator.entries)


def evaluate(feed, solves, entries, variant: dict, horizons: list[float]) -> dict:
    cfg = feed.estimator.config.noise
    prop = Propagator(feed.estimator.robot, cfg.accelerometer, cfg.gyro, cfg.foot_velocity, **variant)
    times = np.array([k.t for _e, k in solves])
    out = {}
    for h in horizons:
        dp, dv, dr = [], [], []
        for est_i, knot_i in solves:
            j = int(np.searchsorted(times, knot_i.t + h - 1e-9))
            if j >= len(solves) or abs(times[j] - knot_i.t - h) > 1e-6:
                continue
            track = prop.anchor(est_i, knot_i.imu, knot_i.t)
            for entry in entries:
                if knot_i.t < entry.t <= times[j] + 1e-9:
                    prop.step(track, entry, prop.scratch)
            est_j = solves[j][0]
            dp.append(np.linalg.norm(track.p - est_j.position))
            dv.append(np.linalg.norm(track.rot.T @ track.v - est_j.linear_velocity))
            q = est_j.quat_xyzw
            rot_j = pin.Quaternion(q[3], q[0], q[1], q[2]).toRotationMatrix()
            dr.append(np.degrees(np.linalg.norm(pin.log3(rot_j.T @ track.rot))))
        out[h] = (1e3 * np.median(dp), 1e3 * np.max(dp), np.median(dv), np.median(dr), len(dp))
    return out


def step_cost(feed, entries, n: int = 1000) -> float:
    """(wall, CPU) time of one step (us) over the last n samples, each stepped from 2 ms before it."""
    prop = feed.estimator.propagator
    track = prop.track
    start, cpu = time.perf_counter(), time.process_time()
    count = 0
    for entry in entries[-n:]:
        track.t = entry.t - 0.002
        prop.step(track, entry, prop.scratch)
        count += 1
    count = max(count, 1)
    return 1e6 * (time.perf_counter() - start) / count, 1e6 * (time.process_time() - cpu) / count


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--start", type=float, default=0.0, help="s from the bag start (6: the trot)")
    a = ap.parse_args()
    print(f"uptime: {os.popen('uptime').read().strip()}")
    feed, solves, entries = record(a.seconds, a.start)
    horizons = [0.05, 0.2, 0.4]
    print(f"{len(solves)} solves, {len(entries)} samples: {a.start:g} s to {a.start + a.seconds:g} s of the sample bag")
    head = "position mm (median / max), velocity m/s, orientation deg (medians)"
    print("| variant | " + " | ".join(f"H = {h:g} s: {head}" for h in horizons) + " |")
    print("|---|" + "---|" * len(horizons))
    for name, variant in VARIANTS.items():
        res = evaluate(feed, solves, entries, variant, horizons)
        cells = [
            f"{res[h][0]:.2f} / {res[h][1]:.2f}, {res[h][2]:.3f}, {res[h][3]:.3f} (n={res[h][4]})" for h in horizons
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    wall, cpu = step_cost(feed, entries)
    print(f"step cost: {wall:.1f} us wall, {cpu:.1f} us CPU per sample")
    print(f"uptime: {os.popen('uptime').read().strip()}")


if __name__ == "__main__":
    main()
