"""Simulated Go1 datasets for the benchmarks: MuJoCo bags (``mcoe_sim``) read back as sensor series with ground truth.

Noise model of :func:`add_noise` (added per sample, independent): N(0, sigma^2) in SI units on every component of
joint q (rad), dq (rad/s), tau (N m), gyro (rad/s) and accelerometer (m/s^2); the IMU quaternion is perturbed by a
body-side rotation, R_WI <- R_WI Exp(n), n ~ N(0, sigma^2 I_3) rad.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pinocchio as pin

from mcoe_ros.io.bag import iter_messages
from mcoe_ros.multibody.imu import rotation_quaternion
from mcoe_ros.multibody.inertia import pi_from_com
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.payload.regression import (
    PayloadRegressor,
    SensorSeries,
    sg_window_samples,
    states_from_sensors,
    steady_contact_mask,
)
from mcoe_ros.sim.cli import main as sim_main
from mcoe_ros.sim.mjcf import Go1Sim, PayloadSpec, SimConfig

#: the payload of the paper-style benchmarks: 7.2 kg, CoM (0.02, 0, 0.05) m in the trunk, 0.3 x 0.2 x 0.1 m box
PAYLOAD_MASS, PAYLOAD_COM, PAYLOAD_BOX = 7.2, (0.02, 0.0, 0.05), (0.3, 0.2, 0.1)
PAYLOAD_ARGS = ("--payload-mass", str(PAYLOAD_MASS), "--payload-com", *(str(c) for c in PAYLOAD_COM))


def simulated_payload_pi() -> np.ndarray:
    """pi (10,), trunk frame, of the benchmark payload body *as compiled in MuJoCo* (mass, CoM xipos, inertia)."""
    sim = Go1Sim(SimConfig(payload=PayloadSpec.box(PAYLOAD_MASS, np.array(PAYLOAD_COM), PAYLOAD_BOX)))
    mujoco.mj_forward(sim.model, sim.data)
    rot_t = sim.data.xmat[sim.trunk_id].reshape(3, 3)
    rot_p = rot_t.T @ sim.data.ximat[sim.payload_id].reshape(3, 3)
    com = rot_t.T @ (sim.data.xipos[sim.payload_id] - sim.data.xpos[sim.trunk_id])
    inertia = rot_p @ np.diag(sim.model.body_inertia[sim.payload_id]) @ rot_p.T
    return pi_from_com(float(sim.model.body_mass[sim.payload_id]), com, inertia)


def make_bag(out: str, scenario: str, seconds: float, extra_args: tuple[str, ...] = ()) -> None:
    """Simulate one scenario with perfect sensors and the benchmark payload into the bag directory ``out``."""
    rc = sim_main(["--scenario", f"{scenario}:{seconds:g}", *PAYLOAD_ARGS, "--noise", "0", "--out", out, *extra_args])
    if rc != 0:
        raise RuntimeError(f"mcoe_sim failed for {scenario} (rc {rc})")


def load_bag(path: str) -> tuple[SensorSeries, np.ndarray]:
    """(sensor series on the joint_states stamps, true payload pi (10,) in the trunk frame) from a simulator bag.

    Series times are seconds since the first sample; contacts are the ground-truth flags."""
    joints, imu, contacts, pi_true = {}, {}, {}, None
    for topic, t_ns, msg in iter_messages(
        path, ["joint_states", "imu/data", "ground_truth/contacts", "ground_truth/payload"]
    ):
        if topic == "joint_states":
            joints[t_ns] = (msg.position, msg.velocity, msg.effort)
        elif topic == "imu/data":
            o, w, f = msg.orientation, msg.angular_velocity, msg.linear_acceleration
            imu[t_ns] = ((o.w, o.x, o.y, o.z), (w.x, w.y, w.z), (f.x, f.y, f.z))
        elif topic == "ground_truth/contacts":
            contacts[t_ns] = np.asarray(msg.data, dtype=bool)
        elif pi_true is None:
            b = msg.inertia
            inertia = np.array([[b.ixx, b.ixy, b.ixz], [b.ixy, b.iyy, b.iyz], [b.ixz, b.iyz, b.izz]])
            pi_true = pi_from_com(b.m, np.array([b.com.x, b.com.y, b.com.z]), inertia)
    stamps = sorted(set(joints) & set(imu) & set(contacts))
    j = [joints[s] for s in stamps]
    i = [imu[s] for s in stamps]
    series = SensorSeries(
        t=(np.array(stamps) - stamps[0]) * 1e-9,
        q=np.array([x[0] for x in j]),
        dq=np.array([x[1] for x in j]),
        tau=np.array([x[2] for x in j]),
        quat=np.array([x[0] for x in i]),
        gyro=np.array([x[1] for x in i]),
        acc=np.array([x[2] for x in i]),
        contacts=np.array([contacts[s] for s in stamps]),
    )
    return series, pi_true


def load_truth_positions(path: str) -> tuple[np.ndarray, np.ndarray]:
    """(t (M,) s, true base position (M, 3) m) of a simulator bag's ground_truth/odom, on the clock of
    :func:`load_bag` (seconds since the first joint_states message)."""
    t0, ts, ps = None, [], []
    for topic, t_ns, msg in iter_messages(path, ["joint_states", "ground_truth/odom"]):
        if topic == "joint_states":
            t0 = t_ns if t0 is None else t0
            continue
        p = msg.pose.pose.position
        ts.append(t_ns)
        ps.append((p.x, p.y, p.z))
    return (np.array(ts) - t0) * 1e-9, np.array(ps)


def replay_with_truth(path: str, overrides: dict) -> tuple[list, dict[float, np.ndarray], object]:
    """Feed a simulator bag through the estimator (the node's configuration with ``overrides``), on the bag's own
    clock: (the estimates that are not holds, the true base positions {t s rounded to 1 ms: (3,) m} of
    ground_truth/odom on the estimates' clock, the :class:`~mcoe_ros.io.feed.SensorFeed` after the last sample)."""
    from mcoe_ros.io.bag import time_ns_of
    from mcoe_ros.io.feed import SensorFeed
    from mcoe_ros.io.params import node_config

    series, _ = load_bag(path)
    truth = {}
    for _, _, msg in iter_messages(path, ["ground_truth/odom"]):
        p = msg.pose.pose.position
        truth[round(time_ns_of(msg.header.stamp) * 1e-9, 3)] = np.array([p.x, p.y, p.z])
    t0 = min(truth)
    feed = SensorFeed(node_config(overrides))
    estimates = []
    for k in range(len(series)):
        feed.sample(t0 + float(series.t[k]), series.q[k], series.dq[k], series.tau[k], *series.imu(k))
        estimates += feed.poll()
    return [e for e in estimates if e.source != "hold"], truth, feed


def add_noise(series: SensorSeries, sigma: float, rng: np.random.Generator) -> SensorSeries:
    """Copy of ``series`` with the noise of the module docstring (sigma = 0: the series itself)."""
    if sigma == 0.0:
        return series

    def noisy(x: np.ndarray) -> np.ndarray:
        return x + sigma * rng.normal(size=x.shape)

    quat = np.empty_like(series.quat)
    for k, (w, x, y, z) in enumerate(series.quat):
        rot = pin.Quaternion(w, x, y, z).toRotationMatrix() @ pin.exp3(sigma * rng.normal(size=3))
        qn = rotation_quaternion(rot)
        quat[k] = (qn.w, qn.x, qn.y, qn.z)
    return SensorSeries(
        series.t,
        noisy(series.q),
        noisy(series.dq),
        noisy(series.tau),
        quat,
        noisy(series.gyro),
        noisy(series.acc),
        series.contacts,
    )


def regression_stream(
    robot: RobotModel,
    regressor: PayloadRegressor,
    series: SensorSeries,
    window: float,
    polyorder: int = 2,
    guard: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Gamma (N, 6, 10), y (N, 6), mask (N,)) of the payload regression on a series with Savitzky-Golay
    differentiation (``window`` s, ``polyorder``); mask keeps samples away from the filter edges, with >= 1 stance
    foot and (guard > 0 s) no stance change within +-guard."""
    q, v, a, tau = states_from_sensors(robot, series, window=window, polyorder=polyorder)
    gammas, ys = regressor.regress_series(q, v, a, tau, series.contacts)
    half = sg_window_samples(window, series.dt, polyorder) // 2
    mask = np.zeros(len(series), dtype=bool)
    mask[half : len(series) - half] = True
    mask &= series.contacts.any(axis=1)
    if guard > 0.0:
        mask &= steady_contact_mask(series.contacts, int(round(guard / series.dt)))
    return gammas, ys, mask
