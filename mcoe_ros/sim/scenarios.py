"""Motion scenarios and the Go1 whole-body controller that executes them in MuJoCo.

Scenario = a reference generator: at time t (s, from the segment start) it gives foot targets in the
trunk frame (4, 3) (model foot order FL, FR, RL, RR), the planned stance flags (4,), the desired trunk
height above the floor and roll/pitch/yaw offsets, and a vertical force scale (pronk push-off).
Segments are chained (``squat-sway:6,trot:4``); each starts and ends in the nominal stance.

Controller (:class:`Go1Controller`, runs at ``control_rate``; the motor PD runs at the physics rate):
analytic leg IK of the foot targets gives q_des (dq_des by finite differences); a feed-forward
tau_ff = g_j(q) - sum_i J_i,j^T f_i distributes a desired base wrench (weight + PD on height and
attitude + damping of horizontal velocity) over the feet in stance (min-norm, f_z >= 0, friction cone);
motor torque tau = clip(tau_ff + Kp (q_des - q) + Kd (dq_des - dq), +-effort). The controller's
Pinocchio model is the nominal robot plus what it is told about the payload (``knows``: ``none``,
``mass`` (point mass at the trunk origin, default) or ``full``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.inertia import pi_from_com
from mcoe_ros.multibody.robot import RobotModel

GRAVITY = 9.81
L_THIGH = 0.213
L_CALF = 0.213
HIP_OFFSET_Y = 0.08  #: thigh joint lateral offset from the hip joint (m), + for left legs
FOOT_RADIUS = 0.02
NOMINAL_HEIGHT = 0.28  #: foot-centre depth below the trunk origin in the nominal stance (m)

SCENARIOS: tuple[str, ...] = (
    "stand",
    "squat-sway",
    "trot",
    "trot-forward",
    "walk",
    "pronk",
    "pickup",
    "drop",
)


def _rot_rpy(roll: float, pitch: float, yaw: float) -> np.ndarray:
    return pin.rpy.rpyToMatrix(roll, pitch, yaw)


def leg_ik(foot: np.ndarray, hip: np.ndarray, side: float) -> np.ndarray:
    """Joint angles (hip, thigh, calf) placing the foot centre at ``foot`` (3,) (trunk frame, m).

    ``hip`` (3,) hip joint origin in the trunk frame, ``side`` +1 left / -1 right. Knee-backward solution.
    """
    x, y, z = foot - hip
    d = side * HIP_OFFSET_Y
    r2 = y * y + z * z
    zp = -np.sqrt(max(r2 - d * d, 1e-8))
    q1 = np.arctan2(z, y) - np.arctan2(zp, d)
    rr = x * x + zp * zp
    c3 = np.clip((rr - L_THIGH**2 - L_CALF**2) / (2.0 * L_THIGH * L_CALF), -1.0, 1.0)
    q3 = -np.arccos(c3)
    alpha = np.arctan2(-x, -zp)
    q2 = alpha - np.arctan2(L_CALF * np.sin(q3), L_THIGH + L_CALF * np.cos(q3))
    return np.array([(q1 + np.pi) % (2 * np.pi) - np.pi, q2, q3])


@dataclass
class Reference:
    """Controller reference at one instant (see module docstring)."""

    feet: np.ndarray  #: (4, 3) foot-centre targets in the trunk frame (m)
    stance: np.ndarray  #: (4,) bool, planned contact
    height: float  #: desired trunk-origin height above the floor (m)
    rpy: np.ndarray  #: (3,) desired roll, pitch, yaw offset (rad; yaw relative to the segment start)
    force_scale: float = 1.0  #: multiplies the weight in the desired vertical force


def _smooth_window(t: float, duration: float, ramp: float) -> float:
    """0 -> 1 -> 0 envelope with cosine ramps of ``ramp`` s at both ends."""
    if duration <= 0.0:
        return 0.0
    ramp = min(ramp, 0.5 * duration)
    if t <= 0.0 or t >= duration:
        return 0.0
    a = min(t / ramp, 1.0, (duration - t) / ramp) if ramp > 0 else 1.0
    return 0.5 - 0.5 * np.cos(np.pi * a)


class Scenario:
    """A motion segment of ``duration`` s; :meth:`reference` gives the :class:`Reference` at segment time t."""

    name = "stand"

    def __init__(self, duration: float, nominal_feet: np.ndarray):
        self.duration = float(duration)
        self.nominal = np.array(nominal_feet, dtype=float)

    def reference(self, t: float) -> Reference:
        return Reference(self.nominal.copy(), np.ones(4, bool), NOMINAL_HEIGHT + FOOT_RADIUS, np.zeros(3))

    def payload_active(self, t: float, default: bool) -> bool:
        """Whether the payload is on the robot at segment time t (pick-up/drop scenarios override)."""
        return default


class Stand(Scenario):
    name = "stand"


class PickUp(Scenario):
    """Stand; the payload appears at mid-segment."""

    name = "pickup"

    def payload_active(self, t: float, default: bool) -> bool:
        return t >= 0.5 * self.duration


class Drop(Scenario):
    """Stand; the payload disappears at mid-segment."""

    name = "drop"

    def payload_active(self, t: float, default: bool) -> bool:
        return t < 0.5 * self.duration


class SquatSway(Scenario):
    """All feet fixed on the ground; trunk moves in 6 DoF with incommensurate sinusoids."""

    name = "squat-sway"
    #: (amplitude, frequency Hz) for x, y, z (m) and roll, pitch, yaw (rad)
    AMPS = np.array([0.03, 0.04, 0.04, 0.15, 0.15, 0.2])
    FREQS = np.array([0.53, 0.41, 0.67, 0.47, 0.61, 0.37])
    PHASES = np.array([0.0, 1.3, 0.0, 2.1, 0.7, 4.0])

    def reference(self, t: float) -> Reference:
        env = _smooth_window(t, self.duration, 1.0)
        w = 2 * np.pi * self.FREQS
        off = env * self.AMPS * (np.sin(w * t + self.PHASES) - np.sin(self.PHASES))
        off[2] = -env * self.AMPS[2] * np.sin(w[2] * t)  # squat down first
        rot = _rot_rpy(*off[3:])
        base = np.array([off[0], off[1], NOMINAL_HEIGHT + off[2]])
        world_feet = self.nominal + np.array([0.0, 0.0, NOMINAL_HEIGHT])
        feet = (world_feet - base) @ rot  # R^T (p_f - p_b) row-wise
        return Reference(feet, np.ones(4, bool), NOMINAL_HEIGHT + FOOT_RADIUS + off[2], off[3:].copy())


class Gait(Scenario):
    """Periodic gait with feet trajectories in the trunk frame; ``offsets`` are swing-phase starts per foot."""

    name = "trot"
    period = 0.4
    duty = 0.5
    offsets = np.array([0.0, 0.5, 0.5, 0.0])  # FL, FR, RL, RR
    apex = 0.07
    speed = 0.0
    sway = 0.0

    def _cycles(self) -> int:
        return max(int((self.duration - 0.3) // self.period), 0)

    def reference(self, t: float) -> Reference:
        ncyc = self._cycles()
        t0 = 0.15
        feet = self.nominal.copy()
        stance = np.ones(4, bool)
        tg = t - t0
        if tg < 0.0 or tg >= ncyc * self.period:
            return Reference(feet, stance, NOMINAL_HEIGHT + FOOT_RADIUS, np.zeros(3))
        gait_len = ncyc * self.period
        vel = self.speed * _smooth_window(tg, gait_len, min(1.0, 0.3 * gait_len))
        stride = vel * self.period * self.duty
        phase = (tg / self.period) % 1.0
        swing_frac = 1.0 - self.duty
        for i in range(4):
            s = (phase - self.offsets[i]) % 1.0
            if s < swing_frac:
                u = s / swing_frac
                stance[i] = False
                feet[i, 0] += stride * (-0.5 + (u - np.sin(2 * np.pi * u) / (2 * np.pi)))
                feet[i, 2] += self.apex * 0.5 * (1 - np.cos(2 * np.pi * u))
            else:
                u = (s - swing_frac) / self.duty
                feet[i, 0] += stride * (0.5 - u)
        if self.sway:
            feet[:, 1] -= self.sway * np.sin(2 * np.pi * phase) * _smooth_window(tg, gait_len, self.period)
        return Reference(feet, stance, NOMINAL_HEIGHT + FOOT_RADIUS, np.zeros(3))


class Trot(Gait):
    name = "trot"


class TrotForward(Gait):
    name = "trot-forward"
    speed = 0.3


class Walk(Gait):
    """Static walk (duty 0.75, order RR, FR, RL, FL) with a lateral trunk sway towards the support legs."""

    name = "walk"
    period = 1.2
    duty = 0.8
    offsets = np.array([0.75, 0.25, 0.5, 0.0])
    apex = 0.06
    speed = 0.1
    sway = 0.035


class Pronk(Scenario):
    """Repeated vertical jumps on all four legs: crouch, fast push-off, flight, landing."""

    name = "pronk"
    period = 0.8
    crouch = 0.06
    push = 0.05
    push_time = 0.14
    push_force = 1.4  #: desired vertical force during push-off, in units of the weight

    def reference(self, t: float) -> Reference:
        ncyc = max(int((self.duration - 1.0) // self.period), 0)  # >= 0.8 s recovery at the end
        h = NOMINAL_HEIGHT + FOOT_RADIUS
        tg = t - 0.2
        feet = self.nominal.copy()
        if tg < 0.0 or tg >= ncyc * self.period:
            return Reference(feet, np.ones(4, bool), h, np.zeros(3))
        s = tg % self.period
        t_crouch = 0.3
        scale = 1.0
        stance = np.ones(4, bool)
        if s < t_crouch:  # lower
            dz = self.crouch * (0.5 - 0.5 * np.cos(np.pi * s / t_crouch))
        elif s < t_crouch + self.push_time:  # push: extend quickly
            u = (s - t_crouch) / self.push_time
            dz = self.crouch - (self.crouch + self.push) * (0.5 - 0.5 * np.cos(np.pi * u))
            scale = self.push_force
        elif s < t_crouch + self.push_time + 0.1:  # flight: retract to nominal
            u = (s - t_crouch - self.push_time) / 0.1
            dz = -self.push * (1 - u)
            stance[:] = False
        else:  # landing and recovery at nominal
            dz = 0.0
        feet[:, 2] += dz
        return Reference(feet, stance, h - max(dz, 0.0), np.zeros(3), scale)


_CLASSES = {c.name: c for c in (Stand, SquatSway, Trot, TrotForward, Walk, Pronk, PickUp, Drop)}


def make_scenario(name: str, duration: float, nominal_feet: np.ndarray) -> Scenario:
    """Scenario instance by name (one of :data:`SCENARIOS`)."""
    if name not in _CLASSES:
        raise ValueError(f"unknown scenario '{name}' (choose from {', '.join(SCENARIOS)})")
    if duration <= 0:
        raise ValueError(f"scenario '{name}': duration must be > 0, got {duration}")
    return _CLASSES[name](duration, nominal_feet)


@dataclass
class ControllerGains:
    """Joint PD (N m/rad, N m s/rad), base wrench PD (N/m, N s/m, N m/rad, N m s/rad), friction mu."""

    kp: float = 60.0
    kd: float = 1.5
    kp_z: float = 400.0
    kd_z: float = 40.0
    kd_xy: float = 30.0
    kp_rot: float = 150.0
    kd_rot: float = 8.0
    mu: float = 0.6


class Go1Controller:
    """Whole-body PD + feed-forward controller (see module docstring). Model joint/foot order."""

    def __init__(
        self,
        robot: RobotModel,
        payload_pi: np.ndarray | None = None,
        gains: ControllerGains | None = None,
    ):
        self.robot = robot
        self.gains = gains or ControllerGains()
        #: added to the references' trunk height (m): the simulated foot radius minus :data:`FOOT_RADIUS`
        self.height_offset = 0.0
        if payload_pi is not None:
            robot.set_payload(payload_pi)
        self.model = robot.model
        self.data = self.model.createData()
        self.mass = float(pin.computeTotalMass(self.model))
        self.hips = np.array([self.model.jointPlacements[2 + 3 * i].translation for i in range(4)])
        self.sides = np.sign(self.hips[:, 1])
        self.nominal_feet = self.hips + np.outer(self.sides, [0.0, HIP_OFFSET_Y, 0.0]) - [0.0, 0.0, NOMINAL_HEIGHT]
        self.q_des = self.ik(self.nominal_feet)
        self.dq_des = np.zeros(12)
        self.tau_ff = np.zeros(12)
        self.yaw0 = 0.0

    def set_known_payload(self, payload_pi: np.ndarray) -> None:
        self.robot.set_payload(payload_pi)
        self.mass = float(pin.computeTotalMass(self.model))

    def ik(self, feet: np.ndarray) -> np.ndarray:
        """Joint angles (12, model order) for foot targets (4, 3) in the trunk frame."""
        return np.concatenate([leg_ik(feet[i], self.hips[i], self.sides[i]) for i in range(4)])

    def update(self, ref: Reference, q_pin: np.ndarray, v_pin: np.ndarray, contact: np.ndarray, dt: float) -> None:
        """Compute q_des, dq_des, tau_ff from the reference and the state (Pinocchio q (19,), v (18,), local)."""
        g = self.gains
        q_des = self.ik(ref.feet)
        q_des = np.clip(q_des, self.model.lowerPositionLimit[7:], self.model.upperPositionLimit[7:])
        self.dq_des = (q_des - self.q_des) / dt
        self.q_des = q_des
        model, data = self.model, self.data
        pin.computeGeneralizedGravity(model, data, q_pin)
        grav = data.g.copy()
        pin.computeJointJacobians(model, data, q_pin)
        pin.updateFramePlacements(model, data)
        com = pin.centerOfMass(model, data, q_pin, False)
        rot = pin.Quaternion(q_pin[6], q_pin[3], q_pin[4], q_pin[5]).toRotationMatrix()
        v_world = rot @ v_pin[:3]
        w_world = rot @ v_pin[3:6]
        legs = [i for i in range(4) if ref.stance[i] and contact[i]]
        if not legs:
            self.tau_ff = grav[6:].copy()
            return
        force = np.array([-g.kd_xy * v_world[0], -g.kd_xy * v_world[1], 0.0])
        force[2] = self.mass * GRAVITY * ref.force_scale
        force[2] += g.kp_z * (ref.height + self.height_offset - q_pin[2]) - g.kd_z * v_world[2]
        r_des = _rot_rpy(ref.rpy[0], ref.rpy[1], self.yaw0 + ref.rpy[2])
        err = pin.log3(r_des @ rot.T)
        torque = g.kp_rot * err - g.kd_rot * w_world
        nc = len(legs)
        amat = np.zeros((6, 3 * nc))
        jacs = []
        for k, i in enumerate(legs):
            fid = self.robot.foot_frame_ids[i]
            p = data.oMf[fid].translation - com
            amat[:3, 3 * k : 3 * k + 3] = np.eye(3)
            amat[3:, 3 * k : 3 * k + 3] = pin.skew(p)
            jacs.append(pin.getFrameJacobian(model, data, fid, pin.LOCAL_WORLD_ALIGNED)[:3])
        wrench = np.concatenate([force, torque])
        # weighted min-norm: penalise tangential forces more than normal ones
        wdiag = np.tile([3.0, 3.0, 1.0], nc)
        a_w = amat / wdiag
        f = (np.linalg.lstsq(a_w @ a_w.T + 1e-6 * np.eye(6), wrench, rcond=None)[0] @ a_w) / wdiag
        f = f.reshape(nc, 3)
        f[:, 2] = np.maximum(f[:, 2], 0.0)
        tang = np.linalg.norm(f[:, :2], axis=1)
        lim = g.mu * f[:, 2]
        scale = np.where(tang > lim, lim / np.maximum(tang, 1e-9), 1.0)
        f[:, :2] *= scale[:, None]
        tau = grav[6:].copy()
        for k in range(nc):
            tau -= jacs[k][:, 6:].T @ f[k]
        self.tau_ff = tau

    def torque(self, q: np.ndarray, dq: np.ndarray, effort: np.ndarray) -> np.ndarray:
        """Motor torques (12,) from measured joint q, dq (model order), clipped to +-effort."""
        g = self.gains
        tau = self.tau_ff + g.kp * (self.q_des - q) + g.kd * (self.dq_des - dq)
        return np.clip(tau, -effort, effort)


def known_payload_pi(knows: str, mass: float, com: np.ndarray, inertia: np.ndarray) -> np.ndarray | None:
    """Payload parameters (10,) the controller is told: ``none``, ``mass`` (point mass at trunk origin), ``full``."""
    if knows == "none" or mass <= 0.0:
        return None
    if knows == "mass":
        return pi_from_com(mass, np.zeros(3), np.zeros((3, 3)))
    if knows == "full":
        return pi_from_com(mass, com, inertia)
    raise ValueError(f"controller payload knowledge must be none, mass or full, got '{knows}'")
