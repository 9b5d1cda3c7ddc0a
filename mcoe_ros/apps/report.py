"""PNG report of an estimator run (matplotlib, Agg backend): payload mass with ±2σ, payload CoM, position error."""

from __future__ import annotations

import math

import numpy as np

from mcoe_ros.apps.evaluate import trajectory_errors
from mcoe_ros.estimation.estimate import Estimate
from mcoe_ros.multibody.inertia import pi_about_com


def write_report(path: str, history: list[Estimate], truth_payload: list, truth_odom: list, title: str) -> None:
    """Plot ``history`` against ground truth ([(t, pi)] payload, [(t, position, quat xyzw)] odometry) into ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = history[0].t
    t = np.array([e.t - t0 for e in history])
    mass = np.array([pi_about_com(e.payload_pi)[0] for e in history])
    mstd = np.array([math.sqrt(max(e.payload_cov[0, 0], 0.0)) for e in history])
    com = np.array([pi_about_com(e.payload_pi)[1] for e in history])
    fig, axes = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    ax = axes[0]
    ax.plot(t, mass, label="estimate")
    ax.fill_between(t, mass - 2 * mstd, mass + 2 * mstd, alpha=0.25, label="±2σ")
    if truth_payload:
        tt = [max(tp - t0, t[0]) for tp, _ in truth_payload] + [t[-1]]
        mm = [pi[0] for _, pi in truth_payload] + [truth_payload[-1][1][0]]
        ax.step(tt, mm, where="post", color="k", ls="--", label="ground truth")
    ax.set_ylabel("payload mass [kg]")
    ax.legend(loc="best")
    ax = axes[1]
    for k, name in enumerate("xyz"):
        ax.plot(t, 1e3 * com[:, k], label=f"c_{name}")
        if truth_payload and truth_payload[-1][1][0] > 0:
            ax.axhline(1e3 * pi_about_com(truth_payload[-1][1])[1][k], color=f"C{k}", ls="--", lw=0.8)
    ax.set_ylabel("payload CoM [mm]")
    ax.legend(loc="best", ncol=3)
    ax = axes[2]
    if truth_odom:
        traj = trajectory_errors([(e.t, e.position, e.quat_xyzw) for e in history], truth_odom)
        if traj:
            ax.plot(np.array(traj["_times"]) - t0, 100 * np.array(traj["_pos_err"]))
    ax.set_ylabel("position error [cm]")
    ax.set_xlabel("time [s]")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
