"""Cost of the IMU-bias consider analysis (``imu_bias.consider``) in the compiled solver, on and off side by side.

A Go1 window (4 point contacts, dt 2 ms, velocity process noise, exp-eigval payload) is solved once; then, alternating
``consider`` on and off ``--repeats`` times: the linearisation of every knot (``calc_diff``: the knots' Gauss–Newton
blocks, with the consider analysis also J^T dr/db) and the terminal covariance (the forward marginalisation, with the
consider analysis six more columns, and the sensitivity S). Medians in ms and the on / off ratios. The estimator's
tick runs one linearisation and one terminal covariance (docs/performance.md, run 15).

Run: .venv/bin/python benchmarks/bench_consider.py [--knots 100] [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from mcoe_ros.multibody import compiled
from mcoe_ros.ocp.solver import SolverOptions
from mcoe_ros.testing.go1 import go1_velocity_window


def timed(fn, n: int) -> float:
    """Mean wall time of ``n`` calls, s."""
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--knots", type=int, default=100, help="intervals of the window")
    ap.add_argument("--repeats", type=int, default=7, help="on/off alternations")
    args = ap.parse_args()
    if not compiled.available():
        raise SystemExit(f"the compiled extension is not built ({compiled.IMPORT_ERROR})")
    prob, xs, pi = go1_velocity_window(args.knots, seed=3, noise=0.5)
    solver = compiled.CompiledSolver(prob, SolverOptions(max_iter=3))
    solver.solve(xs, None, prob.param.theta(pi))
    cpp = solver._cpp
    times = {True: [], False: []}
    for _ in range(args.repeats):
        for on in (True, False):
            cpp.consider = on
            times[on].append((timed(cpp.calc_diff, 5), timed(cpp.terminal_covariance, 20)))
    on, off = (np.median(np.array(times[k]), axis=0) * 1e3 for k in (True, False))
    print(f"Go1 window, N = {args.knots}, 1 thread; `uptime`: {os.popen('uptime').read().strip()}")
    print("| consider | linearisation, ms | terminal covariance, ms |")
    print("|---|---|---|")
    print(f"| off | {off[0]:.2f} | {off[1]:.2f} |")
    print(f"| on | {on[0]:.2f} | {on[1]:.2f} |")
    print(f"| on / off | {on[0] / off[0]:.3f} | {on[1] / off[1]:.3f} |")


if __name__ == "__main__":
    main()
