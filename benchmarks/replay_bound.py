"""How fast can the sample-bag replay be with the same results? (issue 16: "replay >= 10x real time")

The replay's results are those of its tick schedule: one tick per ``estimator.tick_period`` of data on a window of
``estimator.window / estimator.dt`` intervals, each tick a warm Gauss-Newton iteration (a cold start of several). An
iteration must linearise every interval at the current point (the Pinocchio calls: constraint dynamics, their x / w / θ
derivatives, kinematics, regressor) and run the Riccati recursion over the window, which is sequential in time. So,
with the same results, the replay's solve time cannot be below

    ticks × mean iterations × (Pinocchio-call floor of one iteration / cores + one compiled direction)

(the floor split ideally over the machine's cores, the direction not split at all), before the covariance, the shift,
the line search, the per-sample path (decoding, contact detection, odometry) and the start-up. This script measures
every term of that bound in one run — the replay of the whole bag (ticks, iterations, solve times, the per-sample path
as wall time minus solve time) and, on a Go1 window of the same size, the compiled Pinocchio-call floor
(``Solver.pinocchio_floor``, C++ timers, one thread) and the compiled direction (min over ``--repeats``) — and prints
the bound next to the measured speed and the 10x budget.

Run: .venv/bin/python benchmarks/replay_bound.py [--seconds 10] [--repeats 15] [--cores 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from dataclasses import replace

import numpy as np

from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import NodeConfig
from mcoe_ros.multibody import compiled
from mcoe_ros.testing.data import SAMPLE_BAG, play_low_states
from mcoe_ros.testing.scripts import load_benchmark


def replay(seconds: float, threads: int) -> dict:
    """The replay's loop (SensorFeed, every message polled) over ``seconds`` of the sample bag, compiled backend."""
    base = NodeConfig()
    est = base.estimator
    solver = replace(est.solver, backend="compiled", threads=threads)
    feed = SensorFeed(replace(base, estimator=replace(est, solver=solver)))
    wall = time.perf_counter()
    play_low_states(feed, seconds, SAMPLE_BAG)
    wall = time.perf_counter() - wall
    counters = feed.estimator.counters
    solve = np.array(counters.solve_times)
    return {
        "wall": wall,
        "ticks": int(solve.size),
        "iterations": float(np.mean(counters.iterations)),
        "solve": float(solve.sum()),
        "window": feed.estimator.n_intervals,
    }


def iteration_terms(n: int, repeats: int) -> dict:
    """Seconds (min over repeats) of the compiled Pinocchio-call floor of one iteration (one thread) and of one
    compiled direction (Riccati backward pass, arrival, forward sweep) on a Go1 window of n intervals."""
    cpp = load_benchmark("bench_linearisation_calls").window_solver(n)  # bench_compiled's window and guess
    cpp.calc_diff()
    direction = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        cpp.compute_direction(1e-9)
        direction = min(direction, time.perf_counter() - t0)
    return {"floor": min(cpp.pinocchio_floor() for _ in range(repeats)), "direction": direction}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds of the sample bag to replay")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="cores the floor is split over")
    args = ap.parse_args()
    if not compiled.available():
        raise SystemExit(f"the compiled extension is not built: {compiled.IMPORT_ERROR}")
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    threads = compiled.knot_threads(0, offline=True)  # what mcoe_replay uses
    r = replay(args.seconds, threads)
    terms = iteration_terms(r["window"], args.repeats)
    per_iteration = terms["floor"] / args.cores + terms["direction"]
    bound = r["ticks"] * r["iterations"] * per_iteration
    rows = [
        ("replayed bag seconds", f"{args.seconds:g}"),
        ("ticks / mean iterations per tick", f"{r['ticks']} / {r['iterations']:.3f}"),
        (f"replay wall time (solver.threads {threads})", f"{r['wall']:.2f} s = {args.seconds / r['wall']:.2f}x"),
        ("  of which ticks (solve, covariance, shift)", f"{r['solve']:.2f} s"),
        ("  of which the per-sample path", f"{r['wall'] - r['solve']:.2f} s"),
        (f"Pinocchio-call floor of one iteration, N = {r['window']}, one thread", f"{1e3 * terms['floor']:.2f} ms"),
        ("compiled direction (Riccati), one thread", f"{1e3 * terms['direction']:.2f} ms"),
        (f"bound per iteration: floor / {args.cores} cores + direction", f"{1e3 * per_iteration:.2f} ms"),
        ("bound on the ticks alone: ticks x iterations x bound", f"{bound:.2f} s"),
        ("fastest replay the bound allows (ticks alone)", f"{args.seconds / bound:.1f}x"),
        ("time budget of a 10x replay", f"{args.seconds / 10:.2f} s"),
    ]
    print("\n| quantity | value |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    print("\nuptime after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
