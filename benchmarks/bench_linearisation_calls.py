"""Per-call breakdown of one compiled iteration's linearisation (C++-timed, mcoe_ros._mcoe).

bench_compiled.py's Go1 window (4 point contacts, dt 2 ms, default measurements, no impulse) at N knots: the compiled
solver's Pinocchio floor (linearisation of every knot from scratch + one trial, one thread) split by call site (each
PIN_CALL's text) and by MCOE_TIMED section (IntervalModel::dynamicsDiff / kinematics / measure, measurementGram:
their totals, Pinocchio calls included), microseconds per knot, from the repeat with the smallest floor; and the
wall time of calc_diff and try_step per knot (min over repeats).

Run: .venv/bin/python benchmarks/bench_linearisation_calls.py [--n 100] [--repeats 20]
"""

from __future__ import annotations

import argparse
import re
import time

import numpy as np

from mcoe_ros.multibody import compiled
from mcoe_ros.ocp.solver import SolverOptions
from mcoe_ros.testing.go1 import go1_velocity_window, perturbed


def _label(site: str) -> str:
    """'d.a = pin::constraintDynamics(d.model, ...)' -> 'constraintDynamics'; an MCOE_TIMED label as is."""
    m = re.search(r"(\w+)\(", site)
    if not m:
        return site
    return m.group(1) + (" ARG1" if "ARG1" in site else " ARG0" if "ARG0" in site else "")


def window_solver(n: int):
    """bench_compiled.py's compiled solver (mcoe_ros._mcoe.Solver): its N-knot window and perturbed guess, 1 thread."""
    prob, xs_true, pi_true = go1_velocity_window(n, seed=1)
    rng = np.random.default_rng(2)
    xs = [prob.state.integrate(x, 1e-3 * rng.standard_normal(prob.ndx)) for x in xs_true]
    ws = [1e-3 * rng.standard_normal(prob.nw) for _ in range(n)]
    cs = compiled.CompiledSolver(prob, SolverOptions())
    cs.set_guess(xs, ws, prob.param.theta(perturbed(pi_true, 1.3)))
    cpp = cs._cpp
    cpp.threads = 1
    return cpp


def breakdown(n: int, repeats: int) -> tuple[dict, dict]:
    cpp = window_solver(n)
    best, sites = np.inf, {}
    for _ in range(repeats):
        floor = cpp.pinocchio_floor()
        if floor < best:
            best, sites = floor, type(cpp).pinocchio_floor_sites()
    knots = n + 1
    per_site = {}
    for site, t in sites.items():
        per_site[_label(site)] = per_site.get(_label(site), 0.0) + 1e6 * t / knots

    def wall(fn):
        out = np.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            out = min(out, time.perf_counter() - t0)
        return 1e6 * out / knots

    totals = {
        "floor": 1e6 * best / knots,
        "calc_diff wall": wall(cpp.calc_diff),
        "try_step wall": wall(lambda: cpp.try_step(1.0)),
    }
    return per_site, totals


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    per_site, totals = breakdown(args.n, args.repeats)
    print("| call / section | us per knot |\n|---|---|")
    for name, t in sorted(per_site.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {t:.2f} |")
    for name, t in totals.items():
        print(f"| **{name}** | {t:.2f} |")


if __name__ == "__main__":
    main()
