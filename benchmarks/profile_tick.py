"""Per-phase profile of the estimator tick on the committed sample bag (issue 16: tick p50 / p99).

Wraps the phases of :meth:`mcoe_ros.estimation.estimator.Estimator.solve` with wall-clock timers (builder shift
arguments, solver shift, solve, estimate / covariance, the rest) and prints a table of p50 / p99 / mean per phase
and per tick kind (cold / warm), optionally with a cProfile of the ticks (``--cprofile N`` prints the N top
functions by cumulative time).

Run: python benchmarks/profile_tick.py [--seconds 3] [--backend compiled] [--threads 1] [--cprofile 25]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time
from collections import defaultdict
from dataclasses import replace

import numpy as np

from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import NodeConfig
from mcoe_ros.multibody import compiled
from mcoe_ros.ocp.solver import MCOESolver
from mcoe_ros.testing.data import play_low_states

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "mcoe_ros", "data", "go1_sample")


class PhaseTimer:
    """Accumulates wall time per named phase within the current tick."""

    def __init__(self):
        self.current: dict[str, float] = defaultdict(float)
        self.ticks: list[dict[str, float]] = []

    def wrap(self, obj, name: str, label: str) -> None:
        fn = getattr(obj, name)

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.current[label] += time.perf_counter() - t0

        setattr(obj, name, timed)


def run(seconds: float, backend: str, profile: cProfile.Profile | None, threads: int = 0) -> tuple[list, SensorFeed]:
    base = NodeConfig()
    est = base.estimator
    solver = replace(est.solver, backend=backend, **({"threads": threads} if threads else {}))
    config = replace(base, estimator=replace(est, solver=solver))
    feed = SensorFeed(config)
    estimator = feed.estimator
    timer = PhaseTimer()
    timer.wrap(estimator.builder, "shift_arguments", "builder.shift_arguments")
    timer.wrap(estimator.builder, "fresh_parts", "builder.fresh_parts")
    timer.wrap(estimator, "_new_solver", "new_solver")
    timer.wrap(estimator, "_terminal_covariance", "terminal_covariance")
    timer.wrap(estimator, "_estimate", "estimate (incl. covariance)")
    timer.wrap(estimator, "_check", "check")
    for cls in (compiled.CompiledSolver, MCOESolver):
        for name in ("shift", "solve"):
            timer.wrap(cls, name, f"solver.{name}")
    solve_fn = estimator.solve

    def solve(tick):
        timer.current.clear()
        cold = estimator.solver is None or tick.restarted
        t0 = time.perf_counter()
        if profile is not None:
            profile.enable()
        out = solve_fn(tick)
        if profile is not None:
            profile.disable()
        rec = dict(timer.current)
        solver = estimator.solver
        if isinstance(solver, compiled.CompiledSolver):  # the C++ phases inside solve / shift / covariance
            for name, value in solver.timings.items():
                rec[f"  C++ {name}"] = value
            solver.reset_timings()
        rec["total"] = time.perf_counter() - t0
        rec["kind"] = "cold/rebuild" if cold or "builder.fresh_parts" in rec else "warm"
        rec["published"] = out is not None
        timer.ticks.append(rec)
        return out

    estimator.solve = solve
    play_low_states(feed, seconds, SAMPLE)
    return timer.ticks, feed


def table(ticks: list[dict]) -> None:
    for kind in ("warm", "cold/rebuild"):
        sel = [t for t in ticks if t["kind"] == kind]
        if not sel:
            continue
        labels = sorted(
            {k for t in sel for k in t if k not in ("kind", "published")},
            key=lambda k: -np.mean([t.get(k, 0) for t in sel]),
        )
        print(f"\n{kind}: {len(sel)} ticks ({sum(t['published'] for t in sel)} published)")
        print("| phase | p50 (ms) | p99 (ms) | mean (ms) |")
        print("|---|---|---|---|")
        for lab in labels:
            count = lab.endswith("knots_allocated")  # a count, not seconds
            v = (1.0 if count else 1e3) * np.array([t.get(lab, 0.0) for t in sel])
            name = f"{lab} (count)" if count else lab
            print(f"| {name} | {np.percentile(v, 50):.2f} | {np.percentile(v, 99):.2f} | {v.mean():.2f} |")
    tot = 1e3 * np.array([t["total"] for t in ticks])
    print(
        f"\nall {len(ticks)} ticks: p50 {np.percentile(tot, 50):.1f} ms, p99 {np.percentile(tot, 99):.1f} ms, "
        f"max {tot.max():.1f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--backend", default="compiled")
    ap.add_argument("--threads", type=int, default=0, help="solver.threads (0: the configured default)")
    ap.add_argument("--cprofile", type=int, default=0, help="print the top N functions of a cProfile of the ticks")
    args = ap.parse_args()
    print("uptime:", os.popen("uptime").read().strip())
    prof = cProfile.Profile() if args.cprofile else None
    ticks, feed = run(args.seconds, args.backend, prof, args.threads)
    print("solver.threads:", getattr(feed.estimator.config.solver, "threads", 1))
    table(ticks)
    c = feed.estimator.counters
    print("iterations:", c.iterations[:5], "... mean", np.mean(c.iterations) if c.iterations else None)
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(args.cprofile)
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.cprofile)


if __name__ == "__main__":
    main()
