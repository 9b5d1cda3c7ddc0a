"""The published pose covariance against the error, per component (issue 14 item 5; docs/realism.md session 24).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/pose_nees.py [--profile hard-floor] [--seed N] [--only NAMES]
        [--keep DIR] [--set KEY=VALUE ...] [--unbias-acc] [--unbias-gyro] [--residuals]

Runs the OE of ``benchmarks/realism_suite.py`` (its cases, recordings and error alignment: translation and yaw of the
first pose) and prints, per case, over the second half of the published estimates: the 6-dof pose NEES (the suite's
``pose_mean_published``) and per component (x, y, z m; rotations rad, odom axes): mean e_i² / P_ii, the RMS error, the
mean published σ and its shares — the unestimated IMU biases' consider share (``Estimate.bias_cov``), the touch-downs'
drift, the feet's rolling and the ground (``noise.odometry_slip_time``, ``robot.foot_radius``,
``noise.stance_foot_height``) and the rest (the window's own, scaled). ``--unbias-acc`` / ``--unbias-gyro`` subtract the
simulator's mean IMU biases (``sim_metadata.json``) from the recording first (is the error the biases'?);
``--residuals`` (Python backend) also prints the settled stance feet's velocity pseudo-measurement residual |v| (RMS,
median, mm/s) over each solve's newest knots.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

from mcoe_ros.apps.evaluate import aligned_pose_errors
from mcoe_ros.estimation.drift import horizontal_share
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import node_config
from mcoe_ros.multibody.measurements import ContactVelocity
from mcoe_ros.testing.datasets import load_bag
from mcoe_ros.testing.reporting import parse_overrides
from mcoe_ros.testing.scripts import load_benchmark

rs = load_benchmark("realism_suite")
NAMES = ("x", "y", "z", "rot x", "rot y", "rot z")
DEFAULT_CASES = "walk_5kg-off_real,trot_5kg-off_real,trot-forward_3kg_real,squat-sway_5kg-off_real"


def components(estimates: list, odom: list) -> dict:
    """Per-component statistics of the second half of ``estimates`` against ``odom`` (see the module docstring)."""
    rows = []
    for n, err, jac in aligned_pose_errors([(e.t, e.position, e.quat_xyzw) for e in estimates], odom):
        e = estimates[n]
        cov = jac @ e.pose_cov @ jac.T
        bias = jac @ (e.bias_cov[0] if e.bias_cov is not None else np.zeros((6, 6))) @ jac.T
        shares = horizontal_share(e.solve.get("odometry_drift_std", 0.0), e.solve.get("odometry_rolling_std", 0.0))
        shares[2, 2] += e.solve.get("ground_std", 0.0) ** 2
        nees = float(err @ np.linalg.pinv(0.5 * (cov + cov.T), rcond=1e-14, hermitian=True) @ err)
        rows.append((err, np.diag(cov), np.diag(bias), np.diag(shares), nees))
    half = rows[len(rows) // 2 :]
    err = np.array([r[0] for r in half])
    var, bias, shares = (np.array([r[k] for r in half]) for k in (1, 2, 3))
    return {
        "nees": float(np.mean([r[4] for r in half])),
        "ratio": np.mean(err**2 / var, axis=0),
        "rms": np.sqrt(np.mean(err**2, axis=0)),
        "std": np.sqrt(var).mean(axis=0),
        "bias": np.sqrt(bias).mean(axis=0),
        "shares": np.sqrt(shares).mean(axis=0),
        "rest": np.sqrt(np.clip(var - bias - shares, 0.0, None)).mean(axis=0),
    }


def run(series, t0: float, overrides: dict, residuals: bool) -> tuple[list, np.ndarray]:
    """The OE over a recording (as the suite's run_oe): its published estimates and, with ``residuals``, the settled
    stance feet's pseudo-measurement residual |v| (m/s) at each solve's newest knots."""
    feed = SensorFeed(node_config({**overrides, **({"solver.backend": "python"} if residuals else {})}))
    est = feed.estimator
    history, speeds = [], []
    new_knots = est.config.grid.tick_knots
    for k in range(len(series)):
        feed.sample(t0 + float(series.t[k]), series.q[k], series.dq[k], series.tau[k], *series.imu(k))
        out = feed.poll()
        history.extend(out)
        if residuals and out and est.solver is not None:
            for knot in est.solver.problem.knots[:-1][-new_knots:]:
                for meas, rows in zip(knot.model.measurements, knot.model.r_slices, strict=True):
                    if isinstance(meas, ContactVelocity):  # r = W (0 - v): back to m/s with W's inverse
                        speeds.append(np.linalg.norm(np.linalg.solve(meas.W, knot.data.r[rows])))
    return [e for e in history if e.source != "hold"] or history, np.array(speeds)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    rs.add_case_arguments(ap, DEFAULT_CASES)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="estimator parameter override")
    ap.add_argument("--unbias-acc", action="store_true", help="subtract the simulated mean accelerometer bias")
    ap.add_argument("--unbias-gyro", action="store_true", help="subtract the simulated mean gyro bias")
    ap.add_argument("--residuals", action="store_true", help="also the stance-foot residuals (Python backend)")
    args = ap.parse_args()
    overrides = parse_overrides(args.set)
    root = args.keep or os.path.join(os.getcwd(), ".cache", "pose_nees")
    os.makedirs(root, exist_ok=True)
    for case in rs.select_cases(False, args.only, args.profile):
        path = rs.make_case_bag(case, root, args.seed)
        series, _ = load_bag(path)
        meta = json.load(open(os.path.join(path, "sim_metadata.json"), encoding="utf-8"))
        if args.unbias_acc:
            series.acc = series.acc - np.array(meta["acc_bias_mean"])
        if args.unbias_gyro:
            series.gyro = series.gyro - np.array(meta["gyro_bias_mean"])
        _, odom, t0 = rs.read_truth(path)
        estimates, speeds = run(series, t0, overrides, args.residuals)
        c = components(estimates, odom)
        print(f"\n{case.name} (seed {args.seed}): pose NEES {c['nees']:.2f} (6 dof, mean over the second half)")
        print("| component | e²/P | RMS error | σ | IMU biases' σ | drift, rolling, ground σ | rest σ |")
        print("|---|---|---|---|---|---|---|")
        for j, name in enumerate(NAMES):
            unit, scale = ("mm", 1e3) if j < 3 else ("mrad", 1e3)
            cells = [scale * c[k][j] for k in ("rms", "std", "bias", "shares", "rest")]
            print(f"| {name} ({unit}) | {c['ratio'][j]:.2f} | " + " | ".join(f"{v:.2f}" for v in cells) + " |")
        if args.residuals and speeds.size:
            print(
                f"stance-foot residual |v|: RMS {1e3 * np.sqrt(np.mean(speeds**2)):.1f} mm/s, "
                f"median {1e3 * np.median(speeds):.1f} mm/s ({speeds.size} foot-knots)"
            )
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    print(f"\noverrides {overrides}; `uptime`: {uptime}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
