"""Compiled hot path (mcoe_ros._mcoe) vs the Python reference, side by side in one run.

1. One solver iteration (linearisation of every knot, Riccati backward pass + arrival + linear rollout, one
   line-search trial) on Go1 windows (4 point contacts, dt 2 ms, noise on the velocities, exp-eigval payload) at
   N = 50 / 100 / 200: Python, compiled on 1 and 2 threads, their ratio, and the compiled Pinocchio-call floor (the
   Pinocchio calls that iteration makes, timed in C++ and summed, one thread). Minimum over ``--repeats``.
2. The estimator on the committed sample bag (``--bag-seconds``): tick solve time p50 / p99 and replay speed
   (bag seconds per wall second) with each backend.
3. Crocoddyl FDDP on a comparable Go1 horizon (N = 100), run by ``--crocoddyl-python`` (its own venv, see
   benchmarks/bench_crocoddyl.py): the iteration as above (calc + calcDiff + backward pass + one forward pass), and
   one more iteration inside each solver's own loop (:func:`loop_iteration`), where the linearisation after an
   accepted step reuses the trial's dynamics in both solvers.

Run: .venv/bin/python benchmarks/bench_compiled.py [--crocoddyl-python .venv-croc/bin/python]
         [--write docs/performance.md] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np

from mcoe_ros.multibody import compiled
from mcoe_ros.ocp.solver import MCOESolver, SolverOptions
from mcoe_ros.testing.go1 import go1_velocity_window, perturbed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "mcoe_ros", "data", "go1_sample")


def _best(fn, repeats: int) -> float:
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def iteration_times(n: int, repeats: int) -> dict:
    """Seconds of one iteration (min over repeats): Python, compiled 1 / 2 threads, compiled Pinocchio floor."""
    prob, xs_true, pi_true = go1_velocity_window(n, seed=1)
    rng = np.random.default_rng(2)
    xs = [prob.state.integrate(x, 1e-3 * rng.standard_normal(prob.ndx)) for x in xs_true]
    ws = [1e-3 * rng.standard_normal(prob.nw) for _ in range(n)]
    theta0 = prob.param.theta(perturbed(pi_true, 1.3))
    py = MCOESolver(prob, SolverOptions())
    py.set_guess(xs, ws, theta0)

    def py_iteration():
        prob.calc_diff(py.xs, py.ws, py.theta)
        py.compute_direction(1e-9)
        py.try_step(1.0)

    out = {"N": n, "python": _best(py_iteration, max(1, repeats // 4))}
    cs = compiled.CompiledSolver(prob, SolverOptions())
    cs.set_guess(xs, ws, theta0)
    cpp = cs._cpp

    def cpp_iteration():
        cpp.calc_diff()
        cpp.compute_direction(1e-9)
        cpp.try_step(1.0)

    for threads in (1, 2):
        cpp.threads = threads
        out[f"compiled_{threads}"] = _best(cpp_iteration, repeats)
    cpp.threads = 1
    # its phases, one thread (compared with Crocoddyl's calc + calcDiff / backward pass / forward pass)
    out["phases"] = {
        "linearisation": _best(cpp.calc_diff, repeats),
        "direction": _best(lambda: cpp.compute_direction(1e-9), repeats),
        "trial": _best(lambda: cpp.try_step(1.0), repeats),
    }
    out["floor"] = min(cpp.pinocchio_floor() for _ in range(repeats))
    out["loop"] = loop_iteration(prob, xs, ws, theta0, repeats)
    return out


LOOP_ITERATIONS = (1, 3)  #: iteration budgets of the two timed solves of :func:`loop_iteration`


def loop_iteration(prob, xs, ws, theta0, repeats: int) -> dict:
    """The cost of one more iteration inside the compiled solver's own loop, one thread: solves with budgets
    :data:`LOOP_ITERATIONS` = (k1, k2) from the same start (no convergence stop, no direction at the returned point),
    min over ``repeats`` each, (t2 - t1) / (k2 - k1). Unlike :func:`iteration_times` (calc_diff + direction + one
    trial, each call on its own), an iteration here is the solver's loop as it runs: direction, line search, and the
    linearisation at the accepted point, which reuses the trial's dynamics (Crocoddyl's loop reuses its forward pass
    the same way: benchmarks/bench_crocoddyl.py ``loop_iteration_s``). Also the accepted step lengths of the longer
    solve (1.0 = the full step, one trial)."""
    opts = SolverOptions(max_iter=max(LOOP_ITERATIONS), tol_stop=-1.0, tol_gap=-1.0, final_direction=False)
    cs = compiled.CompiledSolver(prob, opts)
    cpp = cs._cpp
    cpp.threads = 1
    best = {}
    for k in LOOP_ITERATIONS:
        best[k] = np.inf
        for _ in range(repeats):
            cs.set_guess(xs, ws, theta0)
            t0 = time.perf_counter()
            result = cpp.solve(k)
            best[k] = min(best[k], time.perf_counter() - t0)
    k1, k2 = LOOP_ITERATIONS
    alphas = [float(row[4]) for row in result["log"]]  # log rows: (iteration, cost, merit, gap, step, ...)
    return {"iteration_s": (best[k2] - best[k1]) / (k2 - k1), "iterations": int(result["iterations"]), "alphas": alphas}


def replay_times(backend: str, seconds: float) -> dict:
    """Tick solve-time percentiles and replay speed of the estimator on the sample bag with ``backend``."""
    from mcoe_ros.io.feed import SensorFeed
    from mcoe_ros.io.params import NodeConfig
    from mcoe_ros.testing.data import play_low_states

    base = NodeConfig()
    est = base.estimator
    config = replace(base, estimator=replace(est, solver=replace(est.solver, backend=backend)))
    feed = SensorFeed(config)
    wall = time.perf_counter()
    play_low_states(feed, seconds, SAMPLE)
    wall = time.perf_counter() - wall
    solve = np.array(feed.estimator.counters.solve_times)
    return {
        "ticks": int(solve.size),
        "p50": float(np.percentile(solve, 50)),
        "p99": float(np.percentile(solve, 99)),
        "speed": seconds / wall,
    }


def crocoddyl_time(python: str, n: int, threads: int = 1) -> dict | None:
    script = os.path.join(ROOT, "benchmarks", "bench_crocoddyl.py")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    cmd = [python, script, "--n", str(n), "--threads", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        print(f"crocoddyl benchmark failed: {out.stderr.strip()[-500:]}", file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 50 only, 0.6 s of the bag")
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--bag-seconds", type=float, default=2.0)
    ap.add_argument("--crocoddyl-python", help="python of a venv with crocoddyl (see bench_crocoddyl.py)")
    ap.add_argument("--write", help="write the tables to this markdown file")
    args = ap.parse_args()
    if not compiled.available():
        sys.exit(f"the compiled extension is not built: {compiled.IMPORT_ERROR}")
    sizes = (50,) if args.quick else (50, 100, 200)
    seconds = 0.6 if args.quick else args.bag_seconds
    lines = [f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}", ""]
    lines += [
        "| N | Python iteration (ms) | compiled 1 thread (ms) | compiled 2 threads (ms) | Python / compiled | "
        "Pinocchio floor (ms) | compiled / floor |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = {}
    for n in sizes:
        r = rows[n] = iteration_times(n, args.repeats)
        best = min(r["compiled_1"], r["compiled_2"])
        lines.append(
            f"| {n} | {1e3 * r['python']:.1f} | {1e3 * r['compiled_1']:.2f} | {1e3 * r['compiled_2']:.2f} | "
            f"{r['python'] / best:.1f} | {1e3 * r['floor']:.2f} | {best / r['floor']:.2f} |"
        )
        print(lines[-1], flush=True)
    lines += [
        "",
        "| estimator on the sample bag | ticks | solve p50 (ms) | solve p99 (ms) | replay speed (x real time) |",
    ]
    lines.append("|---|---|---|---|---|")
    for backend in ("python", "compiled"):
        r = replay_times(backend, seconds)
        lines.append(
            f"| {backend} ({seconds:g} s) | {r['ticks']} | {1e3 * r['p50']:.1f} | {1e3 * r['p99']:.1f} | "
            f"{r['speed']:.2f} |"
        )
        print(lines[-1], flush=True)
    if args.crocoddyl_python and 100 in rows:
        crocs = {t: crocoddyl_time(args.crocoddyl_python, 100, t) for t in (1, 2)}
        if crocs[1] is not None:
            c1 = crocs[1]
            lines += [
                "",
                f"| N = 100, iteration (ms) | Crocoddyl {c1['versions']['crocoddyl']} FDDP (pin "
                f"{c1['versions']['pinocchio']}) | compiled MCOE | MCOE / Crocoddyl |",
                "|---|---|---|---|",
            ]
            loop = rows[100]["loop"]
            lines.append(
                f"| 1 thread, one more iteration in each solver's loop | {1e3 * c1['loop_iteration_s']:.2f} | "
                f"{1e3 * loop['iteration_s']:.2f} | {loop['iteration_s'] / c1['loop_iteration_s']:.2f} |"
            )
            for t, croc in crocs.items():
                if croc is None:
                    continue
                mine = rows[100][f"compiled_{t}"]
                lines.append(
                    f"| {t} thread{'s' if t > 1 else ''} | {1e3 * croc['iteration_s']:.2f} | {1e3 * mine:.2f} | "
                    f"{mine / croc['iteration_s']:.2f} |"
                )
            ph = rows[100]["phases"]
            lines += [
                "",
                "| N = 100, one thread, ms | linearisation (MCOE: dynamics, x/w/θ derivatives, measurements; "
                "Crocoddyl: calc + calcDiff) | direction (Riccati) | one trial rollout |",
                "|---|---|---|---|",
                f"| compiled MCOE | {1e3 * ph['linearisation']:.2f} | {1e3 * ph['direction']:.2f} | "
                f"{1e3 * ph['trial']:.2f} |",
                f"| Crocoddyl FDDP | {1e3 * c1['calc_diff_s']:.2f} | {1e3 * c1['backward_s']:.2f} | "
                f"{1e3 * c1['forward_s']:.2f} |",
            ]
            print("\n".join(lines[-10:]), flush=True)
    lines += ["", f"uptime after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}"]
    print("\n".join(lines))
    if args.write:
        with open(args.write, "w", encoding="utf-8") as fh:
            fh.write("# Performance of the compiled hot path\n\n")
            fh.write(
                "Generated by `benchmarks/bench_compiled.py` (timings are noisy: compare ratios within one run).\n\n"
            )
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
