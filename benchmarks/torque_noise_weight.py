"""Errors in variables of the reported joint torque (issue 13): the torque-noise weight frozen in the parameters vs
differentiated in them (``noise.joint_torque_weight`` frozen | parametric, :mod:`mcoe_ros.ocp.problem` "Parametric
noise"), side by side on the same bags.

Bags: the sensor ablation's sway rows (``benchmarks/sensor_ablation.py``: the suite's 4 s squat-sway with a 5 kg
off-centre payload, point feet, lossless joints, ONE noise field at its realistic level) and realism-suite cases
(``benchmarks/realism_suite.py``, full ``real`` imperfections). Every column runs the OE on the Python solver with the
torque-shaped velocity noise (``noise.joint_torque`` 0.1 N m, the simulated level) on top of a diagonal floor
(``--floor``: ``noise.process_velocity`` and ``noise.process_joint_velocity``), the two weights side by side, plus
the default configuration for reference; ``--variant`` adds overrides to the frozen/parametric columns (e.g.
``actuator.enabled=false``, ``noise.accelerometer=100`` = accelerometer off). Cell: mass error % / CoM error mm
(vertical component in brackets); ``--sigma`` adds the raw Gauss-Newton standard deviation of the vertical CoM (the
published covariance without its calibration factor), ``--actuator`` prints the identified actuator parameters of
each run (viscous N m s/rad, Coulomb N m, rotor inertia kg m^2 per joint group; last estimate)::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/torque_noise_weight.py --keep DIR \\
        [--rows clean tau_std] [--seeds 7 1 2] [--cases squat-sway:5kg-off:real:4] [--floor 0.002] \\
        [--variant actuator.enabled=false --variant noise.accelerometer=100] [--sigma] [--actuator]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

from mcoe_ros.apps.evaluate import payload_summary
from mcoe_ros.testing.reporting import parse_overrides
from mcoe_ros.testing.scripts import load_benchmark

sa = load_benchmark("sensor_ablation")
rs = sa.rs


def columns(floor: float, variant: list[str]) -> dict[str, dict]:
    """Column name -> OE overrides."""
    shaped = [
        "solver.backend=python",
        "noise.joint_torque=0.1",
        f"noise.process_velocity={floor:g}",
        f"noise.process_joint_velocity={floor:g}",
        *variant,
    ]
    return {
        "default": {},
        "frozen": parse_overrides([*shaped, "noise.joint_torque_weight=frozen"]),
        "parametric": parse_overrides([*shaped, "noise.joint_torque_weight=parametric"]),
    }


def cell(r: dict, sigma: bool) -> str:
    d = r["dcom_mm"]
    out = f"{r['mass_pct']:.2f} % / {np.linalg.norm(d):.0f} ({d[2]:+.0f})"
    if sigma:  # raw Gauss-Newton std of the vertical CoM of the last estimate
        est = rs.LAST_HISTORY[-1]
        raw = payload_summary(est.payload_pi, est.payload_cov / est.solve.get("cov_scale", 1.0))
        out += f" σz {1e3 * raw['com_std_m'][2]:.1f}"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", default="", help="write/reuse the simulated bags in this directory")
    ap.add_argument("--rows", nargs="*", default=["tau_std", "clean"], help="sensor-ablation rows")
    ap.add_argument("--seeds", type=int, nargs="+", default=[7, 1, 2], help="seeds of the sensor-ablation rows")
    ap.add_argument(
        "--cases", nargs="*", default=[], help="realism-suite cases SCENARIO:PAYLOAD:PROFILE:SECONDS (seed 7)"
    )
    ap.add_argument("--floor", type=float, default=0.002, help="diagonal velocity noise floor per step, m/s or rad/s")
    ap.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE", help="overrides (repeatable)")
    ap.add_argument("--sigma", action="store_true", help="add the raw Gauss-Newton std of the vertical CoM, mm")
    ap.add_argument("--actuator", action="store_true", help="print the identified actuator parameters too")
    args = ap.parse_args()
    cols = columns(args.floor, args.variant)
    head = "| bag | " + " | ".join(f"{c}: mass / CoM mm (z)" for c in cols) + " |"
    lines = [head, "|" + "---|" * (len(cols) + 1)]
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or tmp
        os.makedirs(root, exist_ok=True)
        bags = [
            (f"sway 5kg-off {row} s{seed}", sa.make_bag(row, seed, 1.0, root))
            for row in args.rows
            for seed in args.seeds
        ]
        for spec in args.cases:
            scenario, payload, profile, seconds = spec.split(":")
            case = rs.Case(scenario, payload, profile, float(seconds))
            bags.append((case.name, rs.make_case_bag(case, root)))
        actuator_lines = []
        for name, path in bags:
            t0 = time.perf_counter()
            cells = []
            for col, over in cols.items():
                cells.append(cell(sa.evaluate(path, over), args.sigma))
                act = rs.LAST_HISTORY[-1].actuator
                if args.actuator and act is not None:
                    actuator_lines.append(f"| {name} | {col} | " + " / ".join(f"{v:.4g}" for v in act[0]) + " |")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
            print(lines[-1], f"({time.perf_counter() - t0:.0f} s)", flush=True)
    print(f"\nfloor {args.floor:g}, variant {' '.join(args.variant) or '-'}\n")
    print("\n".join(lines))
    if actuator_lines:
        print(
            "\n| bag | column | identified actuator parameters (ActuatorModel.parameter_names order) |\n|---|---|---|"
        )
        print("\n".join(actuator_lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
