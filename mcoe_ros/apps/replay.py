"""``mcoe_replay``: replay a rosbag2 (mcap or sqlite3) through the estimator, offline and deterministic.

    mcoe_replay INPUT_BAG [--config config/go1.yaml] [--out OUT_BAG] [--report report.png]
                [--json summary.json] [--smoothed trajectory.tum] [--topics T ...] [--start S] [--end S] [--realtime]

The command line is a thin layer over :func:`run` (``run(bag, config, ...) -> summary dict``). Messages are fed in
record-time order through the same :class:`mcoe_ros.io.feed.SensorFeed` the ROS node uses (LowState has no header:
its record time goes through the feed's HeaderlessStamper, and its CDR bytes are decoded in place as in the node;
JointState and Imu use their header stamps). The output
bag holds the node's output topics (:data:`mcoe_ros.io.messages.OUTPUTS`, under ``--namespace``, default ``/mcoe``)
stamped with the input's sensor time: ``odom`` and ``pose`` at input rate (every input sample once the first solve is
done), ``solve/odom`` and the payload topics at every solve. The JSON summary is bit-identical for the same bag and
config: it holds no wall-clock values (solve timings are printed, not stored).

JSON keys: ``bag``, ``input_mode``, ``duration_s``, ``ticks``, ``held_ticks``, ``iterations_mean``,
``samples`` (accepted/rejected/repaired counts by reason), ``imu_bias`` / ``actuator`` / ``leg_mass_deviation_kg``
(identified values and standard deviations, when those models are enabled), ``payload`` (mass_kg, mass_std_kg, com_m,
com_std_m, inertia_com_kgm2, inertia_std_kgm2, frame), and, when the bag has ground truth,
``ground_truth`` (mass_kg, com_m, inertia_com_kgm2), ``errors`` (mass_pct, com_m, inertia_rel_pct,
ate_position_m, final_position_m, drift_per_m, orientation_rms_deg, path_length_m; of the solves' newest nodes), and
``odometry``: the input-rate output (messages, corrections_m: mean, p95 and max of the position jumps at
re-anchoring, and with ground truth the same localisation errors as ``errors``), and ``smoothed``: the window as a
fixed-lag smoother (each grid knot's pose from the last window that held it,
:class:`mcoe_ros.estimation.smoothed.SmoothedTrajectory`: knots, lag_s, and with ground truth the same localisation
errors at the solves' times); ``--smoothed`` writes that trajectory as a TUM file (``t x y z qx qy qz qw``,
odometry frame).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import replace
from functools import partial

import numpy as np

from mcoe_ros.apps.evaluate import payload_errors, payload_summary, trajectory_errors
from mcoe_ros.estimation.smoothed import SmoothedTrajectory
from mcoe_ros.io import messages
from mcoe_ros.io.bag import BagWriter, bag_topics, build_msg, iter_raw, time_ns_of, typestore
from mcoe_ros.io.cdr import message_class
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import ConfigError, InputConfig, NodeConfig, load_params, node_config
from mcoe_ros.multibody import compiled
from mcoe_ros.multibody.inertia import pi_from_com

LOW_STATE_TYPES = ("unitree_legged_msgs/msg/LowState", "ros2_unitree_legged_msgs/msg/LowState")


class ReplayError(RuntimeError):
    """A problem with the input that ends the replay with a one-line message."""


def _parse(argv):
    ap = argparse.ArgumentParser(prog="mcoe_replay", description="Replay a rosbag2 through the MCOE estimator.")
    ap.add_argument("bag", help="input rosbag2 directory (mcap or sqlite3)")
    ap.add_argument(
        "--config", help="parameter YAML ('/**: ros__parameters:' like config/go1.yaml); default: built-in Go1"
    )
    ap.add_argument("--out", help="output rosbag2 directory for the estimator topics (must not exist)")
    ap.add_argument("--format", default="mcap", choices=("mcap", "sqlite3"), help="output bag format")
    ap.add_argument("--report", help="PNG report path")
    ap.add_argument("--json", help="JSON summary path")
    ap.add_argument(
        "--smoothed",
        help="TUM file of the fixed-lag smoothed trajectory (each knot from the last window that held it)",
    )
    ap.add_argument("--topics", nargs="+", help="input topics: a LowState topic, or a JointState and an Imu topic")
    ap.add_argument("--start", type=float, default=0.0, help="seconds from the bag start to begin")
    ap.add_argument("--end", type=float, default=math.inf, help="seconds from the bag start to stop")
    ap.add_argument("--realtime", action="store_true", help="feed samples at the recorded pace")
    ap.add_argument("--namespace", default="/mcoe", help="namespace of the output topics")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    return ap.parse_args(argv)


def _input_topics(wanted_topics, inputs: InputConfig, topics: dict) -> tuple[str, dict]:
    """(mode, {topic: role}) after checking that the bag has the wanted topics with usable types."""
    if wanted_topics:
        wanted = list(wanted_topics)
    elif inputs.mode == "low_state":
        wanted = [inputs.low_state_topic]
    else:
        wanted = [inputs.joint_states_topic, inputs.imu_topic]
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
    """A progress bar on a terminal; otherwise (a log, a pipe) one line every ``every`` s of wall time."""

    def __init__(self, duration: float, enabled: bool, tty: bool, every: float = 10.0):
        self.duration, self.enabled, self.tty, self.every = max(duration, 1e-9), enabled, tty, every
        self.t0 = time.perf_counter()
        self.last = self.t0 if not tty else 0.0

    def update(self, sensor_t: float, final: bool = False) -> None:
        now = time.perf_counter()
        if not self.enabled or (now - self.last < (0.2 if self.tty else self.every) and not final):
            return
        self.last = now
        frac = min(1.0, max(0.0, sensor_t / self.duration))
        speed = sensor_t / max(now - self.t0, 1e-9)
        text = f"{100 * frac:5.1f}% {sensor_t:7.2f}/{self.duration:.2f} s  {speed:5.2f}x real time"
        if self.tty:
            sys.stderr.write(f"\r[{'#' * int(30 * frac):<30}] {text}" + ("\n" if final else ""))
        else:
            sys.stderr.write(f"mcoe_replay: {text.strip()}\n")
        sys.stderr.flush()


def check_outputs(
    out: str | None = None, json_path: str | None = None, report: str | None = None, smoothed: str | None = None
) -> None:
    """Fail before replaying (one line) when an output cannot be written: missing folder, existing --out."""
    if out and os.path.exists(out):
        raise ReplayError(f"output '{out}' already exists")
    for flag, path in (("--out", out), ("--json", json_path), ("--report", report), ("--smoothed", smoothed)):
        if not path:
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise ReplayError(f"{flag} '{path}': folder '{folder}' does not exist")
        if not os.access(folder, os.W_OK):
            raise ReplayError(f"{flag} '{path}': folder '{folder}' is not writable")
        if flag != "--out" and os.path.isdir(path):
            raise ReplayError(f"{flag} '{path}' is a directory")


def run(
    bag: str,
    config: NodeConfig | None = None,
    *,
    out: str | None = None,
    fmt: str = "mcap",
    report: str | None = None,
    json_path: str | None = None,
    smoothed_path: str | None = None,
    topics: list[str] | None = None,
    start: float = 0.0,
    end: float = math.inf,
    realtime: bool = False,
    namespace: str = "/mcoe",
    progress: bool = False,
    print_summary: bool = False,
) -> dict:
    """Replay ``bag`` through a :class:`~mcoe_ros.io.feed.SensorFeed` built from ``config`` (default: the Go1
    defaults) and return the summary dict (the JSON's content). Raises :class:`ReplayError` on input problems."""
    config = config or NodeConfig()
    check_outputs(out, json_path, report, smoothed_path)
    if not os.path.isdir(bag):
        raise ReplayError(f"input bag '{bag}' is not a rosbag2 directory")
    try:
        bag_topic_types = bag_topics(bag)
    except Exception as err:  # rosbags raises several types for malformed metadata/storage
        raise ReplayError(f"cannot open bag '{bag}': {_one_line(err)}") from err
    mode, roles = _input_topics(topics, config.input, bag_topic_types)
    config = replace(config, input=replace(config.input, mode=mode))
    solver = config.estimator.solver
    if solver.threads == 0 and not realtime:  # auto, as fast as it goes: no sensor callbacks to keep a core for
        solver = replace(solver, threads=compiled.knot_threads(0, offline=True))
        config = replace(config, estimator=replace(config.estimator, solver=solver))
    feed = SensorFeed(config)
    est = feed.estimator
    ns = "/" + namespace.strip("/") if namespace.strip("/") else ""
    # ground truth as the simulator writes it ("ground_truth/odom") or as `ros2 bag record` names it ("/ground_...")
    gt_role = {
        t: t.lstrip("/") for t in bag_topic_types if t.lstrip("/") in ("ground_truth/payload", "ground_truth/odom")
    }
    gt_topics = list(gt_role)
    low_state = _LowStateBytes.create(feed, [t for t, r in roles.items() if r == "low_state"])
    bag_length = _bag_duration(bag)
    if start >= bag_length:
        raise ReplayError(f"--start {start:g} s is past the end of the bag ({bag_length:.2f} s long)")
    if end <= start:
        raise ReplayError(f"--end {end:g} s is not after --start {start:g} s")
    writer = None
    if out:
        writer = BagWriter(out, fmt=fmt).__enter__()
    history, truth_payload, truth_odom, odometry = [], [], [], []
    smoothed = SmoothedTrajectory()
    odom_frame, base_frame = config.output.odom_frame, config.estimator.robot.base_frame
    diag_period = config.output.diagnostics_period
    next_diag = None
    bag_t0 = None
    duration = None
    bar = None
    wall0 = time.perf_counter()
    try:
        for topic, t_ns, msg, raw in _checked(_messages(bag, list(roles) + gt_topics, low_state), bag):
            if bag_t0 is None:
                bag_t0 = t_ns
                duration = min(end, bag_length) - start
                bar = _Progress(duration, progress, sys.stderr.isatty())
            rel = (t_ns - bag_t0) * 1e-9
            if rel < start:
                continue
            if rel > end:
                break
            if realtime:
                lag = (rel - start) - (time.perf_counter() - wall0)
                if lag > 0:
                    time.sleep(lag)
            role = roles.get(topic)
            if gt_role.get(topic) == "ground_truth/payload":
                truth_payload.append((time_ns_of(msg.header.stamp) * 1e-9, _inertia_msg_pi(msg)))
                continue
            if gt_role.get(topic) == "ground_truth/odom":
                truth_odom.append(_odom_arrays(msg))
                continue
            if role == "low_state" and msg is None:  # CDR bytes, decoded in place (checked: _LowStateBytes)
                feed.low_state_bytes(raw, low_state.decoder, t_ns * 1e-9)
            elif role == "low_state":
                feed.low_state(msg, t_ns * 1e-9)  # record time = reception time; same stamping as the node
            elif role == "joints":
                feed.joint_state(msg)
            else:
                feed.imu(msg)
            odo = feed.odometry()  # as the node: published before the grid advances and a tick runs
            if odo is not None:
                odometry.append((odo.t, odo.position, odo.quat_xyzw))
                if writer is not None:
                    for name, tree in messages.odometry_messages(odo, odom_frame, base_frame).items():
                        msgtype = messages.OUTPUTS[name][0]
                        writer.write(f"{ns}/{name}", msgtype, _ns(odo.t), build_msg(msgtype, tree))
            estimates = feed.poll()
            if estimates:
                smoothed.update(est)
            for e in estimates:
                history.append(e)
                if writer is not None:
                    t_out = _ns(e.t)
                    window = est.window_poses() if config.output.publish_window_path else None
                    trees = messages.estimate_messages(e, odom_frame, base_frame, window)
                    for name, tree in trees.items():
                        msgtype, latched = messages.OUTPUTS[name]
                        writer.write(f"{ns}/{name}", msgtype, t_out, build_msg(msgtype, tree), latched)
            if writer is not None and est.last_time:
                if next_diag is None:
                    next_diag = est.last_time
                if est.last_time >= next_diag:
                    tree = messages.diagnostics_message(est.last_time, feed.diagnostics())
                    writer.write(
                        messages.DIAGNOSTICS_TOPIC,
                        messages.DIAGNOSTICS_TYPE,
                        _ns(est.last_time),
                        build_msg(messages.DIAGNOSTICS_TYPE, tree),
                    )
                    next_diag += diag_period
            bar.update(rel - start)
    finally:
        if writer is not None:
            writer.__exit__(None, None, None)
    if bar is None:
        raise ReplayError(f"bag '{bag}' has no messages on {', '.join(roles)}")
    bar.update(duration, final=True)
    if not history:
        raise ReplayError("the estimator produced no estimate (bag shorter than the window, or all samples rejected)")
    summary = _summary(bag, mode, feed, history, truth_payload, truth_odom, duration, odometry, smoothed)
    if json_path:  # first: a problem in printing or plotting never loses the summary
        with open(json_path, "w", encoding="utf-8") as fh:
            json.dump(summary, fh, indent=2, sort_keys=True)
            fh.write("\n")
    if smoothed_path:
        smoothed.write_tum(smoothed_path)
    if print_summary:
        _print_summary(summary, est.counters.solve_times)
    if report:
        from mcoe_ros.apps.report import write_report

        write_report(report, history, truth_payload, truth_odom, f"mcoe_replay: {summary['bag']}")
    return summary


class _LowStateBytes:
    """LowState messages of the replay read from their CDR bytes in place (:class:`~mcoe_ros.io.convert.
    LowStateDecoder`, ~10x cheaper than deserialising them), as the node reads them: the first :attr:`CHECKS` are
    compared with their full deserialisation, and on any difference (a bag whose LowState layout is not the installed
    interface's) the rest is deserialised, counted once as ``cdr_decoder_mismatch``."""

    CHECKS = 20  #: messages compared with their deserialisation

    def __init__(self, feed: SensorFeed, topic: str, decoder):
        self.feed, self.topic, self.decoder, self.checked = feed, topic, decoder, 0

    @classmethod
    def create(cls, feed: SensorFeed, topics: list[str]) -> _LowStateBytes | None:
        """None without a LowState input or without the installed interface's fixed layout (then deserialised)."""
        if len(topics) != 1:
            return None
        try:  # the installed interface's rosidl class (its layout only, no rclpy)
            return cls(feed, topics[0], feed.low_state_decoder(message_class("unitree_legged_msgs/msg/LowState")))
        except Exception:  # noqa: BLE001 - no built interface package, or no fixed layout: deserialise
            return None

    def wants_bytes(self, topic: str, raw, deserialize) -> bool:
        """True if this message is to be decoded from ``raw``; the first ones are checked against ``deserialize()``."""
        if self.decoder is None or topic != self.topic:
            return False
        if self.checked < self.CHECKS:
            self.checked += 1
            try:
                differs = self.decoder.check(raw, deserialize())
            except Exception as err:  # noqa: BLE001 - the deserialisation decides below
                differs = f"check failed: {_one_line(err)}"
            if differs is not None:
                self.decoder = None
                self.feed.count_error("cdr_decoder_mismatch", f"LowState field {differs}")
                return False
        return True


def _messages(bag: str, topics: list[str], low_state: _LowStateBytes | None):
    """(topic, record time ns, deserialised message or None, CDR bytes) in record-time order: LowState messages that
    ``low_state`` decodes in place come without the deserialised message."""
    store = typestore()
    for topic, msgtype, t_ns, raw in iter_raw(bag, topics):
        deserialize = partial(store.deserialize_cdr, raw, msgtype)
        if low_state is not None and low_state.wants_bytes(topic, raw, deserialize):
            yield topic, t_ns, None, raw
        else:
            yield topic, t_ns, deserialize(), raw


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


def _bag_duration(path: str) -> float:
    from rosbags.rosbag2 import Reader

    with Reader(path) as reader:
        return (reader.end_time - reader.start_time) * 1e-9


def _inertia_msg_pi(msg) -> np.ndarray:
    i = msg.inertia
    inertia = np.array([[i.ixx, i.ixy, i.ixz], [i.ixy, i.iyy, i.iyz], [i.ixz, i.iyz, i.izz]])
    if abs(i.m) < 1e-12:  # no payload (a negative mass is an effective payload: robot lighter than its URDF)
        return np.zeros(10)
    return pi_from_com(i.m, np.array([i.com.x, i.com.y, i.com.z]), inertia)


def _odom_arrays(msg):
    p, o = msg.pose.pose.position, msg.pose.pose.orientation
    return time_ns_of(msg.header.stamp) * 1e-9, np.array([p.x, p.y, p.z]), np.array([o.x, o.y, o.z, o.w])


def _summary(bag: str, mode: str, feed, history, truth_payload, truth_odom, duration, odometry, smoothed) -> dict:
    est = feed.estimator
    stats = feed.sample_stats
    last = next((e for e in reversed(history) if e.source != "hold"), history[-1])
    out = {
        "bag": os.path.basename(os.path.normpath(bag)),
        "input_mode": mode,
        "duration_s": round(float(duration), 6),
        "ticks": est.counters.ticks,
        "held_ticks": est.counters.held,
        "iterations_mean": float(np.mean(est.counters.iterations)) if est.counters.iterations else 0.0,
        "samples": {
            "accepted": dict(sorted(stats.accepted.items())),
            "rejected": dict(sorted(stats.rejected.items())),
            "repaired": dict(sorted(stats.repaired.items())),
        },
        "payload": {**payload_summary(last.payload_pi, last.payload_cov), "frame": last.payload_frame},
    }
    if last.imu_bias is not None:  # identified IMU biases (imu_bias.enabled): gyro rad/s, accelerometer m/s^2
        b, sd = last.imu_bias
        out["imu_bias"] = {"gyro": b[:3].tolist(), "accel": b[3:6].tolist(), "std": sd.tolist()}
    if last.actuator is not None:  # identified actuator parameters (actuator.enabled)
        names = est.parameters.actuator.parameter_names()
        out["actuator"] = {n: [float(v), float(d)] for n, v, d in zip(names, *last.actuator, strict=True)}
    if last.leg_mass is not None:  # the legs' identified mass deviation from the URDF (payload.leg_mass.enabled)
        out["leg_mass_deviation_kg"] = {"value": float(last.leg_mass[0]), "std": float(last.leg_mass[1])}
    errors = {}
    if truth_payload:
        t_last = last.t
        truth = [pi for t, pi in truth_payload if t <= t_last + 1e-6] or [truth_payload[0][1]]
        out["ground_truth"], payload_err = payload_errors(out["payload"], truth[-1])
        errors.update(payload_err)
    if truth_odom:
        traj = trajectory_errors([(e.t, e.position, e.quat_xyzw) for e in history], truth_odom)
        errors.update({k: v for k, v in traj.items() if not k.startswith("_")})
    if errors:
        out["errors"] = errors
    corrections = np.array(est.propagator.corrections) if est.propagator.corrections else np.zeros(1)
    out["odometry"] = {
        "messages": len(odometry),
        "corrections_m": {
            "mean": float(np.mean(corrections)),
            "p95": float(np.percentile(corrections, 95)),
            "max": float(np.max(corrections)),
        },
    }
    if truth_odom and odometry:
        traj = trajectory_errors(odometry, truth_odom)
        out["odometry"].update({k: v for k, v in traj.items() if not k.startswith("_")})
    out["smoothed"] = {"knots": len(smoothed), "lag_s": est.config.grid.window}
    if truth_odom and len(smoothed):  # at the solves' times, as ``errors`` (the same first pose aligned)
        traj = trajectory_errors(smoothed.at([e.t for e in history]), truth_odom)
        out["smoothed"].update({k: v for k, v in traj.items() if not k.startswith("_")})
    return out


def _print_summary(s: dict, solve_times: list[float]) -> None:
    pay = s["payload"]
    times = np.array(solve_times) * 1e3 if solve_times else np.zeros(1)
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
        mass_err = f"{e['mass_pct']:.2f} %" if e["mass_pct"] is not None else "n/a (no payload)"
        print(
            f"  ground truth  mass {s['ground_truth']['mass_kg']:.3f} kg -> error {mass_err}, "
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
    o = s["odometry"]
    line = f"  odometry      {o['messages']} messages at input rate"
    if "ate_position_m" in o:
        line += f", ATE {100 * o['ate_position_m']:.2f} cm, final {100 * o['final_position_m']:.2f} cm"
    c = o["corrections_m"]
    print(line + f", corrections mean {1e3 * c['mean']:.2f} mm p95 {1e3 * c['p95']:.2f} mm max {1e3 * c['max']:.2f} mm")
    sm = s["smoothed"]
    line = f"  smoothed      {sm['knots']} knots, lag {1e3 * sm['lag_s']:.0f} ms (the window)"
    if "ate_position_m" in sm:
        line += f", ATE {100 * sm['ate_position_m']:.2f} cm, final {100 * sm['final_position_m']:.2f} cm"
    print(line)


def _one_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")


def main(argv=None) -> int:
    args = _parse(argv)
    try:
        config = node_config(load_params(args.config)) if args.config else NodeConfig()
        run(
            args.bag,
            config,
            out=args.out,
            fmt=args.format,
            report=args.report,
            json_path=args.json,
            smoothed_path=args.smoothed,
            topics=args.topics,
            start=args.start,
            end=args.end,
            realtime=args.realtime,
            namespace=args.namespace,
            progress=not args.quiet,
            print_summary=True,
        )
    except (ReplayError, ConfigError) as err:
        print(f"mcoe_replay: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mcoe_replay: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
