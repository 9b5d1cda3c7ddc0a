"""Resident memory and problem-construction time of one estimator on the sample bag, old vs new tree side by side.

Each run is a fresh process (PYTHONPATH = the tree, so its ``mcoe_ros`` and its compiled extension are used) that
builds one estimator with the compiled backend, replays ``--seconds`` of the sample bag's LowState stream through
:class:`mcoe_ros.io.feed.SensorFeed` and reports: VmRSS / VmHWM (``/proc/self/status``) before the estimator and at
the end, the compiled problem's per-knot Pinocchio objects (if the extension exposes them), the time spent in
``Estimator._new_solver`` on cold ticks (problem construction) and the tick times (cold / warm p50). The trees are
alternated ``--repeats`` times so both see the same machine load.

Run: python benchmarks/bench_memory.py --before <old source tree> [--after .] [--seconds 2] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os

from mcoe_ros.testing.reporting import run_in_tree

CHILD = r"""
import json, sys, time
from dataclasses import replace
import numpy as np
from mcoe_ros.io.bag import bag_topics, iter_messages
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import NodeConfig
from mcoe_ros.multibody import compiled

def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) / 1024.0
    return out

seconds, sample = float(sys.argv[1]), sys.argv[2]
base = NodeConfig()
est = base.estimator
config = replace(base, estimator=replace(est, solver=replace(est.solver, backend="compiled")))
m0 = status()
feed = SensorFeed(config)
estimator = feed.estimator
build = []
fn = estimator._new_solver
def timed(*a, **k):
    t0 = time.perf_counter()
    try:
        return fn(*a, **k)
    finally:
        build.append(time.perf_counter() - t0)
estimator._new_solver = timed
topic = next(n for n, i in bag_topics(sample).items() if i.msgtype.endswith("LowState"))
t_first = None
for _, t_ns, msg in iter_messages(sample, [topic]):
    t_first = t_ns if t_first is None else t_first
    if (t_ns - t_first) * 1e-9 > seconds:
        break
    feed.low_state(msg, t_ns * 1e-9)
    feed.poll()
m1 = status()
solver = estimator.solver
assert isinstance(solver, compiled.CompiledSolver), type(solver)
t = np.array(estimator.counters.solve_times)
core = getattr(solver, "_cpp", None)
knots = [core.knot_data(k) for k in range(core.N + 1)]
counts = sum(d.pinocchio_datas for d in knots) if hasattr(knots[0], "pinocchio_datas") else None
print(json.dumps({"rss0": m0["VmRSS"], "rss": m1["VmRSS"], "hwm": m1["VmHWM"], "ticks": int(t.size),
                  "first_tick": float(t[0]), "warm_p50": float(np.percentile(t[3:], 50)) if t.size > 3 else None,
                  "build": [round(b, 4) for b in build], "objects": counts}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="source tree of the old version (with its built extension)")
    ap.add_argument("--after", default=".", help="source tree of the new version")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    sample = os.path.join(os.path.abspath(args.after), "mcoe_ros", "data", "go1_sample")
    print("uptime:", os.popen("uptime").read().strip())
    for _ in range(args.repeats):
        for name, tree in (("before", args.before), ("after", args.after)):
            print(name, json.dumps(run_in_tree(tree, CHILD, args.seconds, sample)), flush=True)
    print("uptime:", os.popen("uptime").read().strip())


if __name__ == "__main__":
    main()
