"""MuJoCo Go1 simulator: model consistency with Pinocchio, physics sanity, controller, bags and CLI."""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.io.bag import bag_topics, iter_messages
from mcoe_ros.multibody.inertia import pi_about_com
from mcoe_ros.multibody.robot import GO1_UNITREE_JOINT_ORDER, RobotModel
from mcoe_ros.sim.cli import main as sim_main
from mcoe_ros.sim.mjcf import Go1Sim, PayloadSpec, SimConfig, principal_axes
from mcoe_ros.sim.recorder import TOPICS, record
from mcoe_ros.sim.runner import Episode, EpisodeConfig, parse_segments
from mcoe_ros.sim.scenarios import Go1Controller, leg_ik
from mcoe_ros.sim.sensors import NoiseConfig

G = 9.81
ROT_PAYLOAD = np.array([[0.06, 0.005, 0.003], [0.005, 0.09, 0.002], [0.003, 0.002, 0.11]])
PAYLOAD = PayloadSpec(7.2, [0.02, 0.0, 0.05], ROT_PAYLOAD)


@pytest.fixture(scope="module")
def robot() -> RobotModel:
    return RobotModel()


def _body_inertia_about_com(model: mujoco.MjModel, bid: int) -> tuple[float, np.ndarray, np.ndarray]:
    rot = np.empty(9)
    mujoco.mju_quat2Mat(rot, model.body_iquat[bid])
    rot = rot.reshape(3, 3)
    return float(model.body_mass[bid]), model.body_ipos[bid].copy(), rot @ np.diag(model.body_inertia[bid]) @ rot.T


def test_mujoco_inertias_equal_pinocchio_merged_inertias(robot):
    sim = Go1Sim(SimConfig(payload=PAYLOAD), robot)
    assert sim.joint_names == robot.joint_names
    for jid in range(1, robot.model.njoints):
        bid = sim.model.body(robot.model.names[jid].replace("_joint", "") if jid > 1 else "trunk").id
        mass, com, inertia = _body_inertia_about_com(sim.model, bid)
        ref = robot.model.inertias[jid]
        assert mass == pytest.approx(ref.mass, rel=1e-9)
        np.testing.assert_allclose(com, ref.lever, atol=1e-12)
        np.testing.assert_allclose(inertia, ref.inertia, atol=1e-9)
    assert sim.robot_mass == pytest.approx(pin.computeTotalMass(robot.model), rel=1e-9)
    # payload body: frame at its CoM, full (non-diagonal) inertia reproduced
    pid = sim.payload_id
    np.testing.assert_allclose(sim.model.body_pos[pid], PAYLOAD.com)
    rot = np.empty(9)
    mujoco.mju_quat2Mat(rot, sim.model.body_quat[pid])
    rot = rot.reshape(3, 3)
    np.testing.assert_allclose(rot @ np.diag(sim.model.body_inertia[pid]) @ rot.T, ROT_PAYLOAD, atol=1e-12)
    mass, com, inertia = pi_about_com(PAYLOAD.pi)
    assert mass == 7.2 and np.allclose(com, PAYLOAD.com) and np.allclose(inertia, ROT_PAYLOAD)
    # joint axes, limits and motor limits from the URDF
    assert np.allclose(
        sim.model.jnt_range[1:], np.c_[robot.model.lowerPositionLimit[7:], robot.model.upperPositionLimit[7:]]
    )
    assert sorted(set(np.round(sim.effort_limit, 3))) == [23.7, 35.55]


def test_payload_switching_and_validation(robot):
    sim = Go1Sim(SimConfig(payload=PayloadSpec.sphere(3.0, [0, 0, 0.05], 0.1)), robot)
    total = float(sum(sim.model.body_mass))
    sim.set_payload_active(False)
    assert float(sum(sim.model.body_mass)) == pytest.approx(total - 3.0)
    assert sim.payload.mass == 0.0
    sim.set_payload_active(True)
    assert float(sum(sim.model.body_mass)) == pytest.approx(total)
    with pytest.raises(ValueError):
        PayloadSpec(1.0, np.zeros(3), np.diag([1.0, 0.1, 0.1]))  # violates the triangle inequality
    diag, quat = principal_axes(ROT_PAYLOAD)
    rot = np.empty(9)
    mujoco.mju_quat2Mat(rot, quat)
    assert np.allclose(rot.reshape(3, 3) @ np.diag(diag) @ rot.reshape(3, 3).T, ROT_PAYLOAD)


