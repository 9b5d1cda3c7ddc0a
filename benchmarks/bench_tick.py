"""Estimator tick time before / after, side by side: the sample bag replayed through the estimator (compiled backend,
default configuration) by two source trees, alternately, ``--repeats`` times each.

Each run is a fresh process (``PYTHONPATH`` = the tree, its own ``mcoe_ros._mcoe``) feeding the first ``--seconds``
of the bag through :class:`mcoe_ros.io.feed.SensorFeed` as the replay does; it reports the tick (``Estimator.solve``)
wall times: p50 / p99 / max over all ticks and over the warm ticks (not the first ``--cold-ticks``), and the replay
speed. The table gives, per tree, the median and the best over the repeats, and the after / before ratios.

``--threads-before`` / ``--threads-after`` set ``solver.threads`` in that tree's runs (0: the tree's default; a tree
without the parameter needs 0), e.g. ``--before . --threads-after 2`` compares 1 and 2 threads of one tree.
``--set-before`` / ``--set-after KEY=VALUE`` (repeatable, flat parameter names of ``mcoe_ros/io/params.py``) compare
two configurations, e.g. ``--before . --set-after noise.accelerometer_realised=true`` (the table says which backend
each side ran).

Run: python benchmarks/bench_tick.py --before /path/to/old/tree [--after .] [--seconds 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from mcoe_ros.testing.reporting import parse_overrides, run_in_tree

CHILD = r"""
import json, sys, time
import numpy as np
from mcoe_ros.io.bag import bag_topics, iter_messages
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.multibody import compiled
seconds, cold = float(sys.argv[1]), int(sys.argv[2])
sample, threads, overrides = sys.argv[3], int(sys.argv[4]), json.loads(sys.argv[5])
t_start = time.perf_counter()
if overrides:
    from mcoe_ros.io.params import node_config
    feed = SensorFeed(node_config({**overrides, **({"solver.threads": threads} if threads else {})}))
elif threads:
    from dataclasses import replace
    from mcoe_ros.io.params import NodeConfig
    base = NodeConfig()
    solver = replace(base.estimator.solver, threads=threads)
    feed = SensorFeed(replace(base, estimator=replace(base.estimator, solver=solver)))
else:
    feed = SensorFeed()
startup = time.perf_counter() - t_start
topic = next(n for n, i in bag_topics(sample).items() if i.msgtype.endswith("LowState"))
t0, wall = None, time.perf_counter()
for _, t_ns, msg in iter_messages(sample, [topic]):
    t0 = t_ns if t0 is None else t0
    if (t_ns - t0) * 1e-9 > seconds:
        break
    feed.low_state(msg, t_ns * 1e-9)
    feed.poll()
wall = time.perf_counter() - wall
est = feed.estimator
backend = "compiled" if isinstance(est.solver, compiled.CompiledSolver) else "python"
assert overrides or backend == "compiled"
t = np.array(est.counters.solve_times)
w = t[cold:]
print(json.dumps({"backend": backend, "ticks": int(t.size), "p50": float(np.percentile(t, 50)),
                  "p99": float(np.percentile(t, 99)),
                  "max": float(t.max()), "warm_p50": float(np.percentile(w, 50)),
                  "warm_p99": float(np.percentile(w, 99)), "speed": seconds / wall, "startup": startup}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="source tree of the old version (with its built extension)")
    ap.add_argument("--after", default=".", help="source tree of the new version")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads-before", type=int, default=0, help="solver.threads of the before runs (0: default)")
    ap.add_argument("--threads-after", type=int, default=0, help="solver.threads of the after runs (0: default)")
    ap.add_argument("--cold-ticks", type=int, default=5, help="ticks left out of the warm columns")
    for name in ("before", "after"):
        ap.add_argument(
            f"--set-{name}", action="append", default=[], metavar="KEY=VALUE", help=f"parameter of the {name} runs"
        )
    args = ap.parse_args()
    overrides = {name: parse_overrides(getattr(args, f"set_{name}")) for name in ("before", "after")}
    sample = os.path.join(os.path.abspath(args.after), "mcoe_ros", "data", "go1_sample")
    print("uptime:", os.popen("uptime").read().strip())
    runs = {"before": [], "after": []}
    for _ in range(args.repeats):
        for name in ("before", "after"):
            threads = getattr(args, f"threads_{name}")
            runs[name].append(
                run_in_tree(
                    getattr(args, name),
                    CHILD,
                    args.seconds,
                    args.cold_ticks,
                    sample,
                    threads,
                    json.dumps(overrides[name]),
                )
            )
    print("uptime after:", os.popen("uptime").read().strip())
    keys = ("p50", "p99", "max", "warm_p50", "warm_p99")
    print(
        f"\n{args.seconds:g} s of the sample bag, {runs['after'][0]['ticks']} ticks per run, {args.repeats} runs each"
        f" (solver.threads before {args.threads_before or 'default'}, after {args.threads_after or 'default'};"
        f" backend before {runs['before'][0]['backend']}, after {runs['after'][0]['backend']};"
        f" parameters before {overrides['before'] or 'default'}, after {overrides['after'] or 'default'})"
    )
    print("| tick (ms) | " + " | ".join(keys) + " | replay speed (x real time) |")
    print("|---|" + "---|" * (len(keys) + 1))
    table = {}
    for name in ("before", "after"):
        for stat, fn in (("median", np.median), ("best", np.min)):
            vals = [fn([r[k] for r in runs[name]]) for k in keys]
            speed = (np.median if stat == "median" else np.max)([r["speed"] for r in runs[name]])
            table[name, stat] = vals
            cells = " | ".join(f"{1e3 * v:.1f}" for v in vals)
            print(f"| {name}, {stat} of {args.repeats} | {cells} | {speed:.2f} |")
    for stat in ("median", "best"):
        ratios = [a / b for a, b in zip(table["after", stat], table["before", stat], strict=True)]
        print(f"| after / before ({stat}) | " + " | ".join(f"{r:.2f}" for r in ratios) + " | |")
    print(
        "\nper run (ms): " + json.dumps({n: [[round(1e3 * r[k], 1) for k in keys] for r in v] for n, v in runs.items()})
    )


if __name__ == "__main__":
    main()
