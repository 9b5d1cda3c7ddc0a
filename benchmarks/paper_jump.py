"""MCOE paper Fig. 5 analogue: localisation during jumps (simulator ``pronk``), optimal estimator vs an IMU +
leg-kinematics Kalman filter (:mod:`mcoe_ros.estimation.leg_odometry`, PRONTO-like).

Data: ``mcoe_sim --scenario pronk`` (MuJoCo Go1, 7.2 kg payload as in Table II, 500 Hz), optional observation noise
:func:`mcoe_ros.testing.datasets.add_noise` (seed 0). Both estimators see the same samples:
- OE: :class:`mcoe_ros.estimation.estimator.Estimator`, default parameters but :data:`PROTOCOL` (the orientation's
  white noise), fed sample by sample; its output at each
  tick (every 50 ms) is the newest state of the window (causal, filtering estimate). Two payload priors: 'known' (prior
  at the simulated 7.2 kg payload, i.e. after identification, as for a robot with a correct model) and 'unknown'
  (the default 1 kg prior: the model is wrong by 6 kg until the payload is identified).
- EKF (:class:`mcoe_ros.testing.knot_ekf.KnotEkf`): steps once per grid knot of the *estimator's* sliding window
  with the information the OE uses: the same resampled sensors, the zero-velocity update on the OE's settled stance
  feet, the flat-ground height update on its detected stance feet; standard deviations from the same configuration.
  'bare EKF' (ablation, the filter of the older docs/jump.md): every detected stance foot, no ground update.
Smoothed columns (the MCOE paper's OE ran offline over the whole horizon, PRONTO is a filter): the OE's position of
each tick's knot taken from the last window that still held it (a fixed-lag smoother, lag = the window,
``estimator.window``; :class:`mcoe_ros.estimation.smoothed.SmoothedTrajectory`), and the EKF's Rauch–Tung–Striebel
smoother with the same lag (:func:`mcoe_ros.estimation.leg_odometry.fixed_lag_smooth`): "OE smoothed / EKF" is the
paper's comparison, "OE smoothed / EKF smoothed" the like-for-like one. The published output (the MPC's) is the
causal one.
Alignment: both start at the true position (EKF: at its first knot; OE: its first estimate is translated onto the
truth at that time); errors are ‖p − p_true‖ at the estimator's tick times.

Run: .venv/bin/python benchmarks/paper_jump.py [--quick] [--keep DIR] [--set KEY=VALUE ...]
  --quick: 2.6 s bag (2 jumps), sigma 0.01. Full: 5 s bag (5 jumps), sigma 0 and 0.01. --set: estimator parameter
  override (flat name of mcoe_ros/io/params.py, YAML value; the table is then printed, docs are not written).
Writes docs/jump[_quick].png and docs/jump[_quick].md.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from mcoe_ros.estimation.smoothed import SmoothedTrajectory  # noqa: E402
from mcoe_ros.io.feed import SensorFeed  # noqa: E402
from mcoe_ros.io.params import node_config  # noqa: E402
from mcoe_ros.multibody.inertia import pi_about_com  # noqa: E402
from mcoe_ros.testing.datasets import (  # noqa: E402
    add_noise,
    load_bag,
    load_truth_positions,
    make_bag,
    simulated_payload_pi,
)
from mcoe_ros.testing.knot_ekf import KnotEkf  # noqa: E402
from mcoe_ros.testing.reporting import command_line, md_table, parse_overrides, versions, write_doc  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
#: the paper's protocol: the IMU orientation is the truth with white noise (``add_noise``, sigma per sample), not an
#: attitude filter's correlated error, so the OE weighs it at a white level (the default before session 25; the
#: EKF takes it as exact)
PROTOCOL = {"noise.orientation": 0.02, "noise.orientation_gait": 0.0}  # 0: the same white level in flights


def make_pronk(path: str, seconds: float) -> None:
    make_bag(path, "pronk", seconds, ("--seed", "0"))


def payload_prior(pi: np.ndarray) -> dict:
    """Estimator overrides that put the payload prior at ``pi`` (mass, CoM, diagonal of the inertia about the CoM)."""
    mass, com, inertia = pi_about_com(pi)
    return {
        "payload.prior_mass": float(mass),
        "payload.prior_com": [float(c) for c in com],
        "payload.prior_inertia": [float(v) for v in np.diag(inertia)],
    }


def run(series, truth_t, truth_p, overrides: dict) -> dict:
    config = node_config({**PROTOCOL, **overrides})
    feed = SensorFeed(config)
    est = feed.estimator

    def truth_at(t: float) -> np.ndarray:
        return np.array([np.interp(t, truth_t, truth_p[:, i]) for i in range(3)])

    ekf = KnotEkf(est, truth_at, record=True)
    bare = KnotEkf(est, truth_at, settled=False, ground=False)
    oe_t, oe_p, ekf_t, ekf_p, bare_p, contacts = [], [], [], [], [], []
    smoothed = SmoothedTrajectory()  # each knot's position in the last window that held it
    wall = time.perf_counter()
    for k in range(len(series)):
        feed.sample(float(series.t[k]), series.q[k], series.dq[k], series.tau[k], *series.imu(k))
        out = feed.poll()  # advances the grid first, then solves if due
        bare.update()
        for knot in ekf.update():
            ekf_t.append(knot.t)
            ekf_p.append(ekf.position)
            bare_p.append(bare.position)
            contacts.append(knot.contacts)
        for e in out:
            oe_t.append(e.t - (est.epoch or 0.0))
            oe_p.append(e.position.copy())
        if out:
            smoothed.update(est)
    oe_t, oe_p = np.array(oe_t), np.array(oe_p)
    oe_sm = np.array([smoothed.position_at(t + (est.epoch or 0.0)) for t in oe_t])
    oe_p = oe_p - oe_p[0] + truth_at(oe_t[0])
    oe_sm = oe_sm - oe_sm[0] + truth_at(oe_t[0])
    ekf_t, ekf_p, bare_p = np.array(ekf_t), np.array(ekf_p), np.array(bare_p)
    ekf_sm = ekf.ekf.smoothed(est.n_intervals)[:, :3]  # the same lag as the OE's window
    ekf_at = np.array([[np.interp(t, ekf_t, ekf_p[:, i]) for i in range(3)] for t in oe_t])
    ekf_sm_at = np.array([[np.interp(t, ekf_t, ekf_sm[:, i]) for i in range(3)] for t in oe_t])
    bare_at = np.array([[np.interp(t, ekf_t, bare_p[:, i]) for i in range(3)] for t in oe_t])
    truth = np.array([truth_at(t) for t in oe_t])
    return {
        "t": oe_t,
        "truth": truth,
        "oe": oe_p,
        "ekf": ekf_at,
        "oe_err": np.linalg.norm(oe_p - truth, axis=1),
        "ekf_err": np.linalg.norm(ekf_at - truth, axis=1),
        "oe_zerr": np.abs(oe_p[:, 2] - truth[:, 2]),
        "ekf_zerr": np.abs(ekf_at[:, 2] - truth[:, 2]),
        "oe_sm": oe_sm,
        "ekf_sm": ekf_sm_at,
        "oe_sm_err": np.linalg.norm(oe_sm - truth, axis=1),
        "ekf_sm_err": np.linalg.norm(ekf_sm_at - truth, axis=1),
        "bare_err": np.linalg.norm(bare_at - truth, axis=1),
        "node_t": ekf_t,
        "contacts": np.array(contacts),
        "wall": time.perf_counter() - wall,
        "held": est.counters.held,
        "ticks": est.counters.ticks,
    }


HEADER = [
    "sigma",
    "OE payload prior",
    "OE RMS cm",
    "OE max cm",
    "OE final cm",
    "OE z RMS cm",
    "EKF RMS cm",
    "EKF max cm",
    "EKF final cm",
    "EKF z RMS cm",
    "OE / EKF RMS",
    "bare EKF RMS cm",
    "OE smoothed RMS cm",
    "EKF smoothed RMS cm",
    "OE smoothed / EKF RMS",
    "OE smoothed / EKF smoothed RMS",
]


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--keep", default="")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="estimator parameter override")
    args = ap.parse_args()
    overrides = parse_overrides(args.set)
    seconds = 2.6 if args.quick else 5.0
    sigmas = (0.01,) if args.quick else (0.0, 0.01)
    wall0 = time.perf_counter()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or tmp
        os.makedirs(root, exist_ok=True)
        path = os.path.join(root, f"pronk_{seconds:g}s")
        if not os.path.exists(path):
            make_pronk(path, seconds)
        clean, _ = load_bag(path)
        truth_t, truth_p = load_truth_positions(path)
        known = payload_prior(simulated_payload_pi())
        for sigma in sigmas:
            series = add_noise(clean, sigma, np.random.default_rng(0))
            for variant, over in (("known", known), ("unknown", {})):
                r = run(series, truth_t, truth_p, {**over, **overrides})
                results[sigma, variant] = r
                print(
                    f"sigma {sigma:g} payload {variant}: OE RMS {1e2 * rms(r['oe_err']):.2f} cm final "
                    f"{1e2 * r['oe_err'][-1]:.2f} cm | EKF RMS {1e2 * rms(r['ekf_err']):.2f} cm final "
                    f"{1e2 * r['ekf_err'][-1]:.2f} cm | bare EKF RMS {1e2 * rms(r['bare_err']):.2f} cm | smoothed "
                    f"OE {1e2 * rms(r['oe_sm_err']):.2f} EKF {1e2 * rms(r['ekf_sm_err']):.2f} cm "
                    f"[{r['wall']:.0f} s, {r['ticks']} ticks, {r['held']} held]",
                    flush=True,
                )
    rows = []
    for (sigma, variant), r in results.items():
        rows.append(
            [
                f"{sigma:g}",
                variant,
                *(
                    f"{1e2 * v:.2f}"
                    for v in (
                        np.sqrt(np.mean(r["oe_err"] ** 2)),
                        r["oe_err"].max(),
                        r["oe_err"][-1],
                        np.sqrt(np.mean(r["oe_zerr"] ** 2)),
                        np.sqrt(np.mean(r["ekf_err"] ** 2)),
                        r["ekf_err"].max(),
                        r["ekf_err"][-1],
                        np.sqrt(np.mean(r["ekf_zerr"] ** 2)),
                    )
                ),
                f"{rms(r['oe_err']) / rms(r['ekf_err']):.2f}",
                f"{1e2 * rms(r['bare_err']):.2f}",
                f"{1e2 * rms(r['oe_sm_err']):.2f}",
                f"{1e2 * rms(r['ekf_sm_err']):.2f}",
                f"{rms(r['oe_sm_err']) / rms(r['ekf_err']):.2f}",
                f"{rms(r['oe_sm_err']) / rms(r['ekf_sm_err']):.2f}",
            ]
        )
    if overrides:  # an ablation: the table only
        print(f"overrides {overrides}\n" + md_table(HEADER, rows))
        return
    sigma_plot = sigmas[-1]
    r = results[sigma_plot, "known"]
    ru = results[sigma_plot, "unknown"]
    fig, axes = plt.subplots(3, 1, figsize=(8, 7.5), sharex=True)
    for i in range(r["contacts"].shape[1]):
        axes[0].fill_between(
            r["node_t"], i, i + 0.8 * r["contacts"][:, i], step="post", color="tab:gray", alpha=0.7, linewidth=0
        )
    axes[0].set_yticks(np.arange(4) + 0.4, ["FL", "FR", "RL", "RR"])
    axes[0].set_title(f"pronk, sigma {sigma_plot:g}: detected contacts (shared by both estimators)")
    axes[1].plot(r["t"], r["truth"][:, 2], "k", label="truth")
    axes[1].plot(r["t"], r["oe"][:, 2], "tab:blue", label="OE (ours), payload known")
    axes[1].plot(ru["t"], ru["oe"][:, 2], "tab:cyan", ls="--", label="OE (ours), payload from 1 kg prior")
    axes[1].plot(r["t"], r["ekf"][:, 2], "tab:red", label="IMU + leg-kinematics EKF")
    axes[1].set_ylabel("base height [m]")
    axes[1].legend(loc="upper left")
    axes[2].plot(r["t"], 1e2 * r["oe_err"], "tab:blue", label="OE (ours), payload known")
    axes[2].plot(ru["t"], 1e2 * ru["oe_err"], "tab:cyan", ls="--", label="OE (ours), payload from 1 kg prior")
    axes[2].plot(r["t"], 1e2 * r["ekf_err"], "tab:red", label="EKF")
    axes[2].plot(r["t"], 1e2 * r["oe_sm_err"], "tab:blue", ls=":", label="OE smoothed (lag = window), payload known")
    axes[2].plot(r["t"], 1e2 * r["ekf_sm_err"], "tab:red", ls=":", label="EKF smoothed (same lag)")
    axes[2].set_ylabel("position error [cm]")
    axes[2].set_xlabel("time [s]")
    axes[2].legend(loc="upper left")
    fig.tight_layout()
    suffix = "_quick" if args.quick else ""
    os.makedirs(DOCS, exist_ok=True)
    png = os.path.join(DOCS, f"jump{suffix}.png")
    fig.savefig(png, dpi=110)
    total = time.perf_counter() - wall0
    text = (
        f"<!-- generated by {command_line(ROOT)} -->\n"
        f"pronk {seconds:g} s, noise seed 0, errors at the estimator's {len(r['t'])} tick times; {versions()}; "
        f"total wall time {total:.0f} s.\n\n" + md_table(HEADER, rows) + f"\n![jump](jump{suffix}.png)\n"
    )
    print(text)
    print("wrote", write_doc(DOCS, f"jump{suffix}.md", text), png)


if __name__ == "__main__":
    main()
