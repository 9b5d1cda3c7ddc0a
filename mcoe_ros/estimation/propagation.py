"""Input-rate odometry between solves: the newest solved state propagated through every newer sensor sample.

The sliding-window solve is slow (hundreds of ms in Python) and its newest node is already old when it finishes; an
MPC wants the base state at the sensor rate with a millisecond of latency. The :class:`Propagator` keeps a *track*
anchored at the newest node of the last good solve and advances it by one step per raw IMU sample (not per 2 ms grid
knot: a knot waits for the next sample of both streams, so per-sample output is one sample earlier and its stamp is
the input's own). When a solve finishes, a new track is anchored at its newest node and re-run through the samples
buffered since that node (the output never waits for a solve); the jump between the old and the new track at the
newest sample is the *correction* (reported, m).

Step (the IMU + leg-kinematics filter of :class:`mcoe_ros.estimation.leg_odometry.LegKinematicsEkf`, on the solve's
state and with its biases; preferred to the estimator's own contact-dynamics process model for its cost, and its
variants compared by measurement in ``docs/tworate.md``): orientation from the solve's, integrated with the gyro, R
<- R exp(w dt) (or, with ``integrate_gyro=False``, R = R_off R_WB^imu(t) with R_off = R_WB^solve (R_WB^imu(t_N))^T
fixed at the anchor: the IMU's own orientation relative to the anchor, noisier); the base velocity v (world) and
position p follow the accelerometer (a = R (f - b_a) + g with lever-arm terms), and v is updated with the mean
kinematic base velocity of the stance feet (contact flags of the newest grid knot: the estimator's own detector)
with variance foot_velocity^2 / n_stance. State (p, v) with covariance P (6x6, world axes); the orientation
covariance grows by (gyro std dt)^2 per step. At the anchor P is the solve's marginal covariance of the newest node
(pose rotated to odom axes, twist rotated from base to odom axes), so the published covariance grows between solves
and drops back to the solve's at every re-anchoring.

Threading (the ROS node): :meth:`Propagator.step` runs in the sensor callback under the sample lock (about 0.1 ms
of CPU); a re-anchoring is split into :meth:`Propagator.begin` (under the lock: snapshot of the buffered
samples, O(their number) references), :meth:`Rebase.run` (outside the lock, the expensive part; the node runs it as
:meth:`Rebase.run_some` in bounded chunks from the sensor callback instead) and :meth:`Propagator.finish` (under the
lock: the few samples that arrived meanwhile, then the swap).
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from mcoe_ros.estimation.estimate import Estimate
from mcoe_ros.estimation.samples import ImuSample, JointSample
from mcoe_ros.multibody.imu import GRAVITY, base_motion, cross, imu_mount, rotation_quaternion
from mcoe_ros.multibody.robot import RobotModel

SOURCES = ("solve", "propagated")
HISTORY = 2000  #: track states kept for :meth:`Propagator.states_at` (4 s of 500 Hz samples)
STALE_TOLERANCE = 0.01  #: s; a solve's node may precede the oldest buffered sample by this much
MAX_STEP = 0.5  #: s; a longer silence of the input ends the track (no output until the next solve)


@dataclass
class Odometry:
    """The base state at one input sample (what odom, pose and TF carry at input rate).

    Frames as :class:`mcoe_ros.estimation.estimate.Estimate`: position/orientation of the base in the odom frame,
    body twist; pose_cov over (x, y, z, rot_x, rot_y, rot_z) and twist_cov over (v, w), 6x6, odom/base axes as there.
    """

    t: float  #: sensor time of the input sample, s
    position: np.ndarray  #: (3,) m
    quat_xyzw: np.ndarray  #: (4,)
    linear_velocity: np.ndarray  #: (3,) m/s, base frame
    angular_velocity: np.ndarray  #: (3,) rad/s, base frame
    pose_cov: np.ndarray  #: (6, 6)
    twist_cov: np.ndarray  #: (6, 6)
    source: str = "propagated"  #: "solve" (the solve's node itself) or "propagated"
    correction: float = 0.0  #: m, position jump at the newest sample of the last re-anchoring
    age: float = 0.0  #: s, time since the anchoring solve's newest node

    def is_finite(self) -> bool:
        arrays = (self.position, self.quat_xyzw, self.linear_velocity, self.angular_velocity)
        return all(bool(np.all(np.isfinite(a))) for a in (*arrays, self.pose_cov, self.twist_cov))


@dataclass
class Entry:
    """One buffered input sample: IMU, the newest joint sample, the newest grid knot's contact flags."""

    seq: int
    t: float
    imu: ImuSample
    joint: JointSample
    contacts: tuple[bool, ...]


