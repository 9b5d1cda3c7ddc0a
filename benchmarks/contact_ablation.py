"""Ablation: the receding-horizon estimator with its own contact detection vs the simulator's ground-truth contacts.

    .venv/bin/python benchmarks/contact_ablation.py [--bag mcoe_ros/data/go1_sample] [--end 10]

Replays a simulator bag (with ``ground_truth/contacts``) twice through the estimator
(:class:`mcoe_ros.io.feed.SensorFeed`, as the replay and the node feed it): once as deployed (dynamics-based contact
detection), once with a detector whose flags are the recorded ground truth (injected into
:class:`mcoe_ros.estimation.estimator.Estimator`; everything else identical), and prints payload mass/CoM errors at the
end and per phase, plus how often the detected flags disagree with the ground truth. Isolates the contact-detection
share of the payload error on impact-rich gaits.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from mcoe_ros.estimation.estimator import Estimator
from mcoe_ros.io.bag import iter_messages
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import NodeConfig
from mcoe_ros.multibody.inertia import pi_about_com
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.testing.contacts import TruthDetector

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(bag: str, end: float, ground_truth: bool) -> dict:
    config = NodeConfig()
    gt_t, gt_flags = [], []
    for _topic, t_ns, msg in iter_messages(bag, ["ground_truth/contacts"]):
        gt_t.append(t_ns * 1e-9)
        gt_flags.append(np.array(msg.data, dtype=bool))
    detector = TruthDetector(RobotModel(config.estimator.robot), gt_t, gt_flags, ground_truth)
    feed = SensorFeed(config, Estimator(config.estimator, detector=detector))
    history, t0 = [], None
    wall = time.perf_counter()
    for _topic, t_ns, msg in iter_messages(bag, ["low_state"]):
        t = t_ns * 1e-9
        t0 = t if t0 is None else t0
        if t - t0 > end:
            break
        feed.low_state(msg, t)
        detector.epoch = feed.estimator.epoch or 0.0
        for e in feed.poll():
            mass, com, _ = pi_about_com(e.payload_pi)
            history.append((e.t - t0, mass, com))
    return {
        "history": history,
        "disagree_pct": 100.0 * detector.disagree[0] / max(detector.disagree[1], 1),
        "wall": time.perf_counter() - wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bag", default=os.path.join(ROOT, "mcoe_ros", "data", "go1_sample"))
    ap.add_argument("--end", type=float, default=10.0)
    ap.add_argument("--mass", type=float, default=7.2, help="true payload mass, kg")
    ap.add_argument("--com", type=float, nargs=3, default=(0.02, 0.0, 0.05), help="true payload CoM, m")
    args = ap.parse_args()
    cols = ["contacts", "mass error % at 6 s", "final mass error %", "final CoM error mm", "flags disagree %", "wall s"]
    print("| " + " | ".join(cols) + " |")
    print("|---|---|---|---|---|---|")
    for name, gt in (("detected (deployed)", False), ("ground truth", True)):
        r = run(args.bag, args.end, gt)
        hist = r["history"]
        at6 = min(hist, key=lambda h: abs(h[0] - 6.0))
        last = hist[-1]
        err = lambda m: 100.0 * abs(m - args.mass) / args.mass  # noqa: E731
        com_mm = 1e3 * np.linalg.norm(last[2] - np.array(args.com))
        cells = [name, f"{err(at6[1]):.2f}", f"{err(last[1]):.2f}", f"{com_mm:.1f}", f"{r['disagree_pct']:.2f}"]
        print("| " + " | ".join(cells + [f"{r['wall']:.0f}"]) + " |")


if __name__ == "__main__":
    main()
