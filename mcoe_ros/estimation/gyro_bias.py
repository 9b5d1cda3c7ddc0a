"""The gyro's bias learnt from the IMU's own orientation reading (``imu_bias.attitude_tracking``).

A legged robot's IMU reports a quaternion from its own attitude filter, run on the same gyro and accelerometer: its
roll and pitch are held to gravity by the accelerometer, so their error stays bounded (the accelerometer bias's tilt
plus fluctuations of ~1–12 mrad correlated over 0.15–0.5 s on the realism suite, docs/realism.md session 25), while
the gyro integrated alone drifts at its bias. Over T seconds the two differ by b T + (bounded error): the reading's
long-term tilt carries the horizontal gyro bias (what the attitude filter's integral term learns), with no leg, contact
or floor model in it. The window of the optimal estimator is too short to see it (b T ≈ 5 mrad in 0.2 s against its
white orientation weight), and the bias estimated in the window is pulled by the contact model's own errors (a soft
floor's sinking feet, the trot's landings: docs/realism.md session 26).

:class:`GyroBiasTracker` is a 6-state error-state Kalman filter at a decimated rate:

* state: the gyro-integrated attitude R̂ (IMU frame to world, propagated with ω − b̂ at every sample) and b̂ (3,)
  rad/s (IMU frame); error δθ (world-frame small rotation, R = exp(δθ) R̂) and δb = b − b̂;
* propagation over Δ: δθ ← δθ − G δb with G = Σ R̂ dt, process noise σ_g² Δ (the gyro's white noise) on δθ and
  σ_w² Δ (the bias random walk) on δb;
* every ``interval`` s (no shorter than the reading's error correlation time, so the updates' errors are about
  independent): the reading R_r's tilt, z = (log(R_r R̂ᵀ))_xy (world x, y) with std σ_m (``error``). The reading's
  yaw is not measured (it is its own gyro integral, drifting at the vertical bias);
* the vertical bias from the settled stance feet (:class:`StanceYaw`, ``imu_bias.stance_yaw``; :meth:`fuse_rate`):
  the feet's turn in the IMU frame against the integrated gyro over intervals of at most ``interval``; its
  correlation with δθ corrects R̂'s yaw too, so R̂'s heading replaces the reading's (:meth:`heading_offset`).

Its covariance's bias block is the uncertainty the consider analysis then adds for the gyro (the estimator's
``imu_bias.consider``), so the published covariances follow what the tracker has learnt. A constant tilt offset of
the reading moves δθ, not b̂ (it does not grow with time).
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from mcoe_ros.estimation.window import GridKnot
from mcoe_ros.multibody.imu import imu_mount
from mcoe_ros.multibody.robot import RobotModel


def _heading(rot: np.ndarray) -> float:
    """rad: the azimuth of a rotation's (3, 3) x axis in the world (its yaw for a level body)."""
    return math.atan2(rot[1, 0], rot[0, 0])