@dataclass
class Track:
    """The propagated state since one anchor (see module docstring); times are the estimator's local times."""

    t: float
    t_anchor: float
    p: np.ndarray  #: (3,) world
    v: np.ndarray  #: (3,) world
    cov: np.ndarray  #: (6, 6) over (p, v), world axes
    rot_cov: np.ndarray  #: (3, 3) orientation, odom axes
    r_off: np.ndarray  #: (3, 3) R_WB = r_off @ R_WB^imu
    rot: np.ndarray  #: (3, 3) R_WB at t
    omega: np.ndarray  #: (3,) base frame
    gyro_bias: np.ndarray  #: (3,) IMU frame
    acc_bias: np.ndarray  #: (3,) IMU frame
    last_seq: int = -1
    steps: int = 0
    #: (t, p, v) at the anchor and after every step (bounded): state guesses for a rebuilt window
    history: deque = field(default_factory=lambda: deque(maxlen=HISTORY))


class Propagator:
    """Keeps the newest solved state and advances it per input sample (see module docstring).

    robot: the estimator's robot; accel_std (m/s^2), gyro_std (rad/s), foot_velocity_std (m/s): the estimator's
    noise levels; horizon: seconds of samples kept for re-anchoring (older ones cannot be anchored to anyway);
    use_accelerometer / use_legs / integrate_gyro: switch the accelerometer prediction (then constant velocity), the
    stance-foot update or the gyro integration (then the IMU orientation) off (ablations,
    ``benchmarks/bench_propagation.py``).
    """

    def __init__(
        self,
        robot: RobotModel,
        accel_std: float = 0.3,
        gyro_std: float = 0.02,
        foot_velocity_std: float = 0.02,
        horizon: float = 5.0,
        use_accelerometer: bool = True,
        use_legs: bool = True,
        integrate_gyro: bool = True,
    ):
        self.robot = robot
        self.mount = imu_mount(robot)
        self.accel_var = accel_std**2
        self.gyro_var = gyro_std**2
        self.foot_var = foot_velocity_std**2
        self.horizon = horizon
        self.use_accelerometer, self.use_legs, self.integrate_gyro = use_accelerometer, use_legs, integrate_gyro
        self.entries: deque[Entry] = deque()
        self.track: Track | None = None
        self.correction = 0.0  #: m, of the last re-anchoring
        self.corrections: list[float] = []  #: every re-anchoring's correction, m
        self._seq = 0
        self.resets = 0  #: silences that ended the track (a re-anchoring begun before one is dropped)
        self.scratch = Scratch(robot)  #: of the sample thread (push, finish)
        self.rebase_scratch = Scratch(robot)  #: of Rebase.run (the solve thread; one rebase at a time)

    # ---------------------------------------------------------------- samples
    def push(self, t: float, imu: ImuSample, joint: JointSample, contacts: tuple[bool, ...]) -> Entry:
        """Buffer one input sample (local time t s) and step the track through it (if anchored)."""
        entry = Entry(self._seq, t, imu, joint, tuple(contacts))
        self._seq += 1
        if self.entries and t - self.entries[-1].t > MAX_STEP:
            self.reset()
        self.entries.append(entry)
        while self.entries and self.entries[0].t < t - self.horizon:
            self.entries.popleft()
        if self.track is not None:
            self.step(self.track, entry, self.scratch)
        return entry

    @property
    def last_t(self) -> float:
        return self.entries[-1].t if self.entries else -np.inf

    def reset(self) -> None:
        """Forget everything (an input silence longer than :data:`MAX_STEP`)."""
        self.entries.clear()
        self.track = None
        self.resets += 1

    # ---------------------------------------------------------------- the step
    def step(self, track: Track, entry: Entry, scratch: Scratch) -> None:
        """Advance ``track`` to the entry's time with its IMU sample, then update with its stance feet (``scratch``:
        the calling thread's own)."""
        dt = entry.t - track.t
        track.last_seq = entry.seq
        if dt <= 0.0:
            return
        imu = entry.imu
        base = base_motion(self.mount, imu.quat, imu.gyro - track.gyro_bias, imu.acc - track.acc_bias)
        if self.integrate_gyro:
            rot = track.rot @ pin.exp3(base.omega * dt)
        else:
            rot = track.r_off @ base.rotation
        # specific force in world axes with this orientation, plus gravity (base.acc holds the IMU's own tilt)
        acc = rot @ (base.acc - base.rotation.T @ GRAVITY) + GRAVITY if self.use_accelerometer else np.zeros(3)
        p, v = track.p, track.v
        track.p = p + v * dt + (0.5 * dt * dt) * acc
        track.v = v + acc * dt
        # P <- F P F^T + G (accel_var I) G^T with F = [[1, dt], [0, 1]] blockwise, G = [dt^2/2, dt] (rotation-free:
        # the accelerometer noise is isotropic)
        f, noise, i, j = scratch.f, scratch.noise, scratch.i3, scratch.i3 + 3
        f[0, 3] = f[1, 4] = f[2, 5] = dt
        q = self.accel_var
        noise[i, i] = 0.25 * dt**4 * q
        noise[i, j] = noise[j, i] = 0.5 * dt**3 * q
        noise[j, j] = dt * dt * q
        track.cov = f @ track.cov @ f.T + noise
        track.rot_cov = track.rot_cov + (self.gyro_var * dt * dt) * scratch.eye3
        track.rot, track.omega, track.t = rot, base.omega, entry.t
        self._update_feet(track, entry, base.omega, scratch)
        track.steps += 1
        track.history.append((entry.t, track.p, track.v))

    def _update_feet(self, track: Track, entry: Entry, omega: np.ndarray, scratch: Scratch) -> None:
        """Kalman update of v with the mean base velocity implied by the stance feet (still feet):
        v = -R_WB (v_f + w x p_f) averaged over the n stance feet, variance foot_velocity^2 / n."""
        n = sum(entry.contacts)
        if n == 0 or not self.use_legs:
            return
        robot, data = self.robot, scratch.data
        q, v = scratch.q, scratch.v
        q[7:] = entry.joint.q
        v[6:] = entry.joint.dq
        pin.forwardKinematics(robot.model, data, q, v)
        pin.updateFramePlacements(robot.model, data)
        vel = np.zeros(3)
        pos = np.zeros(3)
        for fid, c in zip(robot.foot_frame_ids, entry.contacts, strict=True):
            if c:
                pos += data.oMf[fid].translation
                vel += pin.getFrameVelocity(robot.model, data, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED).linear
        v_meas = track.rot @ (-(vel + cross(omega, pos)) / n)
        cov = track.cov
        gain = cov[:, 3:] @ np.linalg.inv(cov[3:, 3:] + (self.foot_var / n) * scratch.eye3)  # P H^T S^-1, H = [0, 1]
        innovation = gain @ (v_meas - track.v)
        track.p, track.v = track.p + innovation[:3], track.v + innovation[3:]
        cov = cov - gain @ cov[3:, :]
        track.cov = 0.5 * (cov + cov.T)

    # ---------------------------------------------------------------- anchoring
    def anchor(self, est: Estimate, anchor_imu: ImuSample, t_local: float) -> Track:
        """A new track at a solve's newest node (local time ``t_local``; ``anchor_imu`` the node's IMU sample)."""
        gyro_bias = acc_bias = np.zeros(3)
        if est.imu_bias is not None:
            gyro_bias, acc_bias = est.imu_bias[0][:3].copy(), est.imu_bias[0][3:6].copy()
        q = est.quat_xyzw
        rot = pin.Quaternion(q[3], q[0], q[1], q[2]).toRotationMatrix()
        base = base_motion(self.mount, anchor_imu.quat, anchor_imu.gyro - gyro_bias)
        cov = np.zeros((6, 6))
        cov[:3, :3] = est.pose_cov[:3, :3]
        cov[3:, 3:] = rot @ est.twist_cov[:3, :3] @ rot.T
        track = Track(
            t=t_local,
            t_anchor=t_local,
            p=est.position.copy(),
            v=rot @ est.linear_velocity,
            cov=cov,
            rot_cov=est.pose_cov[3:, 3:].copy(),
            r_off=rot @ base.rotation.T,
            rot=rot,
            omega=est.angular_velocity.copy(),
            gyro_bias=gyro_bias,
            acc_bias=acc_bias,
        )
        track.history.append((t_local, track.p, track.v))
        return track

    def begin(self, est: Estimate, anchor_imu: ImuSample, t_local: float) -> Rebase | None:
        """Start re-anchoring at a solve (call under the sample lock; cheap): the new track and its samples. None if
        the solve's node is older than the buffered samples (a solve slower than ``horizon``: too stale to use)."""
        if self.entries and self.entries[0].t > t_local + STALE_TOLERANCE:
            return None
        track = self.anchor(est, anchor_imu, t_local)
        return Rebase(self, track, self._tail(lambda entry: entry.t <= t_local), resets=self.resets)

    def newer_than(self, seq: int) -> list[Entry]:
        """The buffered samples after sample number ``seq`` (under the sample lock; cheap)."""
        return self._tail(lambda entry: entry.seq <= seq)

    def _tail(self, is_old) -> list[Entry]:
        """The buffered samples newer than the newest one for which ``is_old(entry)`` holds, oldest first."""
        newer = []
        for entry in reversed(self.entries):
            if is_old(entry):
                break
            newer.append(entry)
        newer.reverse()
        return newer

    def finish(self, rebase: Rebase) -> float:
        """Catch the re-anchored track up with the samples that arrived since :meth:`begin` and make it the
        current one (call under the sample lock). Returns the correction (m): how far the output jumped."""
        track = rebase.track
        if rebase.resets != self.resets:  # begun before an input silence ended the track: stale
            return 0.0
        for entry in self.entries:
            if entry.seq > track.last_seq and entry.t > track.t:
                self.step(track, entry, self.scratch)
        old = self.track
        correction = 0.0
        if old is not None and abs(old.t - track.t) < self.horizon:
            # the old track at the new one's time (they differ by at most a sample when the solve's node is newer
            # than the last propagated sample)
            correction = float(np.linalg.norm(old.p + old.v * (track.t - old.t) - track.p))
        self.track = track
        self.correction = correction
        self.corrections.append(correction)
        return correction

    def states_at(self, times: list[float]) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """(p, v) world of the current track at its newest step at or before each local time (ascending times), or
        None if the track does not reach back to times[0]. Safe from another thread (one atomic snapshot)."""
        track = self.track
        if track is None:
            return None
        hist = list(track.history)  # atomic under the GIL: the sensor thread may append meanwhile
        if not hist or hist[0][0] > times[0] + 1e-9:
            return None
        stamps = [h[0] for h in hist]
        out = []
        for t in times:
            i = bisect.bisect_right(stamps, t + 1e-9) - 1
            out.append(hist[i][1:])
        return out

    # ---------------------------------------------------------------- output
    def output(self, epoch: float = 0.0) -> Odometry | None:
        """The current track's state as :class:`Odometry` (None before the first solve)."""
        track = self.track
        if track is None:
            return None
        rot = track.rot
        quat = rotation_quaternion(rot).coeffs().copy()  # x, y, z, w
        pose_cov = np.zeros((6, 6))
        pose_cov[:3, :3] = track.cov[:3, :3]
        pose_cov[3:, 3:] = track.rot_cov
        twist_cov = np.zeros((6, 6))
        twist_cov[:3, :3] = rot.T @ track.cov[3:, 3:] @ rot
        twist_cov[3:, 3:] = self.gyro_var * np.eye(3)
        return Odometry(
            t=track.t + epoch,
            position=track.p.copy(),
            quat_xyzw=quat,
            linear_velocity=rot.T @ track.v,
            angular_velocity=track.omega.copy(),
            pose_cov=pose_cov,
            twist_cov=twist_cov,
            source="solve" if track.steps == 0 else "propagated",
            correction=self.correction,
            age=track.t - track.t_anchor,
        )


