"""mcoe_replay on the committed sample bag and on broken inputs (real rosbag2 files, real CLI process)."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from mcoe_ros.io.bag import BagWriter, bag_topics, build_msg, iter_messages, time_ns_of
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.multibody.inertia import pi_about_com

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "mcoe_ros", "data", "go1_sample")
KEYS = {"bag", "input_mode", "duration_s", "ticks", "held_ticks", "iterations_mean", "samples", "payload"}


def replay(*args, check=True):
    out = subprocess.run(
        [sys.executable, "-m", "mcoe_ros.apps.replay", *args], capture_output=True, text=True, timeout=900, cwd=ROOT
    )
    if check:
        assert out.returncode == 0, out.stderr
    return out


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replay")
    out = replay(
        SAMPLE,
        "--end",
        "1.2",
        "--json",
        str(tmp / "a.json"),
        "--out",
        str(tmp / "out"),
        "--smoothed",
        str(tmp / "smoothed.tum"),
        "--quiet",
    )
    return tmp, out


def test_sample_replay_estimates_the_payload_and_is_deterministic(sample_run):
    tmp, out = sample_run
    summary = json.loads((tmp / "a.json").read_text())
    assert KEYS <= set(summary) and {"ground_truth", "errors"} <= set(summary)
    assert {"mass_kg", "mass_std_kg", "com_m", "com_std_m", "inertia_com_kgm2", "inertia_std_kgm2"} <= set(
        summary["payload"]
    )
    assert summary["ground_truth"]["mass_kg"] == pytest.approx(7.2)
    assert summary["errors"]["mass_pct"] < 5.0, summary["errors"]
    assert summary["held_ticks"] == 0 and summary["ticks"] >= 15
    assert "payload mass" in out.stdout and "Traceback" not in out.stderr
    replay(SAMPLE, "--end", "1.2", "--json", str(tmp / "b.json"), "--quiet")
    assert (tmp / "a.json").read_bytes() == (tmp / "b.json").read_bytes()


def test_the_smoothed_trajectory_file_and_summary(sample_run):
    """--smoothed writes every knot the windows held once, in time order on the 2 ms grid, unit quaternions, the
    summary says how many and with what lag, and has its localisation errors against the bag's ground truth."""
    tmp, out = sample_run
    summary = json.loads((tmp / "a.json").read_text())
    rows = np.loadtxt(tmp / "smoothed.tum")
    sm = summary["smoothed"]
    assert rows.shape == (sm["knots"], 8) and sm["lag_s"] == pytest.approx(0.2)
    np.testing.assert_allclose(np.diff(rows[:, 0]), 0.002, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(rows[:, 4:], axis=1), 1.0, atol=1e-6)
    # the first window's 101 knots, then each solve's 25 new ones (0.05 s ticks; no held solve on this bag)
    assert summary["held_ticks"] == 0 and sm["knots"] == 101 + 25 * (summary["ticks"] - 1)
    # on this bag the smoothed poses are closer to the truth than the published (newest-knot) ones at the same times:
    # 0.11 vs 0.21 cm, 0.08 vs 0.38 deg
    assert sm["ate_position_m"] < summary["errors"]["ate_position_m"]
    assert sm["orientation_rms_deg"] < summary["errors"]["orientation_rms_deg"]
    assert "smoothed" in out.stdout


