"""MuJoCo Go1 simulator: model consistency with Pinocchio, physics sanity, controller, bags and CLI."""

from __future__ import annotations

import json
from dataclasses import replace

import mujoco
import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.io.bag import bag_topics, iter_messages
from mcoe_ros.multibody.inertia import pi_about_com
from mcoe_ros.multibody.robot import GO1_UNITREE_JOINT_ORDER, RobotModel
from mcoe_ros.sim.cli import main as sim_main
from mcoe_ros.sim.mjcf import (
    REALISTIC_LOSSES,
    SOFT_FEET,
    ActuatorLosses,
    ContactConfig,
    Go1Sim,
    MassMismatch,
    PayloadSpec,
    SimConfig,
    principal_axes,
)
from mcoe_ros.sim.recorder import TOPICS, record
from mcoe_ros.sim.runner import Episode, EpisodeConfig, parse_segments
from mcoe_ros.sim.scenarios import Go1Controller, leg_ik
from mcoe_ros.sim.sensors import REALISTIC_NOISE, NoiseConfig, SensorModel, Truth

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
        (["--joint-damping", "1", "2"], "1 or 3 values"),
        (["--joint-friction", "-0.1"], "must be finite and >= 0"),
        (["--mass-mismatch", "0.7"], "within 0 .. 0.5"),
        (["--foot-condim", "5"], "condim must be"),
        (["--torque-scale", "3"], "torque_scale"),
        (["--gyro-bias-walk", "-1"], "must be >= 0"),
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


# ---------------------------------------------------------------------------------------------------- realism options
def test_actuator_losses_are_in_the_physics_and_not_in_the_reported_torque(robot):
    losses = ActuatorLosses(
        viscous=(1.0, 1.5, 2.0), coulomb=0.2, rotor_inertia=(0.01, 0.02, 0.03), torque_scale=1.05, torque_offset=0.1
    )
    ep = Episode(EpisodeConfig(segments=[("squat-sway", 0.6)], payload=PAYLOAD, losses=losses))
    m = ep.sim.model
    for j, name in enumerate(robot.joint_names):
        kind = next(i for i, t in enumerate(("hip", "thigh", "calf")) if t in name)
        dof = 6 + j
        assert m.dof_damping[dof] == pytest.approx(losses.viscous[kind])
        assert m.dof_frictionloss[dof] == pytest.approx(0.2)
        assert m.dof_armature[dof] == pytest.approx(losses.rotor_inertia[kind])
    pairs = []
    ep.run(lambda truth, meas, payload: pairs.append((truth.tau, truth.tau_reported, meas.tau, truth.dq)))
    tau, reported, measured, dq = (np.array(x) for x in zip(*pairs, strict=True))
    np.testing.assert_allclose(tau, 1.05 * (reported - 0.1), atol=1e-12)  # kt error and offset
    np.testing.assert_array_equal(measured, reported)  # perfect sensors report exactly that
    assert np.abs(dq).max() > 0.1  # the joints moved: damping and friction really took torque
    # the losses change the motion: same commands on a loss-free robot end elsewhere
    ep0 = Episode(EpisodeConfig(segments=[("squat-sway", 0.6)], payload=PAYLOAD))
    q0 = []
    ep0.run(lambda truth, meas, payload: q0.append(truth.tau))
    assert np.abs(np.array(q0) - tau).max() > 0.5


