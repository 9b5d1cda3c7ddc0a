"""Contact ablation of the realism suite's ``squat-sway_5kg-off`` sways (issue 13): which foot/floor contact
property of the simulator biases the OE's payload (mostly its vertical CoM).

Each row simulates the suite's sway (4 s, 5 kg off-centre payload or ``--payload``, seed :data:`rs.SEED`) with a
base profile of ``benchmarks/realism_suite.py`` (``feet`` or ``real``) plus ONE change of the simulator's contact
flags (the later flag wins; row ``base/change``; ``base/c1+c2`` combines changes; ``no-FIELD`` zeroes one field of
the sensor model :class:`mcoe_ros.sim.sensors.NoiseConfig`, e.g. ``real/point+no-tau_std``), then runs the OE with
the default configuration and with the overrides of ``--variant`` (default ``actuator.enabled=false``), and the
suite's naive and RLS baselines. Printed per row: mass error %, CoM error per
payload-frame axis and its norm (mm)::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/foot_contact_ablation.py --keep DIR [--rows feet feet/rolling0 ...]
        [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import fields, replace

import numpy as np

from mcoe_ros.multibody.inertia import pi_about_com
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.payload.regression import PayloadRegressor
from mcoe_ros.sim.cli import build_parser, config_from_args
from mcoe_ros.sim.recorder import record
from mcoe_ros.sim.sensors import NoiseConfig
from mcoe_ros.testing.datasets import load_bag
from mcoe_ros.testing.reporting import parse_overrides
from mcoe_ros.testing.scripts import load_benchmark

rs = load_benchmark("robust_ablation").rs  # the suite's case definitions, truth and OE runner

CASE = rs.Case("squat-sway", "5kg-off", "feet", 4.0)
#: one contact change each, appended to the base profile's simulator flags
CHANGES: dict[str, list[str]] = {
    "": [],
    "rolling0": ["--rolling-friction", "0"],
    "torsional0": ["--torsional-friction", "0"],
    "both0": ["--rolling-friction", "0", "--torsional-friction", "0"],
    "stiff": ["--contact-solref", "0.02", "1"],
    "condim3": ["--foot-condim", "3"],
    "radius1mm": ["--foot-radius", "0.001"],
    "softfeet-friction": ["--torsional-friction", "0.01", "--rolling-friction", "0.002"],  # SOFT_FEET's values
    "point": ["--foot-condim", "3", "--contact-solref", "0.02", "1"],  # the suite's _POINT_FEET
    "losses": rs._LOSSES,  # the suite's actuator losses (feet/losses = soft feet + losses, no sensor noise)
    "point-radius1mm": ["--foot-condim", "3", "--contact-solref", "0.02", "1", "--foot-radius", "0.001"],
}
ROWS = ("feet", *(f"feet/{c}" for c in CHANGES if c), "real", *(f"real/{c}" for c in CHANGES if c))


def make_bag(row: str, root: str, payload: str = CASE.payload) -> str:
    """Simulate (or reuse) the row's bag ``base/change[+change...]`` under ``root``."""
    base, _, change = row.partition("/")
    parts = [c for c in change.split("+") if c]
    noise_fields = {f.name for f in fields(NoiseConfig)}
    zeroed = [c[3:] for c in parts if c.startswith("no-")]
    flags = [c for c in parts if not c.startswith("no-")]
    if base not in rs.PROFILES or any(c not in CHANGES for c in flags) or any(f not in noise_fields for f in zeroed):
        raise ValueError(
            f"unknown row {row!r}: base/change[+change] with base in {list(rs.PROFILES)}, change in "
            f"{list(CHANGES)} or no-FIELD of NoiseConfig"
        )
    name = row.replace("/", "_").replace("+", "_")
    path = os.path.join(root, f"{CASE.scenario}_{payload}_{name}_{CASE.seconds:g}s")
    if os.path.exists(os.path.join(path, "sim_metadata.json")):
        return path
    scenario = f"{CASE.scenario}:{CASE.seconds:g}"
    argv = ["--scenario", scenario, *rs.PAYLOADS[payload], *rs.PROFILES[base]]
    argv += [a for c in flags for a in CHANGES[c]]
    cfg = config_from_args(build_parser().parse_args([*argv, "--seed", str(rs.SEED), "--out", path]))
    cfg = replace(cfg, noise=replace(cfg.noise, **{f: 0.0 for f in zeroed}))
    stats, _ = record(cfg, path, scenario_text=scenario)
    if stats.fell:
        raise RuntimeError(f"{path}: the robot fell")
    return path


def evaluate(series, pi_true, odom, t0, overrides: dict) -> tuple[float, np.ndarray]:
    """OE on the series: (mass error %, CoM error (3,) mm in the payload frame)."""
    res, _ = rs.run_oe(series, t0, pi_true, odom, overrides, with_ekf=False)
    _, c_est, _ = pi_about_com(rs.LAST_HISTORY[-1].payload_pi)
    _, c_true, _ = pi_about_com(pi_true)
    return res.mass_pct, 1e3 * (c_est - c_true)


def cell(mass_pct: float, dcom: np.ndarray) -> str:
    return f"{mass_pct:.2f} % | ({dcom[0]:+.0f}, {dcom[1]:+.0f}, {dcom[2]:+.0f}) = {np.linalg.norm(dcom):.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", default="", help="write/reuse the simulated bags in this directory")
    ap.add_argument("--rows", nargs="+", default=list(ROWS), help=f"subset of {ROWS}")
    ap.add_argument("--payload", default=CASE.payload, choices=list(rs.PAYLOADS), help="the suite's payload")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="overrides of both OE runs")
    ap.add_argument("--variant", action="append", default=None, metavar="KEY=VALUE", help="second column's overrides")
    ap.add_argument("--no-default", action="store_true", help="skip the first (default configuration) column")
    args = ap.parse_args()
    common = parse_overrides(args.set)
    variant = {**common, **parse_overrides(args.variant or ["actuator.enabled=false"])}
    vname = " ".join(args.variant or ["actuator.enabled=false"])
    robot = RobotModel()
    regressor = PayloadRegressor(robot)
    head = f"| row | OE mass | OE CoM x, y, z = norm mm | {vname}: mass | CoM mm | naive mass / CoM | RLS mass / CoM |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or tmp
        os.makedirs(root, exist_ok=True)
        for row in args.rows:
            path = make_bag(row, root, args.payload)
            series, _ = load_bag(path)
            pi_true, odom, t0 = rs.read_truth(path)
            base = "n/a | n/a" if args.no_default else cell(*evaluate(series, pi_true, odom, t0, common))
            var = cell(*evaluate(series, pi_true, odom, t0, variant))
            bl = rs.run_baselines(robot, regressor, series, pi_true)
            bls = " | ".join(f"{rs.mass_cell(bl[k])} / {rs.fmt(bl[k].com_mm, '.0f')}" for k in ("naive", "RLS"))
            lines.append(f"| {row} | {base} | {var} | {bls} |")
            print(lines[-1], flush=True)
    print("\n" + "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