def test_leg_ik_inverts_pinocchio_forward_kinematics(robot):
    ctrl = Go1Controller(RobotModel())
    rng = np.random.default_rng(1)
    data = robot.model.createData()
    for _ in range(5):
        feet = ctrl.nominal_feet + rng.uniform(-0.05, 0.05, (4, 3))
        q = pin.neutral(robot.model)
        q[7:] = ctrl.ik(feet)
        pin.framesForwardKinematics(robot.model, data, q)
        for i, fid in enumerate(robot.foot_frame_ids):
            np.testing.assert_allclose(data.oMf[fid].translation, feet[i], atol=1e-9)
    assert leg_ik(ctrl.nominal_feet[0], ctrl.hips[0], 1.0)[0] == pytest.approx(0.0, abs=1e-12)


def test_standing_contact_forces_carry_robot_plus_payload():
    ep = Episode(EpisodeConfig(segments=[("stand", 1.5)], payload=PAYLOAD))
    fz, acc_err, heights = [], [], []

    def on_sample(truth, meas, payload):
        if truth.t > 1.0:
            fz.append(ep.sim.total_vertical_contact_force())
            rot = np.empty(9)
            mujoco.mju_quat2Mat(rot, truth.imu_quat)
            acc_err.append(truth.imu_acc - rot.reshape(3, 3).T @ np.array([0.0, 0.0, G]))
            heights.append(truth.base_pos[2])
            assert truth.contacts.all()

    stats = ep.run(on_sample)
    weight = (ep.sim.robot_mass + PAYLOAD.mass) * G
    assert abs(np.mean(fz) - weight) / weight < 0.01
    # IMU specific force at rest = gravity reaction in the IMU frame (+9.81 along the up axis)
    assert np.max(np.abs(np.mean(acc_err, axis=0))) < 0.05
    assert 0.27 < np.mean(heights) < 0.32 and not stats.fell


@pytest.mark.parametrize("scenario", ["trot:3", "trot-forward:3", "walk:3.6", "squat-sway:3"])
def test_locomotion_keeps_base_height_in_band(scenario):
    ep = Episode(EpisodeConfig(segments=parse_segments(scenario, 0), payload=PAYLOAD))
    swing = []
    stats = ep.run(lambda truth, meas, payload: swing.append(not truth.contacts.all()))
    assert 0.24 < stats.min_height and stats.max_height < 0.35, (stats.min_height, stats.max_height)
    if scenario.startswith(("trot", "walk")):
        assert np.mean(swing) > 0.3  # feet really leave the ground


def test_pronk_has_flight_phases():
    ep = Episode(EpisodeConfig(segments=[("pronk", 3.0)], payload=PAYLOAD))
    flight = []
    stats = ep.run(lambda truth, meas, payload: flight.append(not truth.contacts.any()))
    assert not stats.fell and sum(flight) > 50


def test_pickup_and_drop_change_ground_truth(tmp_path):
    cfg = EpisodeConfig(segments=[("pickup", 1.0), ("drop", 1.0)], payload=PAYLOAD, rate=250)
    stats, meta = record(cfg, tmp_path / "pd")
    assert stats.payload_changes == [(0.5, True), (1.5, False)] and not stats.payload_at_start
    assert stats.max_height < 0.32 and stats.min_height > 0.26  # switching mass does not kick the robot
    masses = [(t, m.inertia.m) for topic, t, m in iter_messages(tmp_path / "pd", ["ground_truth/payload"])]
    t0 = masses[0][0]
    on = [(t - t0) * 1e-9 for t, m in masses if m > 0]
    off_after = [(t - t0) * 1e-9 for t, m in masses if m == 0 and (t - t0) * 1e-9 > on[0]]
    assert masses[0][1] == 0.0 and masses[-1][1] == 0.0
    assert on[0] == pytest.approx(0.5) and off_after[0] == pytest.approx(1.5)  # published on change
    assert meta["payload"]["changes"][0] == {"t_s": 0.5, "present": True}
    assert meta["payload"]["present_at_start"] is False