class GyroBiasTracker:
    """Gyro bias b̂ (3,) rad/s, IMU frame, and its covariance (3, 3) from the gyro and the orientation reading.

    prior_std: rad/s per axis (the initial bias spread); random_walk: rad/s/√s; gyro_noise: the gyro's white-noise
    density, rad/√s; error: rad, the reading's tilt error per update; interval: s between updates; max_gap: s, a
    longer gap between two samples restarts the attitude from the reading (b̂ and its covariance, grown by the random
    walk over the gap, are kept).
    """

    def __init__(
        self,
        prior_std: float,
        random_walk: float,
        gyro_noise: float,
        error: float,
        interval: float,
        max_gap: float = 0.1,
    ) -> None:
        if min(prior_std, error, interval) <= 0.0 or min(random_walk, gyro_noise) < 0.0:
            raise ValueError("need prior_std, error, interval > 0 and random_walk, gyro_noise >= 0")
        self.prior_std, self.random_walk, self.gyro_noise = float(prior_std), float(random_walk), float(gyro_noise)
        self.error, self.interval, self.max_gap = float(error), float(interval), float(max_gap)
        self.bias = np.zeros(3)  #: b̂ (3,) rad/s, IMU frame
        self.cov = np.zeros((6, 6))  #: covariance of (δθ world rad, δb rad/s)
        self.updates = 0  #: reading updates so far
        self.rate_updates = 0  #: bias-rate measurements fused (:meth:`fuse_rate`)
        self.rejected = 0  #: bias-rate measurements rejected by the gate
        self._rot = None  #: R̂ (3, 3), IMU frame to world; None before the first sample
        self._reading = np.eye(3)  #: the newest reading (3, 3)
        self._gain = np.zeros((3, 3))  #: G = Σ R̂ dt since the last update
        self._t = 0.0  #: time of the last sample, s
        self._since = 0.0  #: s since the last tilt update
        self._elapsed = 0.0  #: s since the covariance was last propagated
        self._h = np.zeros((2, 6))
        self._h[0, 0] = self._h[1, 1] = 1.0
        self._started = False  #: the bias covariance holds a prior

    @property
    def last_t(self) -> float | None:
        """Time of the newest sample, s; None before the first."""
        return None if self._rot is None else self._t

    @property
    def attitude(self) -> np.ndarray | None:
        """R̂ (3, 3), IMU frame to world, at the newest sample; None before the first."""
        return self._rot

    def heading_offset(self, rot: np.ndarray) -> float:
        """rad in [−π, π]: R̂'s heading (its x axis's azimuth in the world) minus that of ``rot`` (3, 3), IMU frame to
        world; 0 before the first sample."""
        if self._rot is None:
            return 0.0
        return math.remainder(_heading(self._rot) - _heading(rot), 2.0 * math.pi)

    @property
    def variance(self) -> np.ndarray:
        """(3,) variances of b̂, (rad/s)²."""
        return np.diag(self.cov)[3:].copy()

    def add(self, t: float, rot: np.ndarray, gyro: np.ndarray) -> None:
        """One IMU sample: time s, the reading R_r (3, 3) IMU frame to world, the gyro (3,) rad/s (IMU frame)."""
        t = float(t)
        dt = t - self._t
        if self._rot is None or dt > self.max_gap or dt < 0.0:
            # a gap: the attitude restarts from the reading, turned by the heading offset learnt so far
            offset = 0.0 if self._rot is None else self.heading_offset(self._reading)
            bias_cov = self.cov[3:, 3:].copy()
            self.cov[:] = 0.0
            self.cov[:3, :3] = np.eye(3) * self.error**2
            if self._started:  # a gap: the bias kept, its random walk over the gap added
                self.cov[3:, 3:] = bias_cov + np.eye(3) * self.random_walk**2 * max(dt, 0.0)
            else:
                self.cov[3:, 3:] = np.eye(3) * self.prior_std**2
            self._started = True
            self._rot = pin.exp3(np.array([0.0, 0.0, offset])) @ np.asarray(rot, dtype=float)
            self._reading = np.array(rot, dtype=float)
            self._gain[:] = 0.0
            self._t, self._since, self._elapsed = t, 0.0, 0.0
            return
        self._t = t
        self._reading = rot
        if dt == 0.0:
            return
        self._gain += self._rot * dt
        self._rot = self._rot @ pin.exp3((np.asarray(gyro, dtype=float) - self.bias) * dt)
        self._since += dt
        self._elapsed += dt
        if self._since >= self.interval:
            self._update(rot)

    def _propagate(self) -> np.ndarray:
        """The covariance propagated over the samples since the last update (returned; the gain restarts)."""
        f = np.eye(6)
        f[:3, 3:] = -self._gain
        cov = f @ self.cov @ f.T
        cov[:3, :3] += np.eye(3) * self.gyro_noise**2 * self._elapsed
        cov[3:, 3:] += np.eye(3) * self.random_walk**2 * self._elapsed
        self._gain[:] = 0.0
        self._elapsed = 0.0
        return cov

    def _fuse(self, cov: np.ndarray, h: np.ndarray, z: np.ndarray, var: float) -> None:
        """Kalman update of the error state with z = h δx + noise (var per row), then the reset into R̂, b̂."""
        s = h @ cov @ h.T + np.eye(len(z)) * var
        k = np.linalg.solve(s, h @ cov).T
        dx = k @ z
        ikh = np.eye(6) - k @ h
        self.cov = ikh @ cov @ ikh.T + (k * var) @ k.T  # Joseph form
        self.cov = 0.5 * (self.cov + self.cov.T)
        self._rot = pin.exp3(dx[:3]) @ self._rot
        self.bias += dx[3:]

    def _update(self, rot: np.ndarray) -> None:
        """Propagate the covariance over the interval, then fuse the reading's tilt."""
        self._since = 0.0
        z = pin.log3(np.asarray(rot, dtype=float) @ self._rot.T)[:2]  # world-frame tilt of the reading against R̂
        self._fuse(self._propagate(), self._h, z, self.error**2)
        self.updates += 1

    def fuse_rate(self, axis: np.ndarray, rate: float, var: float, gate: float = 4.0) -> bool:
        """Fuse a measurement of the bias along ``axis`` (3,) (IMU frame, unit): rate = axisᵀ (b − b̂) rad/s against
        the current b̂, variance var (rad/s)²; rejected (False, counted in ``rejected``) when its innovation is more
        than ``gate`` standard deviations (a slipping foot)."""
        if self._rot is None:
            return False
        cov = self._propagate()
        h = np.zeros((1, 6))
        h[0, 3:] = axis
        if rate**2 > gate**2 * (float(axis @ cov[3:, 3:] @ axis) + var):
            self.cov = cov
            self.rejected += 1
            return False
        self._fuse(cov, h, np.array([rate]), var)
        self.rate_updates += 1
        return True


