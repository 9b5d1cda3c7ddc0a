"""Localisation through a trot (issue 14, item 4): the ablation that names the cause of the trot drift, and the fix.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/trot_localisation.py [--keep DIR] [--only NAMES] [--json OUT] [--seed N]

Simulates (or reuses, with ``--keep``) trot-in-place recordings of ``benchmarks/realism_suite.py``'s profiles (5 kg
off-centre payload, seed 7 or ``--seed``: ``real`` = Go1-like noise, IMU biases, actuator losses and soft round feet
on a soft floor; ``clean`` = perfect robot, point feet; ``feet`` = soft feet alone, ``round-feet`` / ``soft-floor``
its two halves; ``hard-floor`` = ``real`` on the clean floor; ``sensors`` / ``losses`` = one imperfection alone) and
prints, per case:

1. **Stance-foot kinematics against the truth** (ground-truth contact flags of the simulator, true base pose): how
   far the foot's frame (the centre of the foot sphere) sinks below its touch-down height during a stance and where
   it is when the stance ends (force below the simulator's 1 N), and the bias of the stance-foot base-velocity
   pseudo-measurement (the leg-kinematics velocity minus the true base velocity, mean over stance knots) -- the
   quantity the estimator and the EKF assume to be zero-mean.
2. **Localisation table**: final position error (3D, horizontal, vertical), ATE, drift % of the horizontal path,
   height RMS error, signed payload mass error, for the deployed estimator (OE), the OE with the simulator's contact
   flags injected into its detector (:class:`TruthDetector`), the OE before this branch (``noise.foot_height: 0``,
   ``contact.settle_fraction: 0``, ``contact.settle_time: 0``) and with one of the two changes, and the IMU +
   leg-kinematics EKF (:class:`mcoe_ros.estimation.leg_odometry.LegKinematicsEkf`) on the OE's grid knots with the
   detected flags, the true flags, with the ground-height update and with the velocity update on settled feet.

Errors are after the first-pose alignment of :func:`mcoe_ros.apps.evaluate.trajectory_errors` (translation and yaw);
drift is the final 3D error over the horizontal path length of the trunk origin.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pinocchio as pin

from mcoe_ros.apps.evaluate import trajectory_errors
from mcoe_ros.estimation.estimator import Estimator
from mcoe_ros.estimation.leg_odometry import LegKinematicsEkf
from mcoe_ros.io.bag import iter_messages, time_ns_of
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import node_config
from mcoe_ros.multibody.robot import GO1_FOOT_SOLE, RobotModel
from mcoe_ros.testing.contacts import TruthDetector
from mcoe_ros.testing.datasets import load_bag
from mcoe_ros.testing.scripts import load_benchmark

HERE = os.path.dirname(os.path.abspath(__file__))


rs = load_benchmark("realism_suite")

#: the cases: the suite's 3 s trot (its cached bag), 10 s trots in place under each profile, the suite's walk and
#: trot forward
CASES = [
    rs.Case("trot", "5kg-off", "real", 3.0),
    rs.Case("trot", "5kg-off", "real", 10.0),
    rs.Case("trot", "5kg-off", "clean", 10.0),
    rs.Case("trot", "5kg-off", "feet", 10.0),
    rs.Case("trot", "5kg-off", "round-feet", 10.0),
    rs.Case("trot", "5kg-off", "soft-floor", 10.0),
    rs.Case("trot", "5kg-off", "hard-floor", 10.0),
    rs.Case("trot", "5kg-off", "grip-floor", 10.0),
    rs.Case("trot", "5kg-off", "soft-grip", 10.0),
    rs.Case("trot", "5kg-off", "sensors", 10.0),
    rs.Case("trot", "5kg-off", "losses", 10.0),
    rs.Case("walk", "5kg-off", "real", 4.0),
    rs.Case("trot-forward", "3kg", "real", 3.0),
]

#: the two changes of this branch, off (their parameters' "off" values)
NO_GROUND = {"noise.foot_height": 0.0}
NO_SETTLE = {"contact.settle_fraction": 0.0, "contact.settle_time": 0.0}
NO_IMPULSE = "estimator.impulse_on_touchdown"
#: the joint velocities' process noise before it had its own parameter (the common noise.process_velocity)
OLD_JOINT = {"noise.process_joint_velocity": 0.0}
SETTLED = {"dynamics.rigid_contacts": "settled"}
ROLLING_CONTACTS = "dynamics.rolling_contacts"
HARD_FLOOR = {ROLLING_CONTACTS: True, "dynamics.landing_damping": 105.0}

#: OE rows: (name, parameter overrides, inject the simulator's contact flags)
OE_ROWS = [
    ("OE (deployed: ground height + settled feet)", {}, False),
    ("OE deployed, true contact flags", {}, True),
    # a landing over time instead of the impulse (dynamics.landing_damping, docs/realism.md session 18)
    ("OE landing damped 50 1/s for 50 ms", {"dynamics.landing_damping": 50.0, "dynamics.landing_time": 0.05}, False),
    ("OE landing damped 75 1/s for 50 ms", {"dynamics.landing_damping": 75.0, "dynamics.landing_time": 0.05}, False),
    ("OE landing damped 100 1/s for 50 ms", {"dynamics.landing_damping": 100.0, "dynamics.landing_time": 0.05}, False),
    ("OE landing by the impulse", {"dynamics.landing_damping": 0.0}, False),
    # the contact at the bottom of the round foot, the point it rolls on (robot.foot_contact_offset, session 19)
    (
        "OE contact at the foot's sole",
        {"robot.foot_contact_offset": list(GO1_FOOT_SOLE), "dynamics.rolling_radius": 0.0},
        False,
    ),
    # the round foot's point straight below its centre at every knot (dynamics.rolling_radius): held by the contacts
    # (session 22) or measured by the stance-foot velocity alone (session 23; 0.015 m the default)
    ("OE without rolling feet (before session 23)", {"dynamics.rolling_radius": 0.0}, False),
    (
        "OE rolling contacts 0.02 m (the foot's radius)",
        {"dynamics.rolling_radius": 0.02, ROLLING_CONTACTS: True},
        False,
    ),
    ("OE rolling contacts 0.01 m", {"dynamics.rolling_radius": 0.01, ROLLING_CONTACTS: True}, False),
    ("OE rolling point measured 0.01 m", {"dynamics.rolling_radius": 0.01}, False),
    ("OE rolling point measured 0.02 m", {"dynamics.rolling_radius": 0.02}, False),
    # a hard floor's physics: the contact at the sphere's bottom, the landing glide at the floor's 9.5 ms (session 23)
    ("OE hard-floor physics 0.02 m", {"dynamics.rolling_radius": 0.02, **HARD_FLOOR}, False),
    ("OE hard-floor physics 0.017 m", {"dynamics.rolling_radius": 0.017, **HARD_FLOOR}, False),
    ("OE without ground height and settled feet", {**OLD_JOINT, **NO_GROUND, **NO_SETTLE}, False),
    ("OE without ground height and settled feet, true contact flags", {**OLD_JOINT, **NO_GROUND, **NO_SETTLE}, True),
    ("OE + ground height only", {**OLD_JOINT, **NO_SETTLE}, False),
    ("OE + settled feet only", {**OLD_JOINT, **NO_GROUND}, False),
    # what still holds the horizontal error (docs/localisation.md, "The horizontal error"): measured on the
    # defaults before noise.process_joint_velocity (OLD_JOINT), then that parameter
    ("OE before joint process noise (= process_velocity)", OLD_JOINT, False),
    ("OE before, no impulse at touch-down", {**OLD_JOINT, NO_IMPULSE: False}, False),
    ("OE before, rigid contacts: settled feet", {**OLD_JOINT, "dynamics.rigid_contacts": "settled"}, False),
    ("OE before, rigid contacts: settled feet, true contact flags", {**OLD_JOINT, **SETTLED}, True),
    ("OE before, rigid contacts: settled feet, no impulse", {**OLD_JOINT, **SETTLED, NO_IMPULSE: False}, False),
    (
        "OE before, rigid contacts: delayed by the settle time",
        {**OLD_JOINT, "dynamics.rigid_contacts": "delayed"},
        False,
    ),
    (
        "OE before, rigid contacts: released when unloading",
        {**OLD_JOINT, "dynamics.rigid_contacts": "unloading"},
        False,
    ),
    ("OE before, 3 solver iterations per tick", {**OLD_JOINT, "solver.max_iterations": 3}, False),
    ("OE before, foot velocity noise x5", {**OLD_JOINT, "noise.foot_velocity": 0.1}, False),
    ("OE before, + joint torque noise 1 N m", {**OLD_JOINT, "noise.joint_torque": 1.0}, False),
    ("OE before, + joint torque noise 3 N m", {**OLD_JOINT, "noise.joint_torque": 3.0}, False),
    ("OE before, process noise (all velocities) x1.5", {**OLD_JOINT, "noise.process_velocity": 0.03}, False),
    ("OE before, process noise (all velocities) x2", {**OLD_JOINT, "noise.process_velocity": 0.04}, False),
    ("OE before, process noise (all velocities) x4", {**OLD_JOINT, "noise.process_velocity": 0.08}, False),
    ("OE before, process noise (all velocities) x8", {**OLD_JOINT, "noise.process_velocity": 0.16}, False),
    ("OE before, base linear process noise x2", {**OLD_JOINT, "noise.process_base_linear": 0.04}, False),
    ("OE before, base linear process noise x4", {**OLD_JOINT, "noise.process_base_linear": 0.08}, False),
    ("OE before, base linear process noise x8", {**OLD_JOINT, "noise.process_base_linear": 0.16}, False),
    ("OE joint process noise 0.08 rad/s", {"noise.process_joint_velocity": 0.08}, False),
    ("OE joint process noise 0.16 rad/s", {"noise.process_joint_velocity": 0.16}, False),
    # joint process noise only on the touch-down transients (docs/realism.md, run 5)
    ("OE joint process noise on touch-down transients 0.1 s", {"noise.touchdown_transient": 0.1}, False),
    ("OE joint process noise on touch-down transients 0.15 s", {"noise.touchdown_transient": 0.15}, False),
]


def read_bag(path: str) -> dict:
    """Series (ground-truth flags), truth (odometry with world-frame velocity), payload and the flags' times."""
    series, _ = load_bag(path)
    pi_true, odom, t0 = rs.read_truth(path)
    vel = []
    for _, _, msg in iter_messages(path, ["ground_truth/odom"]):
        o, tw = msg.pose.pose.orientation, msg.twist.twist.linear
        rot = pin.Quaternion(o.w, o.x, o.y, o.z).toRotationMatrix()
        vel.append((time_ns_of(msg.header.stamp) * 1e-9, rot @ np.array([tw.x, tw.y, tw.z])))
    gt_t, gt_flags = [], []
    for _, t_ns, msg in iter_messages(path, ["ground_truth/contacts"]):
        gt_t.append(t_ns * 1e-9)
        gt_flags.append(np.array(msg.data, dtype=bool))
    return dict(series=series, pi_true=pi_true, odom=odom, t0=t0, vel=vel, gt_t=gt_t, gt_flags=gt_flags)