def test_output_bag_has_the_node_topics_with_input_time_stamps(sample_run):
    tmp, _ = sample_run
    topics = bag_topics(tmp / "out")
    for name in ("/mcoe/odom", "/mcoe/pose", "/mcoe/solve/odom", "/mcoe/payload/inertia", "/mcoe/payload/covariance"):
        assert topics[name].count >= 1, name
    assert topics["/diagnostics"].count >= 1
    # input rate: every LowState after the first solve has its odometry and pose
    assert topics["/mcoe/odom"].count == topics["/mcoe/pose"].count > 10 * topics["/mcoe/solve/odom"].count
    stamps, records = [], []
    for _topic, t_ns, msg in iter_messages(tmp / "out", ["/mcoe/odom"]):
        stamps.append(time_ns_of(msg.header.stamp))
        records.append(t_ns)
        assert msg.header.frame_id == "odom" and msg.child_frame_id == "base"
        assert np.all(np.isfinite(msg.pose.covariance))
    assert np.all(np.diff(stamps) > 0) and stamps == records
    # solve/path: one per solve, the window's 101 knots on the 2 ms grid, the newest at solve/odom's pose
    solves = {time_ns_of(m.header.stamp): m for _, _, m in iter_messages(tmp / "out", ["/mcoe/solve/odom"])}
    paths = [m for _, _, m in iter_messages(tmp / "out", ["/mcoe/solve/path"])]
    assert len(paths) == len(solves) == topics["/mcoe/solve/path"].count
    for path in paths:
        knots = [time_ns_of(p.header.stamp) for p in path.poses]
        assert len(knots) == 101 and path.header.frame_id == "odom" and knots[-1] == time_ns_of(path.header.stamp)
        np.testing.assert_allclose(np.diff(knots), 2e6, atol=2e3)
        newest, odom = path.poses[-1].pose.position, solves[knots[-1]].pose.pose.position
        assert (newest.x, newest.y, newest.z) == (odom.x, odom.y, odom.z)
    bag_start = next(iter_messages(SAMPLE, ["low_state"]))[1]
    assert bag_start <= stamps[0] <= bag_start + int(1.2e9)  # input (sensor) time, not wall time


def test_sensor_feed_driven_by_hand_gives_the_replays_estimates(sample_run):
    """The one feed loop: SensorFeed fed with the same bag messages reproduces the replay's solves and input-rate
    odometry bit for bit."""
    tmp, _ = sample_run
    feed = SensorFeed()
    estimates, odoms, t0 = [], [], None
    for topic, t_ns, msg in iter_messages(SAMPLE, ["low_state", "ground_truth/payload", "ground_truth/odom"]):
        t0 = t_ns if t0 is None else t0
        if (t_ns - t0) * 1e-9 > 1.2:
            break
        if topic == "low_state":
            feed.low_state(msg, t_ns * 1e-9)
            odo = feed.odometry()
            odoms += [odo] if odo is not None else []
            estimates += feed.poll()
    for outputs, topic in ((estimates, "/mcoe/solve/odom"), (odoms, "/mcoe/odom")):
        replayed = [(t_ns, msg.pose.pose) for _topic, t_ns, msg in iter_messages(tmp / "out", [topic])]
        assert len(outputs) == len(replayed) >= 15
        for est, (t_ns, pose) in zip(outputs, replayed, strict=True):
            assert int(round(est.t * 1e9)) == t_ns
            assert (pose.position.x, pose.position.y, pose.position.z) == tuple(float(v) for v in est.position)
    summary = json.loads((tmp / "a.json").read_text())
    assert summary["payload"]["mass_kg"] == pi_about_com(estimates[-1].payload_pi)[0]


def test_low_state_bytes_are_decoded_in_place_and_a_layout_mismatch_falls_back(monkeypatch):
    """The replay reads LowState from its CDR bytes as the node does (the summary equals the deserialising feed's:
    test above); a decoder that disagrees with the deserialisation on a checked message is dropped, said once, and
    the same estimates come from the deserialised messages."""
    from mcoe_ros.apps import replay as app
    from mcoe_ros.io.convert import LowStateDecoder

    decoded = []
    in_place = app.SensorFeed.low_state_bytes
    monkeypatch.setattr(app.SensorFeed, "low_state_bytes", lambda self, *a: decoded.append(1) or in_place(self, *a))
    fast = app.run(SAMPLE, end=0.5)
    assert len(decoded) >= 240 and fast["samples"]["rejected"] == {}  # 250 LowState in 0.5 s, all in place
    decoded.clear()
    monkeypatch.setattr(LowStateDecoder, "check", lambda self, raw, msg: "q")
    slow = app.run(SAMPLE, end=0.5)
    assert not decoded and slow["samples"]["rejected"] == {"cdr_decoder_mismatch": 1}
    assert slow["payload"] == fast["payload"] and slow["errors"] == fast["errors"]