class StanceYaw:
    """The gyro's bias about the world vertical from the settled stance feet (``imu_bias.stance_yaw``).

    The orientation reading cannot see the vertical bias (its yaw is its own gyro integral); feet that stay where they
    are can. Over an interval [t0, t1] in which a set of at least two feet stays settled (:attr:`GridKnot.measured`),
    their positions relative to their centroid, d_i (IMU frame, leg kinematics), turn by the base's rotation:
    d_i(t1) = ΔRᵀ d_i(t0). The knots' gyro (corrected by the b̂ of its time) integrates to ΔR̂ = ΔR exp(e) with
    e ≈ ∫ (b − b̂) dt; so with u_i = ΔR̂ᵀ d_i(t0), y_i = d_i(t1) − u_i ≈ e × u_i, and for e's component about the
    world vertical n (IMU frame, from the knot's orientation reading), y_i = −(u_i × n) e_n. Least squares over the
    feet gives e_n / Δt = nᵀ(b − b̂) (plus the b̂ the gyro was corrected by, against the current one) with variance
    σ_v² / Σ ‖u_i × n‖² (σ_v: a settled foot's speed relative to the others: creep, sinking, encoders; on the suite's
    floors the error grows with the interval, a speed more than a position) plus the gyro's white noise. A round foot
    rolling without slip moves its frame by r φ × n (φ: the foot's turn); that is taken out first. Only the vertical
    component is used: the tilt is the reading's, and a soft floor's sinking feet would lean it.

    robot: the estimator's model (foot frames, IMU mount); foot_speed: σ_v, m/s; gyro_noise: the gyro's white-noise
    density, rad/√s; interval: s, the longest interval (it also ends where a foot of its set stops being settled);
    dt: s, the grid step (a longer step between knots is a gap); rolling_radius: m, the feet's rolling radius r;
    min_interval: s, the shortest interval used.
    """

    def __init__(
        self,
        robot: RobotModel,
        foot_speed: float,
        gyro_noise: float,
        interval: float,
        dt: float,
        rolling_radius: float = 0.0,
        min_interval: float = 0.1,
    ) -> None:
        if min(foot_speed, interval, dt, min_interval) <= 0.0 or gyro_noise < 0.0:
            raise ValueError("need foot_speed, interval, dt, min_interval > 0 and gyro_noise >= 0")
        self.robot, self.foot_speed, self.gyro_noise = robot, float(foot_speed), float(gyro_noise)
        self.interval, self.dt, self.min_interval = float(interval), float(dt), float(min_interval)
        self.rolling_radius = float(rolling_radius)
        self._data = robot.model.createData()
        self._q = robot.neutral()  # the base at the identity: the feet in the base frame
        self._r_ib = imu_mount(robot)[0].T  #: base axes in the IMU frame
        #: (t0, feet, their frames in the IMU frame (:meth:`feet`))
        self._anchor: tuple[float, tuple[int, ...], tuple[np.ndarray, np.ndarray]] | None = None
        self._rot = np.eye(3)  #: ΔR̂ since the anchor (IMU frame)
        self._bias_sum = np.zeros(3)  #: ∫ b̂ dt the gyro was corrected by since the anchor, rad
        self._prev: GridKnot | None = None
        self.intervals = 0  #: intervals closed

    def feet(self, q_joints: np.ndarray, feet: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """The feet's frames in the IMU frame at the joint angles (nj,): positions (k, 3) m (the IMU's origin not
        subtracted) and rotations (k, 3, 3)."""
        q = self._q
        q[7:] = q_joints
        pin.framesForwardKinematics(self.robot.model, self._data, q)
        placements = [self._data.oMf[self.robot.foot_frame_ids[f]] for f in feet]
        return (
            np.array([self._r_ib @ m.translation for m in placements]),
            np.array([self._r_ib @ m.rotation for m in placements]),
        )

    def add(self, knot: GridKnot, bias_now: np.ndarray) -> tuple[np.ndarray, float, float] | None:
        """One grid knot (in time order, its contact flags final); returns (n (3,), nᵀ(b − bias_now) rad/s, variance
        (rad/s)²) when an interval closes, else None. bias_now: the b̂ (3,) rad/s the result is relative to."""
        still = knot.measured
        prev, self._prev = self._prev, knot
        out = None
        if self._anchor is not None:
            if prev is None or knot.detector_start or knot.t - prev.t > 1.5 * self.dt:  # a gap: start over
                self._anchor = None
            elif not all(still[f] for f in self._anchor[1]):  # the set broke up: the interval ends at the knot before
                out = self._close(prev, bias_now)
            else:
                dt = knot.t - prev.t
                self._rot = self._rot @ pin.exp3(0.5 * (knot.imu.gyro + prev.imu.gyro) * dt)
                self._bias_sum += 0.5 * (knot.imu.gyro_bias + prev.imu.gyro_bias) * dt
                if knot.t - self._anchor[0] >= self.interval - 1e-9:
                    out = self._close(knot, bias_now)
        if self._anchor is None and sum(still) >= 2:
            feet = tuple(f for f, s in enumerate(still) if s)
            self._anchor = (knot.t, feet, self.feet(knot.joint.q, feet))
            self._rot, self._bias_sum = np.eye(3), np.zeros(3)
        return out

    def _close(self, knot: GridKnot, bias_now: np.ndarray) -> tuple[np.ndarray, float, float] | None:
        """End the interval at ``knot`` (the anchor is dropped); its measurement, or None if it is too short."""
        t0, feet, (p0, rot0) = self._anchor
        self._anchor = None
        span = knot.t - t0
        if span < self.min_interval - 1e-9:
            return None
        p1, rot1 = self.feet(knot.joint.q, feet)
        w, x, yq, z = knot.imu.quat
        n = pin.Quaternion(w, x, yq, z).toRotationMatrix()[2]  # world vertical in the IMU frame (R_WIᵀ e_z)
        if self.rolling_radius > 0.0:  # a rolling sphere's centre moves by r φ × n (φ: its turn, IMU axes at t1)
            for i in range(len(feet)):
                phi = pin.log3(rot1[i] @ rot0[i].T @ self._rot)
                p1[i] -= self.rolling_radius * np.cross(phi, n)
        u = (p0 - p0.mean(axis=0)) @ self._rot  # rows ΔR̂ᵀ d_i(t0)
        y = p1 - p1.mean(axis=0) - u
        a = np.cross(u, n)
        info = float(np.sum(a * a))
        if info <= 0.0:
            return None
        e_n = -float(np.sum(a * y)) / info
        self.intervals += 1
        rate = e_n / span + float(n @ (self._bias_sum / span - bias_now))
        var = self.foot_speed**2 / info + self.gyro_noise**2 / span
        return n, rate, var
