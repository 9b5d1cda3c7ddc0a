"""Sensitivity of the OE's payload to a constant accelerometer bias (issue 13): which noise schedule keeps a biased
accelerometer out of the payload mass.

The realism suite's recordings carry a seeded accelerometer bias (``--acc-bias`` 0.05 m/s² std per axis plus a random
walk), and the OE's mass error on them changes with the seed. This benchmark isolates that: it simulates one suite case
with every IMU bias and bias walk off (everything else as the case's profile; ``mcoe_sim --acc-bias 0 ...``), then adds
a constant offset to the recorded specific force (IMU frame, m/s²) before the estimator sees it, one row per offset,
and runs the OE with each ``--variant`` (default configuration first). Printed per variant and offset: payload mass
error (kg), CoM error (mm), and with ``imu_bias.enabled`` the estimated accelerometer bias; the last column is the
slope d(mass)/d(bias_z) in kg per m/s² (-M_total/g ≈ -1.8 kg per m/s² for the suite's 17 kg robot with 5 kg payload
would be a mass that explains the whole offset)::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/accelerometer_bias.py --keep DIR \\
        [--case squat-sway:5kg-off:real:4] [--seed 7] [--offset 0,0,0.05 ...] [--variant label:KEY=VALUE,KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

from mcoe_ros.testing.reporting import parse_overrides
from mcoe_ros.testing.scripts import load_benchmark

rs = load_benchmark("realism_suite")

NO_IMU_BIAS = ["--acc-bias", "0", "--acc-bias-walk", "0", "--gyro-bias", "0", "--gyro-bias-walk", "0"]
DEFAULT_OFFSETS = ("0,0,0", "0,0,0.05", "0,0,-0.05", "0.05,0,0", "0,0.05,0")
DEFAULT_VARIANTS = (
    "default:",
    "settled-time-0.5:noise.settled_time=0.5",
    "imu-bias:imu_bias.enabled=true,imu_bias.accelerometer=true",
    "imu-bias+tight-base:imu_bias.enabled=true,imu_bias.accelerometer=true,noise.process_base_linear=0.0001",
)


def make_bag(case, seed: int, root: str) -> str:
    """The case simulated without IMU biases (reused when present)."""
    path = os.path.join(root, f"{case.name}_nobias_seed{seed}")
    if os.path.exists(os.path.join(path, "sim_metadata.json")):
        return path
    if os.path.exists(path):
        shutil.rmtree(path)
    argv = ["--scenario", f"{case.scenario}:{case.seconds:g}", *rs.PAYLOADS[case.payload], *rs.PROFILES[case.profile]]
    if rs.sim_main([*argv, *NO_IMU_BIAS, "--seed", str(seed), "--out", path]) != 0:
        raise RuntimeError(f"mcoe_sim failed for {case.name}")
    return path


def run(path: str, offset: np.ndarray, overrides: dict) -> tuple[float, float, np.ndarray | None]:
    """(mass error kg, CoM error mm, estimated accelerometer bias (3,) or None) with ``offset`` added to the
    recorded specific force."""
    series, _ = rs.load_bag(path)
    series.acc[:] = series.acc + offset
    pi_true, odom, t0 = rs.read_truth(path)
    res, _ = rs.run_oe(series, t0, pi_true, odom, overrides, with_ekf=False)
    bias = res.extra.get("imu_bias")
    return res.mass_err_kg, res.com_mm, None if bias is None else np.asarray(bias[3:6])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", default="", help="write/reuse the simulated bags in this directory")
    ap.add_argument("--case", default="squat-sway:5kg-off:real:4", help="suite case SCENARIO:PAYLOAD:PROFILE:SECONDS")
    ap.add_argument("--seed", type=int, default=rs.SEED, help="simulator seed (white noise; the biases are off)")
    ap.add_argument("--offset", nargs="+", default=list(DEFAULT_OFFSETS), help="accelerometer offsets x,y,z m/s²")
    ap.add_argument(
        "--variant", nargs="+", default=list(DEFAULT_VARIANTS), help="label:KEY=VALUE,KEY=VALUE (empty = default)"
    )
    args = ap.parse_args()
    scenario, payload, profile, seconds = args.case.split(":")
    case = rs.Case(scenario, payload, profile, float(seconds))
    offsets = [np.array([float(v) for v in o.split(",")]) for o in args.offset]
    head = "| variant | " + " | ".join(f"offset ({o})" for o in args.offset) + " | d mass / d b_z, kg per m/s² |"
    lines = [head, "|" + "---|" * (len(offsets) + 2)]
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or tmp
        os.makedirs(root, exist_ok=True)
        path = make_bag(case, args.seed, root)
        for spec in args.variant:
            label, _, sets = spec.partition(":")
            overrides = parse_overrides([s for s in sets.split(",") if s])
            t0 = time.perf_counter()
            cells, masses = [], {}
            for name, off in zip(args.offset, offsets, strict=True):
                mass, com, bias = run(path, off, overrides)
                masses[name] = (off, mass)
                cell = f"{mass:+.3f} kg / {com:.0f} mm"
                if bias is not None:
                    cell += " (b̂ " + ", ".join(f"{b:+.3f}" for b in bias) + ")"
                cells.append(cell)
            vertical = [(o[2], m) for o, m in masses.values() if o[0] == 0.0 and o[1] == 0.0]
            bz, dm = np.array([z for z, _ in vertical]), np.array([m for _, m in vertical])
            slope = np.polyfit(bz, dm, 1)[0] if len(set(bz)) > 1 else float("nan")
            lines.append(f"| {label} | " + " | ".join(cells) + f" | {slope:+.2f} |")
            print(lines[-1], f"({time.perf_counter() - t0:.0f} s)", flush=True)
    print(f"\ncase {case.name}, seed {args.seed}, simulator IMU biases off; offsets added to the specific force\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
