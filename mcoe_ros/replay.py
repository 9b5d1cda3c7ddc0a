"""``mcoe_replay``: replay a rosbag2 (mcap or sqlite3) through the estimator, offline and deterministic.

    mcoe_replay INPUT_BAG [--config config/go1.yaml] [--out OUT_BAG] [--report report.png]
                [--json summary.json] [--topics T ...] [--start S] [--end S] [--realtime]

Samples are fed in record-time order to the same :class:`mcoe_ros.estimator.Estimator` the ROS node uses.
LowState has no header: its record time goes through the node's HeaderlessStamper; JointState and Imu use
their header stamps. The output bag holds the node's output topics (under ``--namespace``, default
``/mcoe``) stamped with the input's sensor time. The JSON summary is bit-identical for the same bag and
config: it holds no wall-clock values (solve timings are printed, not stored).

JSON keys: ``bag``, ``input_mode``, ``duration_s``, ``ticks``, ``held_ticks``, ``iterations_mean``,
``samples`` (accepted/rejected/repaired counts by reason), ``payload`` (mass_kg, mass_std_kg, com_m,
com_std_m, inertia_com_kgm2, inertia_std_kgm2, frame), and, when the bag has ground truth,
``ground_truth`` (mass_kg, com_m, inertia_com_kgm2), ``errors`` (mass_pct, com_m, inertia_rel_pct,
ate_position_m, final_position_m, drift_per_m, orientation_rms_deg, path_length_m).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

from mcoe_ros import messages
from mcoe_ros.config import DEFAULTS, ConfigError, load_params, resolve
from mcoe_ros.inertia import pi_about_com

OUTPUT_TYPES = {
    "odom": "nav_msgs/msg/Odometry",
    "pose": "geometry_msgs/msg/PoseWithCovarianceStamped",
    "payload/inertia": "geometry_msgs/msg/InertiaStamped",
    "payload/combined_inertia": "geometry_msgs/msg/InertiaStamped",
    "payload/covariance": "std_msgs/msg/Float64MultiArray",
    "payload/rls/inertia": "geometry_msgs/msg/InertiaStamped",
}
LOW_STATE_TYPES = ("unitree_legged_msgs/msg/LowState", "ros2_unitree_legged_msgs/msg/LowState")


class ReplayError(RuntimeError):
    """A problem with the input that ends the replay with a one-line message."""


def _parse(argv):
    ap = argparse.ArgumentParser(prog="mcoe_replay", description="Replay a rosbag2 through the MCOE estimator.")
    ap.add_argument("bag", help="input rosbag2 directory (mcap or sqlite3)")
    ap.add_argument("--config", help="parameter YAML (mcoe_estimator: ros__parameters:); default: built-in Go1")
    ap.add_argument("--out", help="output rosbag2 directory for the estimator topics (must not exist)")
    ap.add_argument("--format", default="mcap", choices=("mcap", "sqlite3"), help="output bag format")
    ap.add_argument("--report", help="PNG report path")
    ap.add_argument("--json", help="JSON summary path")
    ap.add_argument("--topics", nargs="+", help="input topics: a LowState topic, or a JointState and an Imu topic")
    ap.add_argument("--start", type=float, default=0.0, help="seconds from the bag start to begin")
    ap.add_argument("--end", type=float, default=math.inf, help="seconds from the bag start to stop")
    ap.add_argument("--realtime", action="store_true", help="feed samples at the recorded pace")
    ap.add_argument("--namespace", default="/mcoe", help="namespace of the output topics")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    return ap.parse_args(argv)


def _input_topics(args, params: dict, topics: dict) -> tuple[str, dict]:
    """(mode, {topic: role}) after checking that the bag has the wanted topics with usable types."""
    if args.topics:
        wanted = list(args.topics)
    elif params["input.mode"] == "low_state":
        wanted = [params["input.low_state_topic"]]
    else:
        wanted = [params["input.joint_states_topic"], params["input.imu_topic"]]
    by_name = {t.lstrip("/"): t for t in topics}  # "/low_state" (ros2 bag record) and "low_state" alike
    missing = [t for t in wanted if t.lstrip("/") not in by_name]
    if missing:
        have = ", ".join(f"{t} ({s.msgtype})" for t, s in sorted(topics.items())) or "none"
        raise ReplayError(f"bag has no topic {', '.join(missing)} (topics in the bag: {have})")
    roles = {}
    for topic in (by_name[t.lstrip("/")] for t in wanted):
        msgtype = topics[topic].msgtype
        if msgtype in LOW_STATE_TYPES:
            roles[topic] = "low_state"
        elif msgtype == "sensor_msgs/msg/JointState":
            roles[topic] = "joints"
        elif msgtype == "sensor_msgs/msg/Imu":
            roles[topic] = "imu"
        else:
            raise ReplayError(f"topic {topic} has unsupported message type {msgtype}")
    kinds = sorted(roles.values())
    if kinds == ["low_state"]:
        return "low_state", roles
    if kinds == ["imu", "joints"]:
        return "joint_states", roles
    raise ReplayError(f"input topics must be one LowState topic or one JointState + one Imu topic, got {kinds}")


class _Progress:
    def __init__(self, duration: float, enabled: bool):
        self.duration, self.enabled = max(duration, 1e-9), enabled
        self.t0 = time.perf_counter()
        self.last = 0.0

    def update(self, sensor_t: float, final: bool = False) -> None:
        now = time.perf_counter()
        if not self.enabled or (now - self.last < 0.2 and not final):
            return
        self.last = now
        frac = min(1.0, max(0.0, sensor_t / self.duration))
        speed = sensor_t / max(now - self.t0, 1e-9)
        bar = "#" * int(30 * frac)
        sys.stderr.write(
            f"\r[{bar:<30}] {100 * frac:5.1f}% {sensor_t:7.2f}/{self.duration:.2f} s  {speed:5.2f}x real time"
        )
        if final:
            sys.stderr.write("\n")
        sys.stderr.flush()


def run(args) -> dict:
    from mcoe_ros.bag import BagWriter, bag_topics, build_msg, iter_messages, time_ns_of
    from mcoe_ros.estimator import Estimator
    from mcoe_ros.inputs import HeaderlessStamper, JointStateMapper, imu_arrays, low_state_arrays, stamp_seconds
    from mcoe_ros.samples import InvalidSample

    params = load_params(args.config) if args.config else resolve(dict(DEFAULTS))
    if not os.path.isdir(args.bag):
        raise ReplayError(f"input bag '{args.bag}' is not a rosbag2 directory")
    try:
        topics = bag_topics(args.bag)
    except Exception as err:  # rosbags raises several types for malformed metadata/storage
        raise ReplayError(f"cannot open bag '{args.bag}': {_one_line(err)}") from err
    mode, roles = _input_topics(args, params, topics)
    params = resolve({**params, "input.mode": mode})
    est = Estimator(params)
    robot = est.robot
    mapper = JointStateMapper(robot.joint_names)
    stamper = HeaderlessStamper(params["input.low_state_period"])
    ns = "/" + args.namespace.strip("/") if args.namespace.strip("/") else ""
    gt_topics = [t for t in ("ground_truth/payload", "ground_truth/odom") if t in topics]
    writer = None
    if args.out:
        if os.path.exists(args.out):
            raise ReplayError(f"output '{args.out}' already exists")
        writer = BagWriter(args.out, fmt=args.format).__enter__()
    history, truth_payload, truth_odom = [], [], []
    diag_period = params["output.diagnostics_period"]
    next_diag = None
    bag_t0 = None
    duration = None
    progress = None
    payload_frame = params["robot.payload_frame"]
    wall0 = time.perf_counter()
    try:
        for topic, t_ns, msg in _checked(iter_messages(args.bag, list(roles) + gt_topics), args.bag):
            if bag_t0 is None:
                bag_t0 = t_ns
                duration = min(args.end, _bag_duration(args.bag)) - args.start
                progress = _Progress(duration, sys.stderr.isatty() and not args.quiet)
            rel = (t_ns - bag_t0) * 1e-9
            if rel < args.start:
                continue
            if rel > args.end:
                break
            if args.realtime:
                lag = (rel - args.start) - (time.perf_counter() - wall0)
                if lag > 0:
                    time.sleep(lag)
            role = roles.get(topic)
            if topic == "ground_truth/payload":
                truth_payload.append((time_ns_of(msg.header.stamp) * 1e-9, _inertia_msg_pi(msg)))
                continue
            if topic == "ground_truth/odom":
                truth_odom.append(_odom_arrays(msg))
                continue
            try:
                if role == "low_state":
                    q, dq, tau, quat, gyro, acc, foot = low_state_arrays(msg, robot.joint_map, robot.foot_map)
                    t = stamper(t_ns * 1e-9)  # record time = reception time; same stamping as the node
                    est.add_imu(t, quat, gyro, acc)
                    est.add_joints(t, q, dq, tau, foot_force=foot)
                elif role == "joints":
                    q, dq, tau = mapper.arrays(msg.name, msg.position, msg.velocity, msg.effort)
                    est.add_joints(stamp_seconds(msg.header.stamp), q, dq, tau)
                else:
                    est.add_imu(stamp_seconds(msg.header.stamp), *imu_arrays(msg))
            except InvalidSample as err:
                est.count_invalid(err)
            for e in est.poll():
                history.append(e)
                if writer is not None:
                    _write_estimate(writer, build_msg, ns, e, est, payload_frame)
            if writer is not None and est.last_time:
                if next_diag is None:
                    next_diag = est.last_time
                if est.last_time >= next_diag:
                    level, text, values = est.diagnostics()
                    tree = messages.diagnostic_array(est.last_time, "mcoe_estimator", "go1", level, text, values)
                    writer.write(
                        "/diagnostics",
                        "diagnostic_msgs/msg/DiagnosticArray",
                        _ns(est.last_time),
                        build_msg("diagnostic_msgs/msg/DiagnosticArray", tree),
                    )
                    next_diag += diag_period
            progress.update(rel - args.start)
    finally:
        if writer is not None:
            writer.__exit__(None, None, None)
    if progress is None:
        raise ReplayError(f"bag '{args.bag}' has no messages on {', '.join(roles)}")
    progress.update(duration, final=True)
    if not history:
        raise ReplayError("the estimator produced no estimate (bag shorter than the window, or all samples rejected)")
    summary = _summary(args, mode, est, history, truth_payload, truth_odom, duration)
    _print_summary(summary, est)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(summary, fh, indent=2, sort_keys=True)
            fh.write("\n")
    if args.report:
        _report(args.report, history, truth_payload, truth_odom, summary)
    return summary


def _checked(items, bag: str):
    """Re-raise errors of the bag reader (truncated file, bad CDR, unknown type) as one-line ReplayErrors."""
    while True:
        try:
            item = next(items)
        except StopIteration:
            return
        except Exception as err:  # rosbags raises many types for corrupt storage; estimator errors are not here
            raise ReplayError(f"cannot read bag '{bag}': {_one_line(err)}") from err
        yield item


def _ns(t: float) -> int:
    return int(round(t * 1e9))


def _write_estimate(writer, build_msg, ns: str, e, est, payload_frame: str) -> None:
    t_ns = _ns(e.t)
    params = est.params
    odom_frame, base = params["output.odom_frame"], params["robot.base_frame"]
    trees = {
        "odom": messages.odometry(e, odom_frame, base),
        "pose": messages.pose_with_covariance(e, odom_frame),
        "payload/inertia": messages.inertia_stamped(e.t, e.payload_pi, payload_frame),
        "payload/combined_inertia": messages.inertia_stamped(e.t, e.combined_pi, est.robot.payload_parent_frame),
        "payload/covariance": messages.matrix(e.payload_cov),
    }
    if est.rls_pi is not None:
        trees["payload/rls/inertia"] = messages.inertia_stamped(e.t, est.rls_pi, payload_frame)
    for name, tree in trees.items():
        writer.write(f"{ns}/{name}", OUTPUT_TYPES[name], t_ns, build_msg(OUTPUT_TYPES[name], tree))


def _bag_duration(path: str) -> float:
    from rosbags.rosbag2 import Reader

    with Reader(path) as reader:
        return (reader.end_time - reader.start_time) * 1e-9


def _inertia_msg_pi(msg) -> np.ndarray:
    from mcoe_ros.inertia import pi_from_com

    i = msg.inertia
    inertia = np.array([[i.ixx, i.ixy, i.ixz], [i.ixy, i.iyy, i.iyz], [i.ixz, i.iyz, i.izz]])
    if i.m <= 0:
        return np.zeros(10)
    return pi_from_com(i.m, np.array([i.com.x, i.com.y, i.com.z]), inertia)


def _odom_arrays(msg):
    from mcoe_ros.bag import time_ns_of

    p, o = msg.pose.pose.position, msg.pose.pose.orientation
    return time_ns_of(msg.header.stamp) * 1e-9, np.array([p.x, p.y, p.z]), np.array([o.x, o.y, o.z, o.w])


def _payload_summary(pi: np.ndarray, cov: np.ndarray) -> dict:
    """Mass, CoM, inertia about the CoM and their standard deviations (covariance pushed through the map by
    central differences: the map pi -> (m, c, I_c) is smooth where m > 0)."""

    def params(p):
        m, c, ic = pi_about_com(p)
        return np.r_[m, c, ic[np.triu_indices(3)]]

    jac = np.zeros((10, 10))
    for k in range(10):
        h = 1e-7 * max(1.0, abs(pi[k]))
        e = np.zeros(10)
        e[k] = h
        jac[:, k] = (params(pi + e) - params(pi - e)) / (2 * h)
    std = np.sqrt(np.clip(np.diag(jac @ cov @ jac.T), 0.0, None))
    m, c, ic = pi_about_com(pi)
    std_i = np.zeros((3, 3))
    std_i[np.triu_indices(3)] = std[4:]
    std_i = std_i + np.triu(std_i, 1).T
    return {
        "mass_kg": float(m),
        "mass_std_kg": float(std[0]),
        "com_m": [float(v) for v in c],
        "com_std_m": [float(v) for v in std[1:4]],
        "inertia_com_kgm2": [[float(v) for v in row] for row in ic],
        "inertia_std_kgm2": [[float(v) for v in row] for row in std_i],
    }


def _yaw(q_xyzw) -> float:
    x, y, z, w = q_xyzw
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def _rot(q_xyzw) -> np.ndarray:
    import pinocchio as pin

    x, y, z, w = q_xyzw
    return pin.Quaternion(w, x, y, z).normalized().toRotationMatrix()


def _trajectory_errors(history, truth_odom) -> dict:
    """ATE after aligning the first estimate to the truth at the same time (translation + yaw), drift per metre."""
    times = np.array([o[0] for o in truth_odom])
    pairs = []
    for e in history:
        i = int(np.clip(np.searchsorted(times, e.t), 0, len(times) - 1))
        if abs(times[i] - e.t) < 0.01:
            pairs.append((e, truth_odom[i]))
    if len(pairs) < 2:
        return {}
    e0, (_, p0, q0) = pairs[0]
    dyaw = _yaw(q0) - _yaw(e0.quat_xyzw)
    c, s = math.cos(dyaw), math.sin(dyaw)
    rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    pos_err, ang_err = [], []
    for e, (_, p, q) in pairs:
        aligned = rz @ (e.position - e0.position) + p0
        pos_err.append(np.linalg.norm(aligned - p))
        r_err = (rz @ _rot(e.quat_xyzw)).T @ _rot(q)
        ang_err.append(math.degrees(math.acos(np.clip((np.trace(r_err) - 1) / 2, -1.0, 1.0))))
    path = [p for _, (_, p, _) in pairs]
    length = float(sum(np.linalg.norm(b - a) for a, b in zip(path[:-1], path[1:], strict=True)))
    return {
        "ate_position_m": float(np.sqrt(np.mean(np.square(pos_err)))),
        "final_position_m": float(pos_err[-1]),
        "drift_per_m": float(pos_err[-1] / length) if length > 0.05 else None,
        "orientation_rms_deg": float(np.sqrt(np.mean(np.square(ang_err)))),
        "path_length_m": length,
        "_times": [e.t for e, _ in pairs],
        "_pos_err": [float(v) for v in pos_err],
    }


def _summary(args, mode, est, history, truth_payload, truth_odom, duration) -> dict:
    last = next((e for e in reversed(history) if e.source != "hold"), history[-1])
    out = {
        "bag": os.path.basename(os.path.normpath(args.bag)),
        "input_mode": mode,
        "duration_s": round(float(duration), 6),
        "ticks": est.n_ticks,
        "held_ticks": est.n_held,
        "iterations_mean": float(np.mean(est.iterations)) if est.iterations else 0.0,
        "samples": {
            "accepted": dict(sorted(est.stats.accepted.items())),
            "rejected": dict(sorted(est.stats.rejected.items())),
            "repaired": dict(sorted(est.stats.repaired.items())),
        },
        "payload": {**_payload_summary(last.payload_pi, last.payload_cov), "frame": est.params["robot.payload_frame"]},
    }
    errors = {}
    if truth_payload:
        t_last = last.t
        truth = [pi for t, pi in truth_payload if t <= t_last + 1e-6] or [truth_payload[0][1]]
        m, c, ic = pi_about_com(truth[-1]) if truth[-1][0] > 0 else (0.0, np.zeros(3), np.zeros((3, 3)))
        out["ground_truth"] = {
            "mass_kg": float(m),
            "com_m": [float(v) for v in c],
            "inertia_com_kgm2": [[float(v) for v in row] for row in ic],
        }
        pay = out["payload"]
        errors["mass_pct"] = 100.0 * abs(pay["mass_kg"] - m) / m if m > 0 else None
        errors["com_m"] = float(np.linalg.norm(np.array(pay["com_m"]) - c))
        ic_est = np.array(pay["inertia_com_kgm2"])
        errors["inertia_rel_pct"] = 100.0 * float(np.linalg.norm(ic_est - ic) / max(np.linalg.norm(ic), 1e-12))
    if truth_odom:
        traj = _trajectory_errors(history, truth_odom)
        errors.update({k: v for k, v in traj.items() if not k.startswith("_")})
    if errors:
        out["errors"] = errors
    return out


def _print_summary(s: dict, est) -> None:
    pay = s["payload"]
    times = np.array(est.solve_times) * 1e3 if est.solve_times else np.zeros(1)
    print(f"mcoe_replay: {s['bag']} ({s['input_mode']}, {s['duration_s']:.2f} s)")
    print(f"  payload mass  {pay['mass_kg']:.3f} ± {pay['mass_std_kg']:.3f} kg")
    com, cstd = pay["com_m"], pay["com_std_m"]
    print("  payload CoM   [" + ", ".join(f"{c:+.4f} ± {d:.4f}" for c, d in zip(com, cstd, strict=True)) + "] m")
    ic, istd = np.array(pay["inertia_com_kgm2"]), np.array(pay["inertia_std_kgm2"])
    for r in range(3):
        row = ", ".join(f"{ic[r, k]:+.4f} ± {istd[r, k]:.4f}" for k in range(3))
        print(f"  inertia@CoM   [{row}] kg m^2" if r == 0 else f"                [{row}]")
    print(
        f"  solves {s['ticks']} (held {s['held_ticks']}), iterations {s['iterations_mean']:.2f} mean, "
        f"solve time p50 {np.percentile(times, 50):.1f} ms p99 {np.percentile(times, 99):.1f} ms "
        f"max {times.max():.1f} ms"
    )
    rej = s["samples"]["rejected"]
    print(
        f"  dropped samples {sum(rej.values())}"
        + (f" ({', '.join(f'{k}: {v}' for k, v in rej.items())})" if rej else "")
    )
    if "ground_truth" in s:
        e = s["errors"]
        print(
            f"  ground truth  mass {s['ground_truth']['mass_kg']:.3f} kg -> error {e['mass_pct']:.2f} %, "
            f"CoM error {1e3 * e['com_m']:.1f} mm, inertia error {e['inertia_rel_pct']:.1f} %"
        )
    if "errors" in s and "ate_position_m" in s["errors"]:
        e = s["errors"]
        drift = (
            f"{100 * e['drift_per_m']:.2f} % of {e['path_length_m']:.2f} m" if e["drift_per_m"] is not None else "n/a"
        )
        print(
            f"  localisation  ATE {100 * e['ate_position_m']:.2f} cm, final {100 * e['final_position_m']:.2f} cm, "
            f"drift {drift}, orientation RMS {e['orientation_rms_deg']:.2f} deg"
        )


def _report(path: str, history, truth_payload, truth_odom, summary) -> None:
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
        traj = _trajectory_errors(history, truth_odom)
        if traj:
            ax.plot(np.array(traj["_times"]) - t0, 100 * np.array(traj["_pos_err"]))
    ax.set_ylabel("position error [cm]")
    ax.set_xlabel("time [s]")
    fig.suptitle(f"mcoe_replay: {summary['bag']}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _one_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")


def main(argv=None) -> int:
    args = _parse(argv)
    try:
        run(args)
    except (ReplayError, ConfigError) as err:
        print(f"mcoe_replay: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mcoe_replay: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