@pytest.mark.parametrize("fmt", ["mcap", "sqlite3"])
def test_bag_topics_counts_and_joint_mapping(tmp_path, fmt):
    duration, rate = 1.2, 500.0
    cfg = EpisodeConfig(segments=[("squat-sway", duration)], payload=PAYLOAD, rate=rate, noise=NoiseConfig(), seed=3)
    out = tmp_path / f"bag_{fmt}"
    record(cfg, out, fmt)
    topics = bag_topics(out)
    assert set(topics) == set(TOPICS)
    for name, info in topics.items():
        assert info.msgtype == TOPICS[name]
        if name != "ground_truth/payload":
            assert abs(info.count - duration * rate) <= 1
    assert topics["ground_truth/payload"].count == pytest.approx(duration * 10, abs=1)
    meta = json.loads((out / "sim_metadata.json").read_text())
    assert meta["seed"] == 3 and meta["joint_order_low_state"] == list(GO1_UNITREE_JOINT_ORDER)
    low, joint, imu, odom = {}, {}, {}, {}
    for topic, t, msg in iter_messages(out):
        {"low_state": low, "joint_states": joint, "imu/data": imu, "ground_truth/odom": odom}.get(topic, {})[t] = msg
    assert low.keys() == joint.keys() == imu.keys() == odom.keys()
    t_first = min(low)
    for t, js in list(joint.items())[::50]:
        assert js.header.stamp.sec * 10**9 + js.header.stamp.nanosec == t
        for hw_idx, name in enumerate(GO1_UNITREE_JOINT_ORDER):
            j = list(js.name).index(name)
            ms = low[t].motor_state[hw_idx]
            assert ms.q == np.float32(js.position[j]) and ms.dq == np.float32(js.velocity[j])
        assert low[t].imu.accelerometer[2] == np.float32(imu[t].linear_acceleration.z)
        assert odom[t].header.frame_id == "odom" and odom[t].child_frame_id == "base"
    assert imu[t_first].orientation_covariance[0] == pytest.approx(NoiseConfig().orientation_std ** 2)
    assert np.all(low[t_first].motor_state[12].q == 0.0)


def test_noise_is_seeded_and_has_configured_spread():
    def run(seed):
        out = []
        cfg = EpisodeConfig(segments=[("stand", 0.4)], payload=PAYLOAD, noise=NoiseConfig(), seed=seed)
        Episode(cfg).run(lambda truth, meas, payload: out.append((meas.q - truth.q, meas.gyro - truth.imu_gyro)))
        return np.array([a for a, _ in out]), np.array([b for _, b in out])

    q1, g1 = run(0)
    q2, g2 = run(0)
    q3, _ = run(1)
    np.testing.assert_array_equal(q1, q2)
    np.testing.assert_array_equal(g1, g2)
    assert not np.array_equal(q1, q3)
    assert 0.5 * NoiseConfig().q_std < np.std(q1) < 2.0 * NoiseConfig().q_std
    assert 0.5 * NoiseConfig().gyro_std < np.std(g1 - g1.mean(axis=0)) < 2.0 * NoiseConfig().gyro_std


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--scenario", "moonwalk"], "unknown scenario"),
        (["--scenario", "trot:abc"], "bad duration"),
        (["--scenario", "trot:-1"], "duration must be > 0"),
        (["--rate", "300"], "must divide"),
        (["--payload-inertia", "1", "2"], "3 or 6 values"),
        (["--payload-inertia", "1", "0.1", "0.1"], "not physical"),
        (["--format", "sqlite3", "--compression", "zstd"], "only supported"),
    ],
)
def test_cli_rejects_bad_arguments_in_one_line(tmp_path, capsys, argv, message):
    out = tmp_path / "never"
    assert sim_main(argv + ["--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mcoe_sim: error:") and message in err and "\n" not in err
    assert not out.exists()


def test_cli_writes_a_bag(tmp_path, capsys):
    out = tmp_path / "cli_bag"
    code = sim_main(
        ["--scenario", "stand:0.3,trot:0.5", "--payload-sphere", "0.1", "--noise", "0.5", "--out", str(out)]
    )
    assert code == 0
    assert bag_topics(out)["low_state"].count == 400
    meta = json.loads((out / "sim_metadata.json").read_text())
    assert [s["name"] for s in meta["segments"]] == ["stand", "trot"]
    assert np.allclose(meta["payload"]["inertia_about_com_trunk_kgm2"], 0.4 * 7.2 * 0.01 * np.eye(3))


def test_compiled_payload_matches_its_spec_in_the_trunk_frame():
    """Regression: an unset inertial offset made MuJoCo place the payload CoM at twice the configured offset."""

    from mcoe_ros.sim.mjcf import Go1Sim, PayloadSpec, SimConfig

    inertia = np.array([[0.06, 0.005, 0.003], [0.005, 0.09, 0.002], [0.003, 0.002, 0.11]])
    sim = Go1Sim(SimConfig(payload=PayloadSpec(7.2, np.array([0.02, -0.01, 0.05]), inertia)))
    mujoco.mj_forward(sim.model, sim.data)
    trunk, pay = sim.model.body("trunk").id, sim.payload_id
    rot = sim.data.xmat[trunk].reshape(3, 3)
    np.testing.assert_allclose(rot.T @ (sim.data.xipos[pay] - sim.data.xpos[trunk]), [0.02, -0.01, 0.05], atol=1e-9)
    ri = rot.T @ sim.data.ximat[pay].reshape(3, 3)
    np.testing.assert_allclose(ri @ np.diag(sim.model.body_inertia[pay]) @ ri.T, inertia, atol=1e-9)
    assert sim.model.body_mass[pay] == pytest.approx(7.2)
