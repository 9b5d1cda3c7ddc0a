"""Robust-loss and covariance-calibration ablation (issue 14, items 3-5) on the realism suite's cases.

For every case (simulated once, cached with ``--keep``) the optimal estimator runs with the process-noise and
contact pseudo-measurement residuals under a quadratic, Huber or Cauchy loss (``robust.loss``, threshold
``robust.threshold``; the Python solver for all three so they are compared on one backend); each run reports the
payload mass / CoM error, ATE and drift, and the NEES of the published payload and pose with the raw Gauss-Newton
covariance and with the residual-based calibration (scaled by the window's reduced chi-square, see
:func:`realism_suite.nees_summary`), both from the same run.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/robust_ablation.py --keep /tmp/rsf --json out.json --doc docs/robust.md
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

import numpy as np

from mcoe_ros.testing.datasets import load_bag


def _suite():
    """benchmarks/realism_suite.py (the suite's cases, truth and metrics), loaded by path (benchmarks is no package)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "realism_suite.py")
    spec = importlib.util.spec_from_file_location("realism_suite", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["realism_suite"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


rs = _suite()

LOSSES = ("quadratic", "huber", "cauchy")


def cases() -> list[rs.Case]:
    """The suite's quick cases plus a trot in place and the soft-feet sway."""
    return [
        *rs.quick_cases(),
        rs.Case("trot", "5kg-off", "real", 3.0),
        rs.Case("squat-sway", "5kg-off", "feet", 4.0),
    ]


def series_entry(e) -> dict:
    """What a later calibration analysis needs of one published estimate."""
    return {
        "t": e.t,
        "payload_pi": e.payload_pi.tolist(),
        "payload_cov": e.payload_cov.tolist(),
        "position": e.position.tolist(),
        "quat_xyzw": e.quat_xyzw.tolist(),
        "pose_cov": e.pose_cov.tolist(),
        "chi2_dof": e.solve.get("chi2_dof"),
        "cov_scale": e.solve.get("cov_scale"),
    }


def row(case: rs.Case, loss: str, res: rs.Result) -> str:
    nees = res.extra.get("nees", {})
    return (
        f"| {case.name} | {loss} | {rs.mass_cell(res)} | {rs.fmt(res.com_mm, '.0f')} | {rs.fmt(res.ate_cm)} | "
        f"{rs.fmt(res.drift_pct, '.1f')} | {rs.nees_cell(nees, 'payload')} | {rs.nees_cell(nees, 'pose')} | "
        f"{rs.nees_cell(nees, 'pose_mean')} | {rs.fmt(nees.get('chi2_dof_final'), '.3g')} |"
    )


HEAD = (
    "| case | loss | mass err | CoM mm | ATE cm | drift % | NEES payload raw / cal | NEES pose final raw / cal | "
    "NEES pose mean raw / cal | σ̂² final |\n|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", default="/tmp/rsf", help="directory of the simulated bags (written if missing)")
    ap.add_argument("--json", default="", help="append-only JSON results (resumed: finished runs are skipped)")
    ap.add_argument("--doc", default="", help="write the markdown table here")
    ap.add_argument("--only", default="", help="comma-separated case names (substring match)")
    ap.add_argument("--losses", default=",".join(LOSSES))
    ap.add_argument("--threshold", type=float, default=None, help="robust.threshold (default: the parameter's)")
    ap.add_argument("--contact-only", action="store_true", help="robust.process false (loss on the contacts only)")
    args = ap.parse_args()
    selected = [c for c in cases() if not args.only or any(s in c.name for s in args.only.split(","))]
    done = json.load(open(args.json, encoding="utf-8")) if args.json and os.path.exists(args.json) else {}
    os.makedirs(args.keep, exist_ok=True)
    lines = []
    for case in selected:
        path = rs.make_case_bag(case, args.keep)
        series, _ = load_bag(path)
        pi_true, odom, t0 = rs.read_truth(path)
        for loss in args.losses.split(","):
            label = loss + ("+contact-only" if args.contact_only else "")
            label += "" if args.threshold is None else f"+c{args.threshold:g}"
            key = f"{case.name}|{label}"
            if key not in done:
                overrides = {"robust.loss": loss, "solver.backend": "python"}
                if args.contact_only:
                    overrides["robust.process"] = False
                if args.threshold is not None:
                    overrides["robust.threshold"] = args.threshold
                t = time.perf_counter()
                res, _ = rs.run_oe(series, t0, pi_true, odom, overrides, with_ekf=False)
                done[key] = {**res.__dict__, "wall_s": time.perf_counter() - t}
                done[key]["series"] = [series_entry(e) for e in rs.LAST_HISTORY]
                if args.json:
                    with open(args.json, "w", encoding="utf-8") as fh:
                        json.dump(done, fh, indent=1, default=float)
            res = rs.Result(**{k: v for k, v in done[key].items() if k not in ("wall_s", "series")})
            lines.append(row(case, label, res))
            print(lines[-1], f"({done[key]['wall_s']:.0f} s)", flush=True)
    table = HEAD + "\n" + "\n".join(lines)
    if args.doc:
        uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        with open(args.doc, "w", encoding="utf-8") as fh:
            fh.write(f"<!-- generated by benchmarks/robust_ablation.py, commit {commit}, uptime: {uptime} -->\n\n")
            fh.write(table + "\n")
    print(table)
    return 0 if np.isfinite(len(lines)) else 1


if __name__ == "__main__":
    sys.exit(main())