def test_mass_mismatch_perturbs_links_and_the_bag_records_the_effective_payload(tmp_path, robot):
    mm = MassMismatch(scale=0.1, direction="lighter", com_offset=0.01, seed=3)
    sim = Go1Sim(SimConfig(payload=PAYLOAD, mismatch=mm), robot)
    nominal = robot.model.inertias
    for jid in range(1, robot.model.njoints):
        bid = jid  # MuJoCo body ids follow the Pinocchio joint ids (world = 0)
        ratio = sim.model.body_mass[bid] / nominal[jid].mass
        assert 0.9 - 1e-9 <= ratio <= 0.95 + 1e-9  # lighter by 5..10 %
    heavier = Go1Sim(SimConfig(mismatch=MassMismatch(0.1, "heavier", seed=3)), robot)
    assert heavier.robot_mass > sum(i.mass for i in nominal[1:]) > sim.robot_mass
    dev = sim.trunk_deviation_pi()
    assert dev[0] == pytest.approx(sim.model.body_mass[1] - nominal[1].mass)
    np.testing.assert_allclose(sim.effective_payload_pi(), PAYLOAD.pi + dev, atol=1e-12)
    # same seed, same robot; different seed, different robot
    assert Go1Sim(SimConfig(mismatch=mm), robot).model.body_mass[1] == sim.model.body_mass[1]
    assert (
        Go1Sim(SimConfig(mismatch=MassMismatch(0.1, "lighter", 0.01, 4)), robot).model.body_mass[1]
        != (sim.model.body_mass[1])
    )
    # no payload on a lighter robot: the ground truth is a negative effective payload
    out = tmp_path / "mm"
    _, meta = record(EpisodeConfig(segments=[("stand", 0.2)], mismatch=mm), out)
    truth = [msg.inertia for _, _, msg in iter_messages(out, ["ground_truth/payload"])]
    assert truth[0].m == pytest.approx(dev[0]) and truth[0].m < 0
    assert truth[0].com.x == pytest.approx(dev[1] / dev[0])
    assert meta["mass_mismatch"]["trunk_mass_kg"] == pytest.approx(sim.model.body_mass[1])
    assert meta["mass_mismatch"]["leg_mass_deviation_kg"] < 0
    legs_sim = sum(sim.model.body_mass[j] - nominal[j].mass for j in range(2, robot.model.njoints))
    assert meta["mass_mismatch"]["leg_mass_deviation_kg"] == pytest.approx(legs_sim, abs=1e-12)
    assert meta["mass_mismatch"]["links"] == "all"
    assert len(meta["mass_mismatch"]["legs"]) == 12


def test_trunk_only_mass_mismatch_keeps_the_legs_and_draws_the_trunk_as_all_links(tmp_path, robot):
    nominal = robot.model.inertias
    for direction in ("lighter", "heavier", "random"):
        everything = Go1Sim(SimConfig(mismatch=MassMismatch(0.1, direction, 0.01, 7, "all")), robot)
        trunk = Go1Sim(SimConfig(mismatch=MassMismatch(0.1, direction, 0.01, 7, "trunk")), robot)
        # the trunk is the same draw as with every link perturbed (same seed): mass, CoM and inertia
        np.testing.assert_array_equal(trunk.trunk_deviation_pi(), everything.trunk_deviation_pi())
        assert trunk.model.body_mass[1] == everything.model.body_mass[1] != nominal[1].mass
        np.testing.assert_array_equal(trunk.model.body_ipos[1], everything.model.body_ipos[1])
        for jid in range(2, robot.model.njoints):  # the legs keep their URDF values (all-links moves them)
            assert trunk.model.body_mass[jid] == pytest.approx(nominal[jid].mass, rel=1e-15)
            assert everything.model.body_mass[jid] != pytest.approx(nominal[jid].mass, rel=1e-3)
            true = trunk.link_inertias()[jid]
            np.testing.assert_array_equal(true.toDynamicParameters(), nominal[jid].toDynamicParameters())
    with pytest.raises(ValueError, match="links must be one of"):
        MassMismatch(0.1, links="legs")
    # the metadata report the trunk's deviation and zero leg deviation; the CLI flag reaches it
    out = tmp_path / "trunk"
    argv = ["--scenario", "stand:0.2", "--payload-mass", "0", "--seed", "7", "--mass-mismatch", "0.1"]
    argv += ["--trunk-com-offset", "0.01", "--mismatch-direction", "heavier", "--mismatch-links", "trunk"]
    assert sim_main([*argv, "--out", str(out)]) == 0
    meta = json.loads((out / "sim_metadata.json").read_text())["mass_mismatch"]
    ref = Go1Sim(SimConfig(mismatch=MassMismatch(0.1, "heavier", 0.01, 7, "trunk")), robot)
    assert meta["links"] == "trunk" and meta["leg_mass_deviation_kg"] == 0.0
    np.testing.assert_allclose(meta["trunk_deviation_pi"], ref.trunk_deviation_pi(), rtol=0, atol=1e-12)
    assert meta["trunk_mass_kg"] - meta["urdf_trunk_mass_kg"] == pytest.approx(ref.trunk_deviation_pi()[0])
    assert 0.05 * nominal[1].mass <= ref.trunk_deviation_pi()[0] <= 0.1 * nominal[1].mass
    assert all(leg["inertia_scale"] == 1.0 for leg in meta["legs"].values())
    truth = [msg.inertia for _, _, msg in iter_messages(out, ["ground_truth/payload"])]
    assert truth[0].m == pytest.approx(ref.trunk_deviation_pi()[0])