def _one_line_error(out):
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("mcoe_replay: error:"), out.stderr
    return lines[0]


def test_truncated_bag_is_a_one_line_error(tmp_path):
    bag = tmp_path / "broken"
    shutil.copytree(SAMPLE, bag)
    mcap = bag / "go1_sample.mcap"
    data = mcap.read_bytes()
    mcap.write_bytes(data[: len(data) // 3])
    msg = _one_line_error(replay(str(bag), "--quiet", check=False))
    assert "broken" in msg


def test_not_a_bag_and_missing_topics_and_unknown_types(tmp_path):
    assert "not a rosbag2" in _one_line_error(replay(str(tmp_path / "nope"), check=False))
    imu_only = tmp_path / "imu_only"
    with BagWriter(imu_only) as w:
        for k in range(5):
            tree = {"header": {"stamp": {"sec": 1, "nanosec": k}, "frame_id": "imu_link"}}
            w.write("imu/data", "sensor_msgs/msg/Imu", 1_000_000_000 + k, build_msg("sensor_msgs/msg/Imu", tree))
    msg = _one_line_error(replay(str(imu_only), check=False))
    assert "no topic /low_state" in msg and "imu/data" in msg
    msg = _one_line_error(replay(str(imu_only), "--topics", "imu/data", "joint_states", check=False))
    assert "joint_states" in msg
    msg = _one_line_error(replay(SAMPLE, "--topics", "ground_truth/contacts", check=False))
    assert "unsupported message type" in msg and "UInt8MultiArray" in msg


def test_bad_config_is_a_one_line_error(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("mcoe_estimator:\n  ros__parameters:\n    solver:\n      rollout: zigzag\n")
    assert "solver.rollout" in _one_line_error(replay(SAMPLE, "--config", str(cfg), check=False))


def test_output_bag_metadata_carries_the_offered_qos(sample_run):
    """A played-back latched payload topic must reach transient-local subscribers: the QoS is in the metadata."""
    import yaml

    tmp, _ = sample_run
    meta = yaml.safe_load((tmp / "out" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    qos = {
        t["topic_metadata"]["name"]: t["topic_metadata"]["offered_qos_profiles"]
        for t in meta["topics_with_message_count"]
    }
    assert "transient_local" in str(qos["/mcoe/payload/inertia"]) and "volatile" in str(qos["/mcoe/odom"])
    assert all(v for v in qos.values())


def test_ros2_bag_record_names_zero_payload_and_log_progress(tmp_path):
    """Ground truth recorded as /ground_truth/* (ros2 bag record), a true payload of 0 kg, stderr not a terminal."""
    bag = tmp_path / "recorded"
    types = {t: s.msgtype for t, s in bag_topics(SAMPLE).items()}
    with BagWriter(bag) as writer:
        for topic, t_ns, msg in iter_messages(SAMPLE, ["low_state", "ground_truth/odom", "ground_truth/payload"]):
            if topic == "ground_truth/payload":
                msg.inertia.m = 0.0
            writer.write("/" + topic, types[topic], t_ns, msg)
    out = replay(str(bag), "--end", "0.6", "--json", str(tmp_path / "s.json"))
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["ground_truth"]["mass_kg"] == 0.0 and summary["errors"]["mass_pct"] is None
    assert "ate_position_m" in summary["errors"]  # /ground_truth/odom was used
    assert "n/a (no payload)" in out.stdout
    assert "mcoe_replay: " in out.stderr and "% " in out.stderr and "\r" not in out.stderr  # progress lines, no bar


def test_the_window_path_can_be_switched_off(tmp_path):
    """output.publish_window_path false: no solve/path in the output bag, the rest as before."""
    from dataclasses import replace

    from mcoe_ros.apps.replay import run
    from mcoe_ros.io.params import NodeConfig

    base = NodeConfig()
    config = replace(base, output=replace(base.output, publish_window_path=False))
    run(SAMPLE, config, out=str(tmp_path / "out"), end=0.6)
    topics = bag_topics(tmp_path / "out")
    assert "/mcoe/solve/path" not in topics and topics["/mcoe/solve/odom"].count >= 1
