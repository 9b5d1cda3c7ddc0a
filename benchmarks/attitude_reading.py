"""The IMU orientation reading's error on the realism suite's recordings (docs/realism.md session 25): what
``noise.orientation`` and ``imu_bias.orientation_offset_std`` stand for.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/attitude_reading.py [--profile hard-floor] [--seed N] [--only NAMES]
        [--keep DIR]

Per case: the tilt error (rotation about the IMU's x and y, mrad) of the recorded orientation reading (``--realistic``:
the IMU's own attitude filter, :class:`mcoe_ros.sim.sensors.AttitudeFilter`) against the true orientation — its mean
over the run (the slowly varying offset), the std of the rest (the fluctuation), the fluctuation's integral time scale
τ (s, the autocorrelation summed up to its first zero) and the white noise per knot that carries the same information,
σ_e √(2τ / dt) (rad, dt = the 2 ms grid).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np
import pinocchio as pin

from mcoe_ros.testing.datasets import load_bag
from mcoe_ros.testing.scripts import load_benchmark

rs = load_benchmark("realism_suite")
DEFAULT_CASES = "squat-sway_5kg-off_real,walk_5kg-off_real,trot_5kg-off_real,trot-forward_3kg_real,pronk_5kg-off_real"
DT = 0.002  #: s, the estimator's grid step


def integral_time(x: np.ndarray, dt: float) -> float:
    """Integral time scale (s) of a zero-mean series x (n,): Σ ρ(l) dt up to the autocorrelation's first zero."""
    var = float(np.mean(x * x))
    tau = 0.0
    for lag in range(len(x) // 2):
        rho = float(np.mean(x[: len(x) - lag] * x[lag:])) / var
        if rho <= 0.0:
            break
        tau += rho * dt
    return tau


def tilt_errors(series, odom, t0: float) -> np.ndarray:
    """(n, 2) rotation error of the reading about the IMU's x and y (rad) against the nearest true orientation."""
    times = np.array([o[0] for o in odom])
    out = np.empty((len(series.t), 2))
    for k, t in enumerate(series.t):
        j = min(int(np.searchsorted(times, t0 + t)), len(times) - 1)
        x, y, z, w = odom[j][2]
        true = pin.Quaternion(w, x, y, z).toRotationMatrix()
        qw, qx, qy, qz = series.quat[k]
        out[k] = pin.log3(true.T @ pin.Quaternion(qw, qx, qy, qz).toRotationMatrix())[:2]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    rs.add_case_arguments(ap, DEFAULT_CASES)
    args = ap.parse_args()
    root = args.keep or os.path.join(os.getcwd(), ".cache", "attitude_reading")
    os.makedirs(root, exist_ok=True)
    print("| case | mean tilt error x, y mrad | fluctuation std x, y mrad | τ x, y s | white equivalent x, y rad |")
    print("|---|---|---|---|---|")
    for case in rs.select_cases(False, args.only, args.profile):
        path = rs.make_case_bag(case, root, args.seed)
        series, _ = load_bag(path)
        _, odom, t0 = rs.read_truth(path)
        err = tilt_errors(series, odom, t0)
        mean = err.mean(axis=0)
        fluct = err - mean
        std = fluct.std(axis=0)
        tau = np.array([integral_time(fluct[:, a], DT) for a in range(2)])
        white = std * np.sqrt(2.0 * tau / DT)
        cells = [1e3 * mean, 1e3 * std, tau, white]
        fmt = ("{:.1f}", "{:.1f}", "{:.2f}", "{:.3f}")
        row = " | ".join(", ".join(f.format(v) for v in c) for f, c in zip(fmt, cells, strict=True))
        print(f"| {case.name} | {row} |", flush=True)
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    print(f"\nseed {args.seed}; `uptime`: {uptime}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