def test_imu_biases_random_walk_is_seeded_and_scales_with_sqrt_time():
    noise = NoiseConfig(gyro_bias_std=0.01, acc_bias_std=0.05, gyro_bias_walk=0.01, acc_bias_walk=0.1).scaled(1.0)
    truth = Truth(
        0.0,
        np.zeros(12),
        np.zeros(12),
        np.zeros(12),
        np.zeros(3),
        np.array([1.0, 0, 0, 0]),
        np.zeros(3),
        np.zeros(3),
        np.array([1.0, 0, 0, 0]),
        np.zeros(3),
        np.array([0, 0, 9.81]),
        np.zeros(4),
        np.ones(4, bool),
    )

    def walk(seed, noise, n=2000):
        sm = SensorModel(noise, seed, dt=0.002)
        g0 = sm.gyro_bias.copy()
        gyro = np.array([sm.measure(truth).gyro for _ in range(n)])
        return g0, sm.gyro_bias - g0, sm.acc_bias - sm.initial_acc_bias, gyro

    g0, dg, da, gyro = walk(0, noise)
    _, dg2, _, _ = walk(0, noise)
    np.testing.assert_array_equal(dg, dg2)
    assert np.linalg.norm(dg) > 0 and np.linalg.norm(da) > 0
    # the measured gyro carries the drifting bias: the last 100 samples' mean is near the final bias
    np.testing.assert_allclose(gyro[-100:].mean(axis=0), g0 + dg, atol=0.01)
    # walk std after T = 4 s: sigma sqrt(T) per axis; over many seeds the spread matches
    finals = np.array([walk(s, noise, 2000)[1] for s in range(40)])
    assert 0.6 * 0.01 * 2.0 < finals.std() < 1.4 * 0.01 * 2.0
    # no walk: constant bias, and the white-noise stream is the same as with a walk
    still = replace(noise, gyro_bias_walk=0.0, acc_bias_walk=0.0)
    g0s, dgs, das, gyros = walk(0, still)
    np.testing.assert_array_equal(g0s, g0)
    assert not dgs.any() and not das.any()
    diff = gyro - gyros  # = the walk alone: zero at the first sample, then steps of sigma sqrt(dt)
    np.testing.assert_allclose(diff[0], 0.0, atol=1e-15)
    assert np.abs(np.diff(diff, axis=0)).max() < 6 * 0.01 * np.sqrt(0.002)


def _rest_truth(acc=(0.0, 0.0, 9.81)) -> Truth:
    """A robot at rest (level, heading 0) whose IMU reads the specific force ``acc`` m/s^2."""
    z3, z12, unit = np.zeros(3), np.zeros(12), np.array([1.0, 0, 0, 0])
    return Truth(0.0, z12, z12, z12, z3, unit, z3, z3, unit, z3, np.array(acc), np.zeros(4), np.ones(4, bool))


def _rpy(quat_wxyz) -> np.ndarray:
    return pin.rpy.matrixToRpy(pin.Quaternion(*quat_wxyz).toRotationMatrix())


