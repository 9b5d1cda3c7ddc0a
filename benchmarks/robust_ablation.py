"""Robust-loss and covariance-calibration ablation (issue 14, items 3-5) on the realism suite's cases.

For every case (simulated once, cached with ``--keep``) the optimal estimator runs with the process-noise and
contact pseudo-measurement residuals under a quadratic, Huber or Cauchy loss (``robust.loss``, threshold
``robust.threshold``; the Python solver for all three so they are compared on one backend); each run reports the
payload mass / CoM error, ATE and drift, and the NEES of the published payload and pose with the raw Gauss-Newton
covariance and with the residual-based calibration (scaled by the window's reduced chi-square, see
:func:`realism_suite.nees_summary`), both from the same run.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/robust_ablation.py --keep bags/ --json out.json --doc docs/robust.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

import numpy as np

from mcoe_ros.testing.data import EIV_OFF
from mcoe_ros.testing.datasets import load_bag
from mcoe_ros.testing.scripts import load_benchmark

rs = load_benchmark("realism_suite")  # the suite's cases, truth and metrics

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
        "pose_cov_scale": e.solve.get("pose_cov_scale"),
        "bias_cov": None if e.bias_cov is None else [c.tolist() for c in e.bias_cov],
    }


def _estimates(series: list[dict]) -> list[SimpleNamespace]:
    """The stored estimates as objects with the fields :func:`realism_suite.nees_summary` reads."""
    return [
        SimpleNamespace(
            t=e["t"],
            payload_pi=np.array(e["payload_pi"]),
            payload_cov=np.array(e["payload_cov"]),
            position=np.array(e["position"]),
            quat_xyzw=np.array(e["quat_xyzw"]),
            pose_cov=np.array(e["pose_cov"]),
            bias_cov=tuple(np.array(c) for c in e["bias_cov"]) if e.get("bias_cov") else None,
            solve={
                "chi2_dof": e["chi2_dof"],
                "cov_scale": e["cov_scale"] or 1.0,
                "pose_cov_scale": e.get("pose_cov_scale") or e["cov_scale"] or 1.0,
            },
        )
        for e in series
    ]


def row(name: str, label: str, res: rs.Result, nees: dict) -> str:
    return (
        f"| {name} | {label} | {rs.mass_cell(res)} | {rs.fmt(res.com_mm, '.0f')} | {rs.fmt(res.ate_cm)} | "
        f"{rs.fmt(res.drift_pct, '.1f')} | {rs.nees_cell(nees, 'payload')} | {rs.nees_cell(nees, 'pose')} | "
        f"{rs.nees_cell(nees, 'pose_mean')} | {rs.fmt(nees.get('chi2_dof_final'), '.3g')} / "
        f"{rs.fmt(nees.get('consistency_final'), '.3g')} |"
    )


_CAL = " / ".join(rs.CALIBRATIONS)
HEAD = (
    f"| case | loss | mass err | CoM mm | ATE cm | drift % | NEES payload {_CAL} | NEES pose final {_CAL} | "
    f"NEES pose mean 2nd half {_CAL} | σ̂² / consistency factor final |\n|---|---|---|---|---|---|---|---|---|---|"
)


def render(done: dict, keep: str) -> str:
    """The ablation table (NEES recomputed from the stored estimates) and the band counts per variant."""
    order = {c.name: i for i, c in enumerate(cases())}
    keys = sorted(done, key=lambda k: (order.get(k.split("|")[0], 99), k.split("|")[1] != "quadratic", k))
    lines, counts = [], {}
    for key in keys:
        name, label = key.split("|")
        pi_true, odom, _ = rs.read_truth(os.path.join(keep, name))
        entry = done[key]
        res = rs.Result(**{k: v for k, v in entry.items() if k not in ("wall_s", "series")})
        nees = rs.nees_summary(_estimates(entry["series"]), pi_true, odom) if entry.get("series") else {}
        lines.append(row(name, label, res, nees))
        lo, hi = rs.CHI2_BAND_95[nees.get("payload_dof", 4)]
        for kind in rs.CALIBRATIONS:
            for what, dof_lo_hi in (("payload", (lo, hi)), ("pose", rs.CHI2_BAND_95[6])):
                v = nees.get(f"{what}_{kind}")
                c = counts.setdefault((label, what, kind), [0, 0])
                c[0] += v is not None and dof_lo_hi[0] <= v <= dof_lo_hi[1]
                c[1] += 1
    summary = [
        f"- {label}, {what} NEES inside the 95 % band with the {kind} covariance: {c[0]} of {c[1]} cases"
        for (label, what, kind), c in sorted(counts.items())
    ]
    return HEAD + "\n" + "\n".join(lines) + "\n\n" + "\n".join(summary)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--keep",
        default=os.path.join(tempfile.gettempdir(), "mcoe_realism_bags"),
        help="directory of the simulated bags (written if missing)",
    )
    ap.add_argument("--json", default="", help="JSON results (resumed: finished runs are skipped)")
    ap.add_argument("--report", nargs="*", default=None, help="only merge these JSON files and print/write the table")
    ap.add_argument("--doc", default="", help="write the markdown table here")
    ap.add_argument("--only", default="", help="comma-separated case names (substring match)")
    ap.add_argument("--losses", default=",".join(LOSSES))
    ap.add_argument("--threshold", type=float, default=None, help="robust.threshold (default: the parameter's)")
    ap.add_argument("--contact-only", action="store_true", help="robust.process false (loss on the contacts only)")
    args = ap.parse_args()
    if args.report is not None:
        done = {}
        for path in args.report:
            done.update(json.load(open(path, encoding="utf-8")))
    else:
        done = run(args)
    table = render(done, args.keep)
    if args.doc:
        uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        with open(args.doc, "w", encoding="utf-8") as fh:
            fh.write(f"<!-- generated by benchmarks/robust_ablation.py, commit {commit}, uptime: {uptime} -->\n\n")
            fh.write(table + "\n")
    print(table)
    return 0


def run(args) -> dict:
    """Run every selected (case, loss) not in the JSON yet; returns all results."""
    selected = [c for c in cases() if not args.only or any(s in c.name for s in args.only.split(","))]
    done = json.load(open(args.json, encoding="utf-8")) if args.json and os.path.exists(args.json) else {}
    os.makedirs(args.keep, exist_ok=True)
    for case in selected:
        path = rs.make_case_bag(case, args.keep)
        series, _ = load_bag(path)
        pi_true, odom, t0 = rs.read_truth(path)
        for loss in args.losses.split(","):
            label = loss + ("+contact-only" if args.contact_only else "")
            label += "" if args.threshold is None else f"+c{args.threshold:g}"
            key = f"{case.name}|{label}"
            if key in done:
                continue
            # the errors-in-variables defaults need quadratic costs (they stay on for the quadratic row)
            overrides = {"robust.loss": loss, "solver.backend": "python", **({} if loss == "quadratic" else EIV_OFF)}
            if args.contact_only:
                overrides["robust.process"] = False
            if args.threshold is not None:
                overrides["robust.threshold"] = args.threshold
            t = time.perf_counter()
            res, _ = rs.run_oe(series, t0, pi_true, odom, overrides, with_ekf=False)
            done[key] = {**res.__dict__, "wall_s": time.perf_counter() - t}
            done[key]["series"] = [series_entry(e) for e in rs.LAST_HISTORY]
            print(f"{key}: mass {rs.mass_cell(res)}, CoM {rs.fmt(res.com_mm, '.0f')} mm ({done[key]['wall_s']:.0f} s)")
            if args.json:  # atomically: a report may read it meanwhile
                with open(args.json + ".tmp", "w", encoding="utf-8") as fh:
                    json.dump(done, fh, indent=1, default=float)
                os.replace(args.json + ".tmp", args.json)
    return done


if __name__ == "__main__":
    sys.exit(main())
