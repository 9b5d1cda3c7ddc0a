"""Episode runner: chains scenario segments, steps MuJoCo, runs the controller and samples the sensors.

Timing: physics at ``1 / timestep`` Hz (default 1 kHz), controller reference/feed-forward at
``control_rate``, motor PD at the physics rate, sensors at ``rate`` (default 500 Hz); both rates must
divide the physics rate. Before t = 0 the robot settles for ``settle`` s in the nominal stance (not
recorded). Sample k is at t = k / rate, k = 0 .. round(duration * rate) - 1; its state, torques, contact
forces and accelerometer reading are those of that instant (MuJoCo sensors are evaluated in ``mj_step``
before integration). The controller uses ground-truth contact flags.

Actuator losses (:class:`mcoe_ros.sim.mjcf.ActuatorLosses`): the controller's torque is what the robot reports
(plus ``torque_offset``); MuJoCo applies ``torque_scale`` times it, then loses joint damping, Coulomb friction and
rotor inertia inside the physics. The controller keeps the nominal URDF (it does not know a mass mismatch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import mujoco
import numpy as np

from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.sim.mjcf import ActuatorLosses, ContactConfig, Go1Sim, MassMismatch, PayloadSpec, SimConfig
from mcoe_ros.sim.scenarios import (
    FOOT_RADIUS,
    NOMINAL_HEIGHT,
    ControllerGains,
    Go1Controller,
    known_payload_pi,
    make_scenario,
)
from mcoe_ros.sim.sensors import Measurement, NoiseConfig, SensorModel, Truth


def parse_segments(text: str, default_duration: float) -> list[tuple[str, float]]:
    """``"squat-sway:6,trot:4"`` -> [("squat-sway", 6.0), ("trot", 4.0)]; a bare name gets ``default_duration``."""
    out = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            raise ValueError(f"empty scenario in '{text}'")
        name, _, dur = item.partition(":")
        try:
            duration = float(dur) if dur else float(default_duration)
        except ValueError:
            raise ValueError(f"bad duration '{dur}' for scenario '{name}'") from None
        if not np.isfinite(duration) or duration <= 0:
            raise ValueError(f"scenario '{name}': duration must be > 0, got {dur or default_duration}")
        out.append((name, duration))
    return out


@dataclass
class EpisodeConfig:
    """Everything that defines a simulated recording (see the module docstrings of mcoe_ros.sim)."""

    segments: list[tuple[str, float]] = field(default_factory=lambda: [("stand", 2.0)])
    payload: PayloadSpec = field(default_factory=PayloadSpec)
    payload_at_start: bool = True
    knows: str = "mass"  #: what the controller knows of the payload: none | mass | full
    rate: float = 500.0
    control_rate: float = 500.0
    timestep: float = 0.001
    armature: float = 0.0
    floor_friction: float | None = None  #: overrides contact.floor_friction when set
    losses: ActuatorLosses = field(default_factory=ActuatorLosses)
    mismatch: MassMismatch = field(default_factory=MassMismatch)
    contact: ContactConfig = field(default_factory=ContactConfig)
    noise: NoiseConfig = field(default_factory=lambda: NoiseConfig().scaled(0.0))
    seed: int = 0
    settle: float = 0.5
    contact_threshold: float = 1.0  #: N, ground-truth contact flag = normal force above this
    foot_force_scale: float = 1.0  #: raw foot_force units per N

    @property
    def duration(self) -> float:
        return float(sum(d for _, d in self.segments))


@dataclass
class EpisodeStats:
    """Summary of a run: min/max trunk height (m), fell (trunk below 0.12 m), wall time is measured by callers."""

    n_samples: int = 0
    min_height: float = np.inf
    max_height: float = -np.inf
    fell: bool = False
    payload_at_start: bool = False
    payload_changes: list[tuple[float, bool]] = field(default_factory=list)


def rate_divider(physics_rate: float, rate: float, what: str) -> int:
    div = int(round(physics_rate / rate))
    if div < 1 or abs(physics_rate / div - rate) > 1e-6 * rate:
        raise ValueError(f"{what} {rate} Hz must divide the physics rate {physics_rate:g} Hz")
    return div


class Episode:
    """One simulated run. ``run(on_sample)`` calls ``on_sample(truth, measurement, payload)`` per sample."""

    def __init__(self, cfg: EpisodeConfig):
        self.cfg = cfg
        physics_rate = 1.0 / cfg.timestep
        self.sens_div = rate_divider(physics_rate, cfg.rate, "sensor rate")
        self.ctrl_div = rate_divider(physics_rate, cfg.control_rate, "control rate")
        self.sim = Go1Sim(
            SimConfig(
                cfg.timestep, cfg.armature, cfg.floor_friction, cfg.payload, cfg.losses, cfg.mismatch, cfg.contact
            )
        )
        self.ctrl = Go1Controller(RobotModel(self.sim.robot.spec), gains=ControllerGains())
        self.ctrl.height_offset = cfg.contact.foot_radius - FOOT_RADIUS  # the feet's centres stay NOMINAL_HEIGHT down
        self.sensors = SensorModel(cfg.noise, cfg.seed, cfg.foot_force_scale, dt=1.0 / cfg.rate)
        self.segments = [make_scenario(n, d, self.ctrl.nominal_feet) for n, d in cfg.segments]
        self.n_samples = int(round(cfg.duration * cfg.rate))

    # ------------------------------------------------------------ state helpers
    def pin_state(self) -> tuple[np.ndarray, np.ndarray]:
        """Pinocchio (q (19,), v (18,)) from the MuJoCo state (free-flyer velocity in the local frame)."""
        d = self.sim.data
        q = np.empty(19)
        q[:3] = d.qpos[:3]
        q[3:6] = d.qpos[4:7]
        q[6] = d.qpos[3]
        q[7:] = d.qpos[7:]
        rot = np.empty(9)
        mujoco.mju_quat2Mat(rot, d.qpos[3:7])
        v = np.empty(18)
        v[:3] = rot.reshape(3, 3).T @ d.qvel[:3]
        v[3:] = d.qvel[3:]
        return q, v

    def _set_payload(self, active: bool, t: float, stats: EpisodeStats | None) -> None:
        active = bool(active) and self.cfg.payload.mass > 0.0
        if active == self.sim.payload_active:
            return
        self.sim.set_payload_active(active)
        pay = self.cfg.payload
        known = known_payload_pi(self.cfg.knows, pay.mass, pay.com, pay.inertia) if active else None
        self.ctrl.set_known_payload(known if known is not None else np.zeros(10))
        if stats is not None:
            stats.payload_changes.append((t, self.sim.payload_active))

    def _truth(self, t: float, qpos: np.ndarray, qvel: np.ndarray, tau: np.ndarray, tau_cmd: np.ndarray) -> Truth:
        sim = self.sim
        rot = np.empty(9)
        mujoco.mju_quat2Mat(rot, qpos[3:7])
        forces = sim.foot_normal_forces()
        return Truth(
            t=t,
            q=qpos[7:].copy(),
            dq=qvel[6:].copy(),
            tau=tau.copy(),
            base_pos=qpos[:3].copy(),
            base_quat=qpos[3:7].copy(),
            v_body=rot.reshape(3, 3).T @ qvel[:3],
            w_body=qvel[3:6].copy(),
            imu_quat=sim.sensor("imu_quat"),
            imu_gyro=sim.sensor("imu_gyro"),
            imu_acc=sim.sensor("imu_acc"),
            foot_force=forces,
            contacts=forces > self.cfg.contact_threshold,
            tau_reported=tau_cmd + self.cfg.losses.torque_offset,
        )

    def _control_step(self, ref, contact: np.ndarray, do_update: bool) -> tuple[np.ndarray, np.ndarray]:
        """(applied motor torque, commanded = reported torque before offset) (12,) each, N m."""
        d = self.sim.data
        if do_update:
            q, v = self.pin_state()
            self.ctrl.update(ref, q, v, contact, self.ctrl_div * self.cfg.timestep)
        tau = self.ctrl.torque(d.qpos[7:], d.qvel[6:], self.sim.effort_limit)
        d.ctrl[:] = self.cfg.losses.torque_scale * tau
        return d.ctrl.copy(), tau

    def _yaw(self) -> float:
        w, x, y, z = self.sim.data.qpos[3:7]
        return float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))

    # ------------------------------------------------------------ main loop
    def run(self, on_sample: Callable[[Truth, Measurement, PayloadSpec], None] | None = None) -> EpisodeStats:
        cfg, sim = self.cfg, self.sim
        stats = EpisodeStats()
        first = self.segments[0].payload_active(0.0, cfg.payload_at_start)
        self._set_payload(first and cfg.payload.mass > 0, 0.0, None)
        stats.payload_at_start = self.sim.payload_active
        if not sim.payload_active:  # controller knowledge follows the payload state
            self.ctrl.set_known_payload(np.zeros(10))
        else:
            known = known_payload_pi(cfg.knows, cfg.payload.mass, cfg.payload.com, cfg.payload.inertia)
            self.ctrl.set_known_payload(known if known is not None else np.zeros(10))
        sim.reset(np.array([0.0, 0.0, NOMINAL_HEIGHT + cfg.contact.foot_radius + 0.01]), self.ctrl.q_des)
        stand = make_scenario("stand", max(cfg.settle, 1e-3), self.ctrl.nominal_feet)
        contact = np.ones(4, bool)
        for step in range(int(round(cfg.settle / cfg.timestep))):
            self._control_step(stand.reference(step * cfg.timestep), contact, step % self.ctrl_div == 0)
            mujoco.mj_step(sim.model, sim.data)
            contact = sim.foot_normal_forces() > cfg.contact_threshold
        seg_idx, seg_start = 0, 0.0
        self.ctrl.yaw0 = self._yaw()
        n_steps = self.n_samples * self.sens_div
        for step in range(n_steps):
            t = step * cfg.timestep
            while seg_idx < len(self.segments) - 1 and t >= seg_start + self.segments[seg_idx].duration - 1e-9:
                seg_start += self.segments[seg_idx].duration
                seg_idx += 1
                self.ctrl.yaw0 = self._yaw()
            seg = self.segments[seg_idx]
            ts = t - seg_start
            self._set_payload(seg.payload_active(ts, sim.payload_active), t, stats)
            tau, tau_cmd = self._control_step(seg.reference(ts), contact, step % self.ctrl_div == 0)
            sample = step % self.sens_div == 0
            if sample:
                qpos, qvel = sim.data.qpos.copy(), sim.data.qvel.copy()
            mujoco.mj_step(sim.model, sim.data)
            forces = sim.foot_normal_forces()
            contact = forces > cfg.contact_threshold
            if sample:
                truth = self._truth(t, qpos, qvel, tau, tau_cmd)
                meas = self.sensors.measure(truth)
                stats.n_samples += 1
                stats.min_height = min(stats.min_height, float(qpos[2]))
                stats.max_height = max(stats.max_height, float(qpos[2]))
                if on_sample is not None:
                    on_sample(truth, meas, sim.payload)
        stats.fell = stats.min_height < 0.12
        return stats