@dataclass
class Rebase:
    """A re-anchoring in progress: :meth:`run` steps the new track through the snapshot (outside any lock)."""

    propagator: Propagator
    track: Track
    entries: list[Entry]
    done: int = 0  #: snapshot entries stepped by :meth:`run_some`
    resets: int = 0  #: the propagator's resets at :meth:`Propagator.begin`

    def run(self, entries: list[Entry] | None = None) -> None:
        """Step the new track through the snapshot (or through ``entries``, e.g. a later
        :meth:`Propagator.newer_than`, to shorten what :meth:`Propagator.finish` does under the lock)."""
        prop = self.propagator
        for entry in self.entries if entries is None else entries:
            if entry.seq > self.track.last_seq:
                prop.step(self.track, entry, prop.rebase_scratch)

    def run_some(self, n: int) -> bool:
        """Step at most ``n`` samples: the snapshot's first, then the ones buffered since (the node's sensor thread,
        under the sample lock, after each message: the re-propagation in bounded chunks that do not compete for the
        GIL with a solve thread). True when caught up (then :meth:`Propagator.finish` has nothing left to step)."""
        prop, track = self.propagator, self.track
        if self.resets != prop.resets:  # the track ended meanwhile: finish drops this re-anchoring
            return True
        todo = self.entries[self.done : self.done + n]
        self.done += len(todo)
        if len(todo) < n:  # the snapshot is done: the samples that arrived since
            seq, t = (todo[-1].seq, todo[-1].t) if todo else (track.last_seq, track.t)
            todo += prop._tail(lambda entry: entry.seq <= seq or entry.t <= t)
        for entry in todo[:n]:
            prop.step(track, entry, prop.scratch)
        return self.done >= len(self.entries) and len(todo) <= n


class Scratch:
    """Per-thread work arrays of a step: Pinocchio data (legs at a base at the identity), transition and noise."""

    def __init__(self, robot: RobotModel):
        self.data = robot.create_data()
        self.q = robot.neutral()  # base at the identity: forward kinematics gives the feet in the base frame
        self.v = np.zeros(robot.nv)
        self.f = np.eye(6)
        self.noise = np.zeros((6, 6))
        self.i3 = np.arange(3)
        self.eye3 = np.eye(3)
