"""Write a simulated Go1 episode as a rosbag2 (mcap default, or sqlite3) with ``rosbags``.

Topics (record time = sample time = header stamp; t = ``start_time`` + k / rate):

* ``low_state`` (``unitree_legged_msgs/msg/LowState``, no header): Unitree motor order FR, FL, RR, RL
  (slots 0..11; 12..19 zero), q / dq / tau_est from the sensor model, IMU quaternion (w, x, y, z),
  gyroscope, accelerometer (specific force), rpy, raw int16 ``foot_force`` (Unitree foot order
  FR, FL, RR, RL), ``tick`` = milliseconds since the start (uint32).
* ``joint_states`` (``sensor_msgs/msg/JointState``): URDF joint names, model order, same values.
* ``imu/data`` (``sensor_msgs/msg/Imu``, frame ``imu_link``): covariances diagonal = noise variance
  (+ bias spread), floored at 1e-12 (all-zero would mean "unknown").
* ``ground_truth/odom`` (``nav_msgs/msg/Odometry``, frame ``odom``, child ``base``): trunk-origin pose
  in odom; twist in the ``base`` frame (REP-105); covariances zero (exact).
* ``ground_truth/payload`` (``geometry_msgs/msg/InertiaStamped``, frame ``trunk``): ``m`` (kg),
  ``com`` = payload CoM in the trunk frame (m), ``ixx..izz`` = inertia about the payload CoM expressed in
  the trunk frame (kg m^2); all zero when no payload. Published at ``payload_rate`` (10 Hz) and on change.
  With a URDF mismatch (:class:`mcoe_ros.sim.mjcf.MassMismatch`) this is the *effective* payload an estimator
  keeping the URDF must find: payload + (simulated trunk - URDF trunk) as one body; its mass may then be
  negative (a robot lighter than its URDF). Leg-link deviations are in ``sim_metadata.json`` only.
* ``ground_truth/contacts`` (``std_msgs/msg/UInt8MultiArray``): 4 flags (1 = normal force > threshold)
  in model foot order FL, FR, RL, RR (layout dim label ``FL,FR,RL,RR``).

``sim_metadata.json`` inside the bag directory describes scenario, duration, payload, noise, seed,
rates, frames and orders (see :func:`record`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pinocchio as pin

from mcoe_ros.io.bag import BagWriter, header_msg, msg_class, point_msg, quaternion_msg, vector3_msg
from mcoe_ros.multibody.inertia import pi_about_com
from mcoe_ros.sim.mjcf import PayloadSpec
from mcoe_ros.sim.runner import Episode, EpisodeConfig, EpisodeStats
from mcoe_ros.sim.sensors import Measurement, Truth

LOWSTATE_TYPE = "unitree_legged_msgs/msg/LowState"
TOPICS: dict[str, str] = {
    "low_state": LOWSTATE_TYPE,
    "joint_states": "sensor_msgs/msg/JointState",
    "imu/data": "sensor_msgs/msg/Imu",
    "ground_truth/odom": "nav_msgs/msg/Odometry",
    "ground_truth/payload": "geometry_msgs/msg/InertiaStamped",
    "ground_truth/contacts": "std_msgs/msg/UInt8MultiArray",
}
DEFAULT_START_TIME = 1_700_000_000.0  #: s (Unix time) of the first sample; fixed for reproducible bags
MODEL_FOOT_ORDER = ("FL", "FR", "RL", "RR")
UNITREE_FOOT_ORDER = ("FR", "FL", "RR", "RL")


def _rpy_from_wxyz(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q
    roll = np.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = np.arcsin(np.clip(2 * (w * y - z * x), -1.0, 1.0))
    yaw = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return np.array([roll, pitch, yaw])


class MessageFactory:
    """Builds the bag messages from one sample (rosbags dataclasses)."""

    def __init__(self, joint_names: list[str], model_to_hw: np.ndarray, imu_variances: tuple[float, float, float]):
        self.joint_names = list(joint_names)
        self.model_to_hw = np.asarray(model_to_hw)
        self.foot_to_hw = np.array([MODEL_FOOT_ORDER.index(f) for f in UNITREE_FOOT_ORDER])
        self.var = imu_variances
        self.t_low = {
            n: msg_class(f"unitree_legged_msgs/msg/{n}") for n in ("LowState", "IMU", "MotorState", "BmsState")
        }

    def low_state(self, meas: Measurement) -> object:
        c = self.t_low
        q, dq, tau = (np.asarray(v)[self.model_to_hw] for v in (meas.q, meas.dq, meas.tau))
        motors = []
        for i in range(20):
            leg = i < 12
            motors.append(
                c["MotorState"](
                    mode=np.uint8(0x0A if leg else 0),
                    q=float(q[i]) if leg else 0.0,
                    dq=float(dq[i]) if leg else 0.0,
                    ddq=0.0,
                    tau_est=float(tau[i]) if leg else 0.0,
                    q_raw=0.0,
                    dq_raw=0.0,
                    ddq_raw=0.0,
                    temperature=np.int8(30 if leg else 0),
                    reserve=np.zeros(2, np.uint32),
                )
            )
        imu = c["IMU"](
            quaternion=np.asarray(meas.quat, np.float32),
            gyroscope=np.asarray(meas.gyro, np.float32),
            accelerometer=np.asarray(meas.acc, np.float32),
            rpy=_rpy_from_wxyz(meas.quat).astype(np.float32),
            temperature=np.int8(35),
        )
        bms = c["BmsState"](
            version_h=np.uint8(1),
            version_l=np.uint8(0),
            bms_status=np.uint8(8),
            soc=np.uint8(90),
            current=np.int32(-3000),
            cycle=np.uint16(12),
            bq_ntc=np.array([30, 30], np.int8),
            mcu_ntc=np.array([32, 32], np.int8),
            cell_vol=np.full(10, 3800, np.uint16),
        )
        return c["LowState"](
            head=np.array([0xFE, 0xEF], np.uint8),
            level_flag=np.uint8(0xFF),
            frame_reserve=np.uint8(0),
            sn=np.zeros(2, np.uint32),
            version=np.zeros(2, np.uint32),
            band_width=np.uint16(0),
            imu=imu,
            motor_state=motors,
            bms=bms,
            foot_force=np.asarray(meas.foot_force_raw, np.int16)[self.foot_to_hw],
            foot_force_est=np.zeros(4, np.int16),
            tick=np.uint32(int(round(meas.t * 1000.0)) % 2**32),
            wireless_remote=np.zeros(40, np.uint8),
            reserve=np.uint32(0),
            crc=np.uint32(0),
        )

    def joint_state(self, stamp_ns: int, meas: Measurement) -> object:
        return msg_class("sensor_msgs/msg/JointState")(
            header=header_msg(stamp_ns, ""),
            name=self.joint_names,
            position=np.asarray(meas.q, np.float64),
            velocity=np.asarray(meas.dq, np.float64),
            effort=np.asarray(meas.tau, np.float64),
        )

    def imu(self, stamp_ns: int, meas: Measurement) -> object:
        v_ori, v_gyro, v_acc = self.var
        return msg_class("sensor_msgs/msg/Imu")(
            header=header_msg(stamp_ns, "imu_link"),
            orientation=quaternion_msg(meas.quat),
            orientation_covariance=np.diag([v_ori] * 3).ravel(),
            angular_velocity=vector3_msg(meas.gyro),
            angular_velocity_covariance=np.diag([v_gyro] * 3).ravel(),
            linear_acceleration=vector3_msg(meas.acc),
            linear_acceleration_covariance=np.diag([v_acc] * 3).ravel(),
        )

    @staticmethod
    def odom(stamp_ns: int, truth: Truth) -> object:
        geo = "geometry_msgs/msg/"
        pose = msg_class(geo + "Pose")(position=point_msg(truth.base_pos), orientation=quaternion_msg(truth.base_quat))
        twist = msg_class(geo + "Twist")(linear=vector3_msg(truth.v_body), angular=vector3_msg(truth.w_body))
        return msg_class("nav_msgs/msg/Odometry")(
            header=header_msg(stamp_ns, "odom"),
            child_frame_id="base",
            pose=msg_class(geo + "PoseWithCovariance")(pose=pose, covariance=np.zeros(36)),
            twist=msg_class(geo + "TwistWithCovariance")(twist=twist, covariance=np.zeros(36)),
        )

    @staticmethod
    def payload(stamp_ns: int, payload: PayloadSpec | np.ndarray) -> object:
        """InertiaStamped of a PayloadSpec or of a pi (10,) in the trunk frame (zero mass: all zero)."""
        if isinstance(payload, PayloadSpec):
            mass, com, inertia = payload.mass, payload.com, payload.inertia
        elif abs(payload[0]) > 1e-9:
            mass, com, inertia = pi_about_com(np.asarray(payload, dtype=float))
        else:
            mass, com, inertia = 0.0, np.zeros(3), np.zeros((3, 3))
        body = msg_class("geometry_msgs/msg/Inertia")(
            m=float(mass),
            com=vector3_msg(com if mass != 0 else np.zeros(3)),
            ixx=float(inertia[0, 0]),
            ixy=float(inertia[0, 1]),
            ixz=float(inertia[0, 2]),
            iyy=float(inertia[1, 1]),
            iyz=float(inertia[1, 2]),
            izz=float(inertia[2, 2]),
        )
        return msg_class("geometry_msgs/msg/InertiaStamped")(header=header_msg(stamp_ns, "trunk"), inertia=body)

    @staticmethod
    def contacts(truth: Truth) -> object:
        dim = msg_class("std_msgs/msg/MultiArrayDimension")(label=",".join(MODEL_FOOT_ORDER), size=4, stride=4)
        layout = msg_class("std_msgs/msg/MultiArrayLayout")(dim=[dim], data_offset=0)
        return msg_class("std_msgs/msg/UInt8MultiArray")(layout=layout, data=np.asarray(truth.contacts, np.uint8))


def record(
    cfg: EpisodeConfig,
    out: str | os.PathLike,
    fmt: str = "mcap",
    compression: str = "none",
    payload_rate: float = 10.0,
    start_time: float = DEFAULT_START_TIME,
    scenario_text: str = "",
) -> tuple[EpisodeStats, dict]:
    """Simulate ``cfg`` and write the bag directory ``out`` (must not exist). Returns (stats, metadata dict)."""
    out = Path(out)
    episode = Episode(cfg)
    robot = episode.sim.robot
    factory = MessageFactory(robot.joint_names, robot.joint_map.model_to_hw, episode.sensors.imu_variances())
    start_ns = int(round(start_time * 1e9))
    payload_div = max(int(round(cfg.rate / payload_rate)), 1)
    state = {"k": 0, "last_payload": None}
    with BagWriter(out, fmt, compression) as bag:

        def on_sample(truth: Truth, meas: Measurement, payload: PayloadSpec) -> None:
            k = state["k"]
            t_ns = start_ns + int(round(k * 1e9 / cfg.rate))
            bag.write("low_state", TOPICS["low_state"], t_ns, factory.low_state(meas))
            bag.write("joint_states", TOPICS["joint_states"], t_ns, factory.joint_state(t_ns, meas))
            bag.write("imu/data", TOPICS["imu/data"], t_ns, factory.imu(t_ns, meas))
            bag.write("ground_truth/odom", TOPICS["ground_truth/odom"], t_ns, factory.odom(t_ns, truth))
            pi_eff = episode.sim.effective_payload_pi()
            key = tuple(pi_eff)
            if k % payload_div == 0 or key != state["last_payload"]:
                bag.write("ground_truth/payload", TOPICS["ground_truth/payload"], t_ns, factory.payload(t_ns, pi_eff))
                state["last_payload"] = key
            bag.write("ground_truth/contacts", TOPICS["ground_truth/contacts"], t_ns, factory.contacts(truth))
            state["k"] = k + 1

        stats = episode.run(on_sample)
    pay = cfg.payload
    meta = {
        "generator": "mcoe_ros.sim (MuJoCo)",
        "scenario": scenario_text or ",".join(f"{n}:{d:g}" for n, d in cfg.segments),
        "segments": [{"name": n, "duration": d} for n, d in cfg.segments],
        "duration_s": cfg.duration,
        "start_time_s": start_time,
        "payload": {
            "mass_kg": pay.mass,
            "com_trunk_m": pay.com.tolist(),
            "inertia_about_com_trunk_kgm2": pay.inertia.tolist(),
            "present_at_start": stats.payload_at_start,
            "changes": [{"t_s": t, "present": a} for t, a in stats.payload_changes],
        },
        "controller_knows_payload": cfg.knows,
        "noise": cfg.noise.as_dict(),
        "gyro_bias": episode.sensors.initial_gyro_bias.tolist(),
        "acc_bias": episode.sensors.initial_acc_bias.tolist(),
        "gyro_bias_final": episode.sensors.gyro_bias.tolist(),
        "acc_bias_final": episode.sensors.acc_bias.tolist(),
        "gyro_bias_mean": episode.sensors.mean_bias[0].tolist(),
        "acc_bias_mean": episode.sensors.mean_bias[1].tolist(),
        "actuator_losses": {
            "viscous_Nms_per_rad": list(cfg.losses.viscous),
            "coulomb_Nm": list(cfg.losses.coulomb),
            "rotor_inertia_kgm2": [r + cfg.armature for r in cfg.losses.rotor_inertia],
            "joint_types": ["hip", "thigh", "calf"],
            "torque_scale": cfg.losses.torque_scale,
            "torque_offset_Nm": cfg.losses.torque_offset,
        },
        "mass_mismatch": _mismatch_meta(episode),
        "contact": {
            "floor_friction": episode.sim.cfg.contact.floor_friction,
            "torsional_friction": episode.sim.cfg.contact.torsional_friction,
            "rolling_friction": episode.sim.cfg.contact.rolling_friction,
            "foot_condim": episode.sim.cfg.contact.foot_condim,
            "solref": list(episode.sim.cfg.contact.solref),
            "solimp": list(episode.sim.cfg.contact.solimp),
            "foot_radius": episode.sim.cfg.contact.foot_radius,
            "noslip_iterations": episode.sim.cfg.contact.noslip_iterations,
        },
        "seed": cfg.seed,
        "rates_hz": {"sensors": cfg.rate, "control": cfg.control_rate, "physics": 1.0 / cfg.timestep},
        "payload_rate_hz": payload_rate,
        "armature_kgm2": cfg.armature,
        "floor_friction": episode.sim.cfg.contact.floor_friction,
        "foot_force_scale_raw_per_N": cfg.foot_force_scale,
        "contact_threshold_N": cfg.contact_threshold,
        "frames": {"world": "odom", "base": "base (trunk origin)", "imu": "imu_link", "payload": "trunk"},
        "joint_order_model": robot.joint_names,
        "joint_order_low_state": list(robot.joint_map.hw_names),
        "foot_order_contacts": list(MODEL_FOOT_ORDER),
        "foot_order_low_state": list(UNITREE_FOOT_ORDER),
        "topics": TOPICS,
        "format": fmt,
        "compression": compression,
        "robot_mass_kg": episode.sim.robot_mass,
        "stats": {
            "samples": stats.n_samples,
            "min_base_height_m": stats.min_height,
            "max_base_height_m": stats.max_height,
            "fell": stats.fell,
        },
    }
    with open(out / "sim_metadata.json", "w", encoding="utf-8") as fh:
        json.dump(meta, fh, indent=2, default=float)
        fh.write("\n")
    return stats, meta


def _mismatch_meta(episode: Episode) -> dict:
    """Simulated robot vs URDF: options, trunk deviation (pi, trunk frame), effective payload at the start, and per
    leg-link body the mass and CoM differences."""
    sim = episode.sim
    mm = sim.cfg.mismatch
    model = sim.robot.model
    true_inertias = sim.link_inertias()
    legs = {}
    for jid in range(2, model.njoints):
        nom, tru = model.inertias[jid], true_inertias[jid]
        legs[model.names[jid].replace("_joint", "")] = {
            "mass_kg": float(tru.mass),
            "urdf_mass_kg": float(nom.mass),
            "inertia_scale": float(tru.mass / nom.mass) if nom.mass > 0 else 1.0,
        }
    dev = sim.trunk_deviation_pi()
    pay = episode.cfg.payload
    eff = (pay.pi if pay.mass > 0 else np.zeros(10)) + dev
    return {
        "scale": mm.scale,
        "direction": mm.direction,
        "links": mm.links,
        "trunk_com_offset_max_m": mm.com_offset,
        "seed": mm.seed,
        "trunk_mass_kg": float(true_inertias[1].mass),
        "urdf_trunk_mass_kg": float(model.inertias[1].mass),
        "trunk_com_m": np.asarray(true_inertias[1].lever).tolist(),
        "urdf_trunk_com_m": np.asarray(model.inertias[1].lever).tolist(),
        "trunk_deviation_pi": dev.tolist(),
        "effective_payload_pi_with_payload": eff.tolist(),
        "leg_mass_deviation_kg": float(
            sum(true_inertias[j].mass - model.inertias[j].mass for j in range(2, model.njoints))
        ),
        "legs": legs,
        "pinocchio": pin.__version__,
    }