def truth_at(bag: dict, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(position (3,), quat xyzw (4,), world velocity (3,)) of the truth sample nearest to absolute time t."""
    times = [o[0] for o in bag["odom"]]
    i = int(np.clip(np.searchsorted(times, t), 0, len(times) - 1))
    return bag["odom"][i][1], bag["odom"][i][2], bag["vel"][i][1]


def traj_metrics(estimates: list, bag: dict) -> dict:
    """Final error (3D, horizontal, vertical), ATE, drift % of the horizontal path, height RMS (cm / %)."""
    odom = bag["odom"]
    traj = trajectory_errors(estimates, odom)
    if not traj:
        return {}
    times = np.array([o[0] for o in odom])
    pairs = [(e, odom[int(np.clip(np.searchsorted(times, e[0]), 0, len(odom) - 1))]) for e in estimates]
    pairs = [(e, o) for e, o in pairs if abs(o[0] - e[0]) < 0.01]
    (_, pe0, qe0), (_, p0, q0) = pairs[0]
    dyaw = rs_yaw(q0) - rs_yaw(qe0)
    c, s = np.cos(dyaw), np.sin(dyaw)
    rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    err = np.array([rz @ (pe - pe0) + p0 - p for (_, pe, _), (_, p, _) in pairs])
    path = np.array([p for _, (_, p, _) in pairs])
    xy_len = float(np.sum(np.linalg.norm(np.diff(path[:, :2], axis=0), axis=1)))
    return {
        "final_cm": 100.0 * float(np.linalg.norm(err[-1])),
        "final_xy_cm": 100.0 * float(np.linalg.norm(err[-1, :2])),
        "final_z_cm": 100.0 * float(err[-1, 2]),
        "ate_cm": 100.0 * traj["ate_position_m"],
        "height_rms_cm": 100.0 * float(np.sqrt(np.mean(err[:, 2] ** 2))),
        "drift_pct": 100.0 * float(np.linalg.norm(err[-1])) / xy_len if xy_len > 0.05 else None,
        "path_xy_m": xy_len,
        "duration_s": float(pairs[-1][0][0] - pairs[0][0][0]),
    }


def rs_yaw(q_xyzw) -> float:
    x, y, z, w = q_xyzw
    return float(np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)))


def run_oe(bag: dict, overrides: dict, truth_flags: bool, with_ekf: bool) -> dict:
    """The estimator on the bag's series (optionally with the simulator's flags); with the EKF rows on its knots."""
    config = node_config(overrides)
    robot = RobotModel(config.estimator.robot)
    detector = TruthDetector(robot, bag["gt_t"], bag["gt_flags"], truth_flags, config.estimator.contact, slack=1e-9)
    est = Estimator(config.estimator, detector=detector)
    feed = SensorFeed(config, est)
    series, t0 = bag["series"], bag["t0"]
    history, knots, seen = [], [], 0
    #: knot time -> (knot, base velocity world axes, configuration q) of the last solve that held it (before
    #: marginalised)
    oldest = {}
    wall = time.perf_counter()
    for k in range(len(series)):
        feed.sample(t0 + float(series.t[k]), series.q[k], series.dq[k], series.tau[k], *series.imu(k))
        detector.epoch = est.epoch or 0.0
        polled = feed.poll()
        history.extend(polled)
        if with_ekf and polled and est.solver is not None:
            xs, window = est.solver.xs, list(est.window.knots)
            nq = est.robot.nq
            for knot, x in zip(window[-len(xs) :], xs, strict=False):
                q = x[3:7]
                rot = pin.Quaternion(q[3], q[0], q[1], q[2]).toRotationMatrix()
                oldest[knot.t] = (knot, rot @ x[nq : nq + 3], np.array(x[:nq]))
        new = est.window.n_created - seen
        seen = est.window.n_created
        if with_ekf and new > 0:
            knots.extend(list(est.window.knots)[-new:])
    good = [e for e in history if e.source != "hold"] or history
    out = traj_metrics([(e.t, e.position, e.quat_xyzw) for e in history], bag)
    if good:
        m_true = bag["pi_true"][0]
        # signed: + heavier than the truth (an unsigned column hid the floors' opposite signs, docs/localisation.md
        # session 28)
        out["mass_pct"] = 100.0 * (good[-1].payload_pi[0] - m_true) / abs(m_true)
    out["flags_disagree_pct"] = 100.0 * detector.disagree[0] / max(detector.disagree[1], 1)
    out["held"] = len(history) - len([e for e in history if e.source != "hold"])
    out["wall_s"] = time.perf_counter() - wall
    if with_ekf:
        out["_knots"] = (knots, est.epoch or 0.0, est)
        out["velocity_attribution"] = velocity_attribution(bag, oldest, est.epoch or 0.0, est.dt)
        out["foot_slide"] = foot_slide(bag, oldest, est.epoch or 0.0, est)
    return out


#: knot classes of :func:`velocity_attribution`
PHASES = ("touch-down transient", "unloading", "settled stance")


def velocity_attribution(bag: dict, oldest: dict, epoch: float, dt: float) -> dict:
    """Where the OE's horizontal position error accumulates: per knot class (a detected stance foot down for less
    than ``contact.settle_time``: touch-down transient; else a detected stance foot past it but not settled (unloaded
    below ``contact.settle_fraction`` of the mean): unloading; else settled stance), the share of knots, the mean
    horizontal base-velocity error (mm/s) of the window's oldest solution of each knot (the one marginalised into
    the prior) against the truth, and the horizontal displacement error it integrates to (sum v_err dt, cm; the
    classes add up to the total)."""
    out = {}
    total = np.zeros(2)
    for t in sorted(oldest):
        knot, v, _ = oldest[t]
        err = (v - truth_at(bag, t + epoch)[2])[:2]
        c, a, st = (np.array(f if f is not None else knot.contacts) for f in (knot.contacts, knot.aged, knot.settled))
        phase = PHASES[0] if (c & ~a).any() else PHASES[1] if (a & ~st).any() else PHASES[2]
        row = out.setdefault(phase, {"n": 0, "sum": np.zeros(2)})
        row["n"] += 1
        row["sum"] += err
        total += err * dt
    n = sum(r["n"] for r in out.values()) or 1
    res = {
        p: {
            "share_pct": 100.0 * r["n"] / n,
            "mean_err_mm_s": 1e3 * float(np.linalg.norm(r["sum"] / r["n"])),
            "displacement_cm": 100.0 * float(np.linalg.norm(r["sum"] * dt)),
            "along_total_cm": 100.0 * float(r["sum"] * dt @ total / max(np.linalg.norm(total), 1e-12)),
        }
        for p, r in out.items()
    }
    res["total_cm"] = 100.0 * float(np.linalg.norm(total))
    return res


#: stance parts of :func:`foot_slide`
STANCE_PARTS = ("before detection", "landing", "held")


def foot_slide(bag: dict, oldest: dict, epoch: float, est: Estimator) -> dict:
    """How far the stance feet move, estimated against true, per stance part, summed over every stance of the
    simulator's flags (1 N) that the detector also flagged and that the recording does not cut: from the true
    touch-down to the detected one ("before detection"), the next ``dynamics.landing_time`` ("landing"), the rest up
    to the true lift-off ("held"). Estimated = the foot frame at the window's oldest solution of each knot; true = the
    foot frame at the true base pose with the same joint angles (the estimate's; encoder noise is common to both).
    Displacements in mm, odom / world axes (x, y, z)."""
    robot = est.robot
    times = np.array(sorted(oldest))
    data = robot.create_data()
    nf = len(robot.foot_frame_ids)
    feet_est, feet_true = np.zeros((len(times), nf, 3)), np.zeros((len(times), nf, 3))
    detected = np.zeros((len(times), nf), dtype=bool)
    for j, t in enumerate(times):
        knot, _, q = oldest[t]
        detected[j] = knot.contacts
        for out, base in ((feet_est, None), (feet_true, truth_at(bag, t + epoch))):
            x = q.copy()
            if base is not None:
                x[:3], x[3:7] = base[0], base[1]
            pin.framesForwardKinematics(robot.model, data, x)
            out[j] = [data.oMf[f].translation for f in robot.foot_frame_ids]
    truth = knot_truth_flags(bag, times + epoch)
    landing = max(1, int(round(est.config.dynamics.landing_time / est.dt)))
    sums = {part: {"est_mm": np.zeros(3), "true_mm": np.zeros(3)} for part in STANCE_PARTS}
    stances = 0
    for f in range(nf):
        c = truth[:, f]
        for on, off in zip(
            np.flatnonzero(c & ~np.r_[False, c[:-1]]), np.flatnonzero(c & ~np.r_[c[1:], False]), strict=True
        ):
            seen = np.flatnonzero(detected[on : off + 1, f])
            if on == 0 or off == len(c) - 1 or not len(seen):
                continue
            first = on + seen[0]
            bounds = (on, first, min(first + landing, off), off)
            for part, a, b in zip(STANCE_PARTS, bounds[:-1], bounds[1:], strict=True):
                sums[part]["est_mm"] += 1e3 * (feet_est[b, f] - feet_est[a, f])
                sums[part]["true_mm"] += 1e3 * (feet_true[b, f] - feet_true[a, f])
            stances += 1
    return {"stances": stances, **{k: {n: v.tolist() for n, v in d.items()} for k, d in sums.items()}}


def knot_truth_flags(bag: dict, times: np.ndarray) -> np.ndarray:
    idx = [max(0, bisect.bisect_right(bag["gt_t"], t + 1e-9) - 1) for t in times]
    return np.array([bag["gt_flags"][i] for i in idx])


def run_ekfs(bag: dict, knots: list, epoch: float, est: Estimator, ground_std: float) -> dict:
    """EKF rows on the OE's knots: detected flags, true flags, detected flags + ground height (+ the velocity update on
    the settled feet only)."""
    times = np.array([k.t for k in knots]) + epoch
    detected = np.array([k.contacts for k in knots])
    truth = knot_truth_flags(bag, times)
    noise = est.config.noise
    p0 = truth_at(bag, times[0])[0]
    rows = {}
    settled = np.array([k.measured for k in knots])
    for name, flags, measured, ground in (
        ("EKF, detected flags", detected, detected, 0.0),
        ("EKF, true flags", truth, truth, 0.0),
        ("EKF + ground height, detected flags", detected, detected, ground_std),
        ("EKF + ground height + settled feet", detected, settled, ground_std),
    ):
        ekf = LegKinematicsEkf(
            est.robot,
            p0,
            accel_std=noise.accelerometer,
            foot_velocity_std=noise.foot_velocity,
            ground_height_std=ground,
            ground_height=p0[2] - est.builder.standing_height(knots[0]) if ground else 0.0,
        )
        track = [(times[0], ekf.position, quat_xyzw(knots[0]))]
        for j in range(1, len(knots)):
            knot = knots[j]
            ekf.predict(est.dt, knot.imu.raw_quat, knot.imu.raw_gyro, knot.imu.acc)
            ekf.update(knot.imu.raw_quat, knot.imu.raw_gyro, knot.joint.q, knot.joint.dq, tuple(measured[j]))
            ekf.update_ground_height(knot.imu.raw_quat, knot.joint.q, tuple(flags[j]))
            track.append((times[j], ekf.position, quat_xyzw(knot)))
        rows[name] = traj_metrics(track, bag)
    return rows


def quat_xyzw(knot) -> np.ndarray:
    w, x, y, z = knot.imu.raw_quat
    return np.array([x, y, z, w])


def stance_kinematics(bag: dict, knots: list, epoch: float, robot: RobotModel) -> dict:
    """Foot sinking and the stance-foot velocity pseudo-measurement's bias, on the simulator's flags and true base
    pose (see the module docstring); lengths in mm, velocities in mm/s."""
    times = np.array([k.t for k in knots]) + epoch
    flags = knot_truth_flags(bag, times)
    data = robot.create_data()
    nf = len(robot.foot_frame_ids)
    foot_z = np.zeros((len(knots), nf))
    vel_err = np.zeros((len(knots), nf, 3))
    ekf = LegKinematicsEkf(robot, np.zeros(3))
    for j, knot in enumerate(knots):
        p, q, v = truth_at(bag, times[j])
        x = robot.neutral()
        x[:3], x[3:7], x[7:] = p, q, knot.joint.q
        pin.framesForwardKinematics(robot.model, data, x)
        foot_z[j] = [data.oMf[f].translation[2] for f in robot.foot_frame_ids]
        vel_err[j] = np.array(ekf.foot_velocities(knot.imu.quat, knot.imu.gyro, knot.joint.q, knot.joint.dq, (1,) * nf))
        vel_err[j] -= v
    sink, at_lo = [], []
    for f in range(nf):
        c = flags[:, f]
        on = np.flatnonzero(c & ~np.r_[False, c[:-1]])
        off = np.flatnonzero(c & ~np.r_[c[1:], False])
        for s, e in zip(on, off, strict=True):
            if s == 0 or e == len(c) - 1:  # stances cut by the recording's ends
                continue
            sink.append(foot_z[s, f] - foot_z[s : e + 1, f].min())
            at_lo.append(foot_z[s, f] - foot_z[e, f])
    stance = vel_err[flags]
    bias = stance.mean(axis=0)
    return {
        "stances": len(sink),
        "sink_mm": 1e3 * float(np.mean(sink)) if sink else None,
        "below_td_at_lo_mm": 1e3 * float(np.mean(at_lo)) if at_lo else None,
        "vel_bias_xy_mm_s": 1e3 * float(np.linalg.norm(bias[:2])),
        "vel_bias_z_mm_s": 1e3 * float(bias[2]),
        "vel_rms_mm_s": 1e3 * float(np.sqrt(np.mean(np.sum(stance**2, axis=1)))),
    }


def fmt(v, spec=".2f") -> str:
    return "n/a" if v is None else format(v, spec)


def first_row_results(results: dict, key: str) -> list[tuple[str, dict]]:
    """(case name, the first OE row's ``key`` entry) of the cases that have one (the diagnostics of the first row)."""
    out = []
    for name, res in results.items():
        entry = next((r[key] for r in res["rows"].values() if key in r), None)
        if entry:
            out.append((name, entry))
    return out


def render(results: dict) -> str:
    lines = [
        "### Stance-foot kinematics against the truth (simulator flags, true base pose)",
        "",
        "| case | stances | foot sinking below touch-down mm | still below touch-down at lift-off mm | "
        "velocity pseudo-measurement bias xy / z mm/s | its RMS mm/s |",
        "|---|---|---|---|---|---|",
    ]
    for name, res in results.items():
        k = res.get("kinematics")
        if not k:
            continue
        lines.append(
            f"| {name} | {k['stances']} | {fmt(k['sink_mm'], '.1f')} | {fmt(k['below_td_at_lo_mm'], '.1f')} | "
            f"{k['vel_bias_xy_mm_s']:.1f} / {k['vel_bias_z_mm_s']:+.1f} | {k['vel_rms_mm_s']:.0f} |"
        )
    lines += [
        "",
        "### Where the OE's horizontal error accumulates (first OE row, window's oldest solution of each knot)",
        "",
        "| case | knot class | share of knots % | mean xy velocity error mm/s | integrated xy error cm | "
        "along the total cm |",
        "|---|---|---|---|---|---|",
    ]
    for name, att in first_row_results(results, "velocity_attribution"):
        for phase in PHASES:
            a = att.get(phase)
            if a:
                lines.append(
                    f"| {name} | {phase} | {a['share_pct']:.1f} | {a['mean_err_mm_s']:.1f} | "
                    f"{a['displacement_cm']:.2f} | {a['along_total_cm']:+.2f} |"
                )
        lines.append(f"| {name} | total | 100 | | {att['total_cm']:.2f} | |")
    lines += [
        "",
        "### Stance-foot displacement, estimated vs true (first OE row; mm summed over the stances, x / y / z)",
        "",
        "| case | stances | part | estimated | true |",
        "|---|---|---|---|---|",
    ]
    for name, slide in first_row_results(results, "foot_slide"):
        for part in STANCE_PARTS:
            est, true = (" / ".join(f"{v:+.0f}" for v in slide[part][k]) for k in ("est_mm", "true_mm"))
            lines.append(f"| {name} | {slide['stances']} | {part} | {est} | {true} |")
    lines += [
        "",
        "### Localisation",
        "",
        "| case | method | final error cm (xy / z) | ATE cm | drift % of xy path | height RMS cm | mass error % "
        "(+ heavier) | flags vs truth % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, res in results.items():
        for method, r in res["rows"].items():
            if not r:
                lines.append(f"| {name} | {method} | failed | | | | | |")
                continue
            lines.append(
                f"| {name} | {method} | {r['final_cm']:.2f} ({r['final_xy_cm']:.2f} / {r['final_z_cm']:+.2f}) | "
                f"{r['ate_cm']:.2f} | {fmt(r['drift_pct'], '.1f')} | {r['height_rms_cm']:.2f} | "
                f"{fmt(r.get('mass_pct'), '+.2f')} | {fmt(r.get('flags_disagree_pct'), '.1f')} |"
            )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", default="", help="write/reuse the simulated bags in this directory")
    ap.add_argument("--only", default="", help="comma-separated case names (substring match)")
    ap.add_argument("--rows", default="", help="comma-separated OE row names to run (substring match; default all)")
    ap.add_argument("--json", default="", help="write the results as JSON")
    ap.add_argument("--seed", type=int, default=rs.SEED, help="simulation seed (default: the suite's)")
    args = ap.parse_args()
    cases = [c for c in CASES if not args.only or any(s in c.name for s in args.only.split(","))]
    rows = [r for r in OE_ROWS if not args.rows or any(s in r[0] for s in args.rows.split(","))]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or tmp
        os.makedirs(root, exist_ok=True)
        for case in cases:
            bag = read_bag(rs.make_case_bag(case, root, args.seed))
            res = {"rows": {}}
            for i, (name, overrides, truth) in enumerate(rows):
                out = run_oe(bag, overrides, truth, with_ekf=i == 0)
                if "_knots" in out:
                    knots, epoch, est = out.pop("_knots")
                    res["kinematics"] = stance_kinematics(bag, knots, epoch, est.robot)
                    ekf_rows = run_ekfs(bag, knots, epoch, est, est.config.noise.foot_height or 0.01)
                res["rows"][name] = out
                print(f"{case.name} {name}: {json.dumps(out, default=float)}", flush=True)
            if rows and rows[0] is OE_ROWS[0]:
                res["rows"].update(ekf_rows)
            results[case.name] = res
            if args.json:
                with open(args.json, "w", encoding="utf-8") as fh:
                    json.dump(results, fh, indent=1, default=float)
    print()
    print(render(results))
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    print(f"\nseed {args.seed}; `uptime`: {uptime}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
