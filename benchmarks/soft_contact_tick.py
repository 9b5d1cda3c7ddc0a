"""Per-tick cost of the soft-contact process model vs the rigid one (both on the Python solver, actuator model off)
on the first ticks of the sample bag (docs/soft_contact.md):

    PYTHONPATH=$PWD .venv/bin/python benchmarks/soft_contact_tick.py [--ticks 8]
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from mcoe_ros.io.bag import iter_messages
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import node_config
from mcoe_ros.testing.data import EIV_OFF, SAMPLE_BAG


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ticks", type=int, default=8)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()}")
    for model in ("rigid", "soft"):
        # both rows without the errors-in-variables defaults (the soft model does not support them)
        over = {"dynamics.model": model, "actuator.enabled": False, "solver.backend": "python", **EIV_OFF}
        feed = SensorFeed(node_config(over))
        out = []
        for _topic, t_ns, msg in iter_messages(SAMPLE_BAG, ["low_state"]):
            feed.low_state(msg, t_ns * 1e-9)
            out += feed.poll()
            if feed.estimator.counters.ticks >= args.ticks:
                break
        times = feed.estimator.counters.solve_times
        print(
            f"{model}: {len(times)} ticks, cold {times[0]:.2f} s, warm median {np.median(times[1:]):.3f} s, "
            f"held {feed.estimator.counters.held}, last source {out[-1].source if out else None}"
        )
    print(f"load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