def test_attitude_filter_carries_the_accelerometer_bias_and_integrates_the_gyro_bias_in_yaw():
    """The IMU's own attitude filter (the Go1-like profile): at rest its roll and pitch are the accelerometer bias's
    tilt (b_a,y / g, −b_a,x / g), its yaw starts at the true heading and drifts with the gyro's z bias."""
    noise = replace(REALISTIC_NOISE, gyro_bias_walk=0.0, acc_bias_walk=0.0)
    truth = _rest_truth()
    for seed in (0, 1, 2):
        sm = SensorModel(noise, seed, dt=0.002)
        quats = [sm.measure(truth).quat for _ in range(2000)]  # 4 s
        ba, bg = sm.acc_bias, sm.gyro_bias
        first, last = _rpy(quats[0]), _rpy(quats[-1])
        np.testing.assert_allclose(last[:2], [ba[1] / 9.81, -ba[0] / 9.81], atol=6e-4)
        assert abs(first[2]) < 1e-4
        np.testing.assert_allclose(last[2], bg[2] * 4.0, rtol=0.1, atol=1e-3)
    # the bag's Imu orientation covariance carries the filter's bias tilt
    assert sm.imu_variances()[0] == pytest.approx(noise.orientation_std**2 + (noise.acc_bias_std / 9.81) ** 2)
    # the oracle (gain 0): the true orientation with its white noise; no noise at all: exactly the truth
    oracle = SensorModel(replace(noise, attitude_filter_gain=0.0), 0, dt=0.002)
    assert np.linalg.norm(_rpy(oracle.measure(truth).quat)[:2]) < 0.02
    perfect = SensorModel(REALISTIC_NOISE.scaled(0.0), 0, dt=0.002)
    assert REALISTIC_NOISE.scaled(0.0).attitude_filter_gain == 0.0
    np.testing.assert_array_equal(perfect.measure(truth).quat, [1.0, 0, 0, 0])


