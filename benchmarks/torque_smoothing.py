"""Torque smoothing comparison: the OE's payload and trajectory on the same cases from several bag directories
and / or parameter overrides, in one table (mass error %, CoM error per trunk-frame axis and norm mm, ATE cm).

Rows = cases, columns = variants ``LABEL=DIR[:KEY=VALUE,...]`` (bag directory, as written by
``benchmarks/realism_suite.py --keep`` or ``benchmarks/torque_smoothing_bags.py``; optional OE overrides, flat names
of ``mcoe_ros/io/params.py``)::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/torque_smoothing.py --cases CASE [CASE ...] \
        --variant orig=SUITE_DIR --variant h2=SMOOTHED_DIR \
        --variant bias=SUITE_DIR:imu_bias.enabled=true,imu_bias.accelerometer=true
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from mcoe_ros.multibody.inertia import pi_about_com
from mcoe_ros.testing.datasets import load_bag
from mcoe_ros.testing.reporting import parse_overrides
from mcoe_ros.testing.scripts import load_benchmark

rs = load_benchmark("robust_ablation").rs  # the suite's case definitions, truth and OE runner


def evaluate(path: str, overrides: dict) -> dict:
    """OE (default configuration + overrides) on one case bag: mass %, CoM error (3,) mm trunk frame, ATE cm."""
    series, _ = load_bag(path)
    pi_true, odom, t0 = rs.read_truth(path)
    res, _ = rs.run_oe(series, t0, pi_true, odom, overrides, with_ekf=False)
    _, c_est, _ = pi_about_com(rs.LAST_HISTORY[-1].payload_pi)
    _, c_true, _ = pi_about_com(pi_true)
    return {"mass_pct": res.mass_pct, "dcom_mm": 1e3 * (c_est - c_true), "ate_cm": res.ate_cm}


def cell(r: dict) -> str:
    d = r["dcom_mm"]
    return (
        f"{r['mass_pct']:.2f} % / ({d[0]:+.0f}, {d[1]:+.0f}, {d[2]:+.0f}) = {np.linalg.norm(d):.0f} / {r['ate_cm']:.2f}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", required=True, help="case (bag directory) names")
    ap.add_argument("--variant", action="append", required=True, metavar="LABEL=DIR[:KEY=VALUE,...]")
    args = ap.parse_args()
    variants = []
    for v in args.variant:
        label, rest = v.split("=", 1)
        root, _, sets = rest.partition(":")
        variants.append((label, root, parse_overrides([s for s in sets.split(",") if s])))
    head = (
        "| case | " + " | ".join(f"{label}: mass / CoM x, y, z = norm mm / ATE cm" for label, _, _ in variants) + " |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for case in args.cases:
        t = time.perf_counter()
        cells = [cell(evaluate(os.path.join(root, case), sets)) for _, root, sets in variants]
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
        print(f"[{time.perf_counter() - t:4.0f} s] {lines[-1]}", flush=True)
    print("\n" + "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