def test_attitude_filter_leans_with_a_horizontal_acceleration_and_leaves_the_other_channels():
    """A level robot accelerating forward at 1 m/s^2 reads a tilted specific force: the filter leans towards it with its
    gain (~63 % of atan(1 / g) after 1 / k_p s, all of it at the end; no integral term here); gyro, accelerometer,
    encoders and torque are the same samples with or without the filter (its pre-roll has its own stream)."""
    clean = replace(REALISTIC_NOISE.scaled(0.0), attitude_filter_gain=1.0, attitude_filter_integral=0.0)
    sm = SensorModel(clean, 0, dt=0.002)
    sm.measure(_rest_truth())  # the pre-roll at rest
    pitch = [_rpy(sm.measure(_rest_truth((1.0, 0.0, 9.81))).quat)[1] for _ in range(5000)]
    lean = -np.arctan2(1.0, 9.81)  # the specific force leans forward: the filter reads the nose up (pitch < 0)
    assert 0.5 * lean > pitch[499] > 0.75 * lean
    np.testing.assert_allclose(pitch[-1], lean, rtol=0.02)
    with_filter = SensorModel(REALISTIC_NOISE, 3, dt=0.002)
    without = SensorModel(replace(REALISTIC_NOISE, attitude_filter_gain=0.0), 3, dt=0.002)
    for _ in range(50):
        a, b = with_filter.measure(_rest_truth()), without.measure(_rest_truth())
        for name in ("q", "dq", "tau", "gyro", "acc"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.allclose(a.quat, b.quat, atol=1e-4)


def test_soft_round_feet_and_floor_options_reach_mujoco(robot):
    sim = Go1Sim(SimConfig(contact=SOFT_FEET, floor_friction=0.3), robot)
    for gid in sim.foot_geom_ids:
        assert sim.model.geom_condim[gid] == 6
        np.testing.assert_allclose(sim.model.geom_solref[gid], SOFT_FEET.solref)
        np.testing.assert_allclose(sim.model.geom_friction[gid], [0.3, 0.01, 0.002])
    np.testing.assert_allclose(sim.model.geom_friction[sim.floor_id], [0.3, 0.01, 0.002])
    # a softer ground lets the robot sink deeper into it
    depth = {}
    for name, contact in (("hard", ContactConfig(solref=(0.005, 1.0))), ("soft", ContactConfig(solref=(0.08, 1.0)))):
        ep = Episode(EpisodeConfig(segments=[("stand", 0.4)], payload=PAYLOAD, contact=contact))
        heights = []
        ep.run(lambda truth, meas, payload, h=heights: h.append(truth.base_pos[2]))
        depth[name] = np.mean(heights[-50:])
    assert depth["soft"] < depth["hard"] - 0.002


def test_realistic_profile_from_the_cli(tmp_path):
    out = tmp_path / "real"
    code = sim_main(
        [
            "--scenario",
            "stand:0.2",
            "--realistic",
            "--payload-mass",
            "3",
            "--joint-damping",
            "0.5",
            "--mass-mismatch",
            "0.05",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    meta = json.loads((out / "sim_metadata.json").read_text())
    assert meta["noise"]["gyro_bias_std"] == REALISTIC_NOISE.gyro_bias_std
    assert meta["noise"]["acc_bias_walk"] == REALISTIC_NOISE.acc_bias_walk
    assert meta["actuator_losses"]["viscous_Nms_per_rad"] == [0.5, 0.5, 0.5]  # flag overrides the profile
    assert meta["actuator_losses"]["coulomb_Nm"] == list(REALISTIC_LOSSES.coulomb)
    assert meta["contact"]["foot_condim"] == 6 and meta["mass_mismatch"]["scale"] == 0.05
    assert meta["gyro_bias_final"] != meta["gyro_bias"]


def test_foot_radius_option_moves_the_contact_to_the_foot_frame(robot):
    """--foot-radius sets the foot spheres' radius; standing, the foot frames (sphere centres) sit one radius above
    the floor and the controller keeps the trunk NOMINAL_HEIGHT above them (same posture as the URDF's 2 cm)."""
    with pytest.raises(ValueError, match="foot radius"):
        ContactConfig(foot_radius=0.0)
    centre, trunk = {}, {}
    for radius in (0.02, 0.001):
        contact = ContactConfig(foot_radius=radius)
        ep = Episode(EpisodeConfig(segments=[("stand", 0.6)], payload=PAYLOAD, contact=contact))
        np.testing.assert_allclose(ep.sim.model.geom_size[ep.sim.foot_geom_ids, 0], radius)
        feet, base = [], []

        def on_sample(truth, meas, payload, feet=feet, base=base, ep=ep):
            q, _ = ep.pin_state()
            data = ep.ctrl.robot.model.createData()
            pin.framesForwardKinematics(ep.ctrl.robot.model, data, q)
            feet.append([data.oMf[f].translation[2] for f in ep.ctrl.robot.foot_frame_ids])
            base.append(truth.base_pos[2])

        ep.run(on_sample)
        centre[radius], trunk[radius] = np.mean(feet[-50:]), np.mean(base[-50:])
        assert radius - 0.004 < centre[radius] < radius  # minus the soft constraint's penetration (~2.6 mm)
    assert centre[0.02] - centre[0.001] == pytest.approx(0.019, abs=1e-3)
    assert trunk[0.02] - trunk[0.001] == pytest.approx(0.019, abs=1e-3)


def test_noslip_option_stops_the_soft_friction_creep_of_held_feet(robot):
    """MuJoCo's soft friction lets a held foot creep under a steady tangential load (R/B per N, docs/localisation.md
    session 22); ``noslip_iterations`` (the ``grip-floor`` profiles of the realism suite) removes that creep. A 5 kg
    off-centre payload on the soft floor, standing still: the foot frames' horizontal displacement over the last
    second is ~1 mm without the no-slip pass and ~0 with it."""
    with pytest.raises(ValueError, match="noslip iterations"):
        ContactConfig(noslip_iterations=-1)
    payload = PayloadSpec(5.0, [0.08, 0.03, 0.05], np.diag([0.05, 0.08, 0.1]))
    creep = {}
    for iterations in (0, 20):
        ep = Episode(
            EpisodeConfig(
                segments=[("stand", 1.5)], payload=payload, contact=replace(SOFT_FEET, noslip_iterations=iterations)
            )
        )
        assert ep.sim.model.opt.noslip_iterations == iterations
        data = robot.model.createData()
        feet = []

        def on_sample(truth, meas, payload, ep=ep, data=data, feet=feet):
            q, _ = ep.pin_state()
            pin.framesForwardKinematics(robot.model, data, q)
            feet.append([data.oMf[f].translation[:2].copy() for f in robot.foot_frame_ids])

        ep.run(on_sample)
        feet = np.array(feet)
        creep[iterations] = np.linalg.norm(feet[-1] - feet[len(feet) // 3], axis=1)
    assert np.all(creep[0] > 0.3e-3)
    assert np.all(creep[20] < 0.05e-3)


def test_noslip_option_from_the_cli_is_recorded(tmp_path):
    out = tmp_path / "grip"
    assert sim_main(["--scenario", "stand:0.1", "--realistic", "--noslip-iterations", "20", "--out", str(out)]) == 0
    meta = json.loads((out / "sim_metadata.json").read_text())
    assert meta["contact"]["noslip_iterations"] == 20
