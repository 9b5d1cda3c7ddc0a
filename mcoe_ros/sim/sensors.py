"""Go1-like sensor model: noise, biases and quantisation applied to the MuJoCo ground truth.

Channels (model joint order FL, FR, RL, RR x hip, thigh, calf; foot order FL, FR, RL, RR):
q (rad), dq (rad/s), tau_est (N m, the applied motor torque), IMU orientation (quaternion w, x, y, z of
imu_link in odom; imu_link has the trunk's orientation), gyro (rad/s, imu_link frame), accelerometer
(specific force a - g, m/s^2, imu_link frame: +9.81 on z at rest level), raw foot force
(int16 = round(foot_force_scale * normal force [N] + noise), clipped).

Noise: zero-mean Gaussian per channel (``*_std``), gyro/accelerometer biases drawn once per run
(``*_bias_std``) that then follow a random walk (``*_bias_walk``, units per sqrt(s); 0 = constant),
encoder quantisation ``q_resolution`` rad and torque quantisation ``tau_resolution`` N m (0 = off). The
reported torque is :attr:`Truth.tau_reported` (the commanded motor torque plus offset, see
:class:`mcoe_ros.sim.mjcf.ActuatorLosses`), not the torque at the joint. The white noise and the initial
biases come from one ``numpy.random.Generator`` seeded by ``seed`` (deterministic); the bias walks from a
second generator of the same seed, so bags without a walk are unchanged by its presence.

IMU orientation: by default (``attitude_filter_gain`` 0) the true orientation with ``orientation_std`` white noise, an
oracle no real IMU gives. With ``attitude_filter_gain`` k_p > 0 (the Go1-like profile) it is the output of the IMU's
own 6-axis attitude filter (complementary filter, Mahony's form, no magnetometer) run on the reported, biased and
noisy gyro ω and accelerometer a: with v̂ = R̂ᵀ e_z the filter's up direction in the IMU frame and e = (a / ‖a‖) × v̂
while |‖a‖ − g| < 0.2 g (else 0: a flight, a landing), the filter integrates R̂ ← R̂ exp((ω + k_p e + c) dt) with its
bias correction c ← c + k_i e dt (``attitude_filter_integral``). So its roll and pitch carry the accelerometer bias
(‖b_a,xy‖ / g at rest) and lean with every horizontal acceleration (low-passed at k_p), and its yaw integrates the
gyro's z bias (nothing observes yaw). Before the first sample the filter runs ``attitude_filter_preroll`` s on the
first truth sample (the robot standing since power-on; its own noise stream, biases held), then its yaw is set to the
true yaw (the odometry frame's heading at the recording's start); the other channels' noise streams are unchanged by
the filter.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.imu import cross, rotation_quaternion


@dataclass(frozen=True)
class NoiseConfig:
    """Standard deviations of the sensor noise (SI units, see module docstring); defaults = mild Go1-like."""

    q_std: float = 2e-4
    q_resolution: float = 2 * np.pi / 2**15 / 9.1  #: encoder count on the motor side through the gearbox
    dq_std: float = 0.02
    tau_std: float = 0.1
    orientation_std: float = 0.003  #: rad, small-angle rotation noise on the IMU quaternion
    gyro_std: float = 0.004
    gyro_bias_std: float = 0.002
    acc_std: float = 0.04
    acc_bias_std: float = 0.03
    foot_force_std: float = 3.0  #: raw units
    gyro_bias_walk: float = 0.0  #: rad/s/sqrt(s), gyro bias random walk
    acc_bias_walk: float = 0.0  #: m/s^2/sqrt(s), accelerometer bias random walk
    tau_resolution: float = 0.0  #: N m, quantisation of the reported torque (0 = off)
    attitude_filter_gain: float = 0.0  #: 1/s, k_p of the IMU's attitude filter (0 = true orientation + white noise)
    attitude_filter_integral: float = 0.0  #: 1/s^2, k_i: the attitude filter's gyro-bias correction gain
    attitude_filter_preroll: float = 30.0  #: s the attitude filter runs at rest before the first sample

    def scaled(self, factor: float) -> NoiseConfig:
        """All noise levels (incl. biases and quantisation) multiplied by ``factor`` (0 = perfect sensors: the true
        orientation too); the attitude filter's gains and pre-roll are kept for any ``factor`` > 0."""
        if factor < 0:
            raise ValueError(f"noise factor must be >= 0, got {factor}")
        keep = {"attitude_filter_gain", "attitude_filter_integral", "attitude_filter_preroll"}
        levels = {k: v * factor for k, v in asdict(self).items() if k not in keep}
        if factor == 0.0:
            levels["attitude_filter_gain"] = 0.0
        return replace(self, **levels)

    def as_dict(self) -> dict:
        return asdict(self)


#: Go1-like sensors of issue 13: the default noise with gyro bias 0.01 rad/s and accelerometer bias 0.05 m/s^2
#: (std per axis), bias random walks 5e-4 rad/s/sqrt(s) and 5e-3 m/s^2/sqrt(s), torque reported in 0.01 N m steps,
#: and the orientation of the IMU's own attitude filter (k_p 1 1/s, k_i 0.1 1/s^2: a 9 s slow mode, 30 s pre-roll)
REALISTIC_NOISE = NoiseConfig(
    gyro_bias_std=0.01,
    acc_bias_std=0.05,
    gyro_bias_walk=5e-4,
    acc_bias_walk=5e-3,
    tau_resolution=0.01,
    attitude_filter_gain=1.0,
    attitude_filter_integral=0.1,
)


@dataclass
class Truth:
    """Ground truth at one sample instant (model orders; world = odom; base = trunk origin)."""

    t: float  #: s since the recording start
    q: np.ndarray  #: (12,) rad
    dq: np.ndarray  #: (12,) rad/s
    tau: np.ndarray  #: (12,) motor torque applied to the joint (before the joint losses), N m
    base_pos: np.ndarray  #: (3,) trunk origin in odom, m
    base_quat: np.ndarray  #: (4,) w, x, y, z, trunk orientation in odom
    v_body: np.ndarray  #: (3,) trunk-origin linear velocity in the trunk frame, m/s
    w_body: np.ndarray  #: (3,) trunk angular velocity in the trunk frame, rad/s
    imu_quat: np.ndarray  #: (4,) w, x, y, z of imu_link in odom
    imu_gyro: np.ndarray  #: (3,) rad/s, imu_link frame
    imu_acc: np.ndarray  #: (3,) specific force, m/s^2, imu_link frame
    foot_force: np.ndarray  #: (4,) normal contact force, N
    contacts: np.ndarray  #: (4,) bool
    tau_reported: np.ndarray | None = None  #: (12,) noise-free torque the robot reports, N m (None: = tau)


@dataclass
class Measurement:
    """What the robot reports at one instant (same units/frames as :class:`Truth`)."""

    t: float
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    quat: np.ndarray
    gyro: np.ndarray
    acc: np.ndarray
    foot_force_raw: np.ndarray  #: (4,) int16


class SensorModel:
    """Turns :class:`Truth` into :class:`Measurement` with :class:`NoiseConfig` noise; deterministic per seed."""

    def __init__(self, noise: NoiseConfig, seed: int = 0, foot_force_scale: float = 1.0, dt: float = 0.002):
        self.noise = noise
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.walk_rng = np.random.default_rng([seed, 7])
        self.foot_force_scale = float(foot_force_scale)
        self.dt = float(dt)  #: s between two measure() calls (bias random walk step)
        self.gyro_bias = self.rng.normal(0.0, 1.0, 3) * noise.gyro_bias_std
        self.acc_bias = self.rng.normal(0.0, 1.0, 3) * noise.acc_bias_std
        self.initial_gyro_bias, self.initial_acc_bias = self.gyro_bias.copy(), self.acc_bias.copy()
        self._bias_sum, self._n = np.zeros(6), 0
        #: the attitude filter (:class:`AttitudeFilter`) once started (attitude_filter_gain > 0), else None
        self.attitude: AttitudeFilter | None = None

    @property
    def mean_bias(self) -> tuple[np.ndarray, np.ndarray]:
        """(gyro (3,), accelerometer (3,)) biases averaged over the measurements so far."""
        mean = self._bias_sum / max(self._n, 1)
        return mean[:3], mean[3:]

    def _walk(self) -> None:
        nz = self.noise
        if nz.gyro_bias_walk > 0.0:
            self.gyro_bias = self.gyro_bias + self.walk_rng.normal(0.0, 1.0, 3) * nz.gyro_bias_walk * np.sqrt(self.dt)
        if nz.acc_bias_walk > 0.0:
            self.acc_bias = self.acc_bias + self.walk_rng.normal(0.0, 1.0, 3) * nz.acc_bias_walk * np.sqrt(self.dt)

    def _gauss(self, std: float, n: int) -> np.ndarray:
        return self.rng.normal(0.0, 1.0, n) * std  # always draw: same stream whatever the levels

    def measure(self, truth: Truth) -> Measurement:
        nz = self.noise
        q = truth.q + self._gauss(nz.q_std, 12)
        if nz.q_resolution > 0.0:
            q = np.round(q / nz.q_resolution) * nz.q_resolution
        dq = truth.dq + self._gauss(nz.dq_std, 12)
        tau = (truth.tau if truth.tau_reported is None else truth.tau_reported) + self._gauss(nz.tau_std, 12)
        if nz.tau_resolution > 0.0:
            tau = np.round(tau / nz.tau_resolution) * nz.tau_resolution
        dtheta = self._gauss(nz.orientation_std, 3)  # drawn whatever the orientation model: same streams
        w, x, y, z = truth.imu_quat
        true_rot = pin.Quaternion(w, x, y, z).toRotationMatrix()
        if self._n:
            self._walk()
        elif nz.attitude_filter_gain > 0.0:
            self.attitude = self._preroll(truth, true_rot)
        self._bias_sum += np.r_[self.gyro_bias, self.acc_bias]
        self._n += 1
        gyro = truth.imu_gyro + self.gyro_bias + self._gauss(nz.gyro_std, 3)
        acc = truth.imu_acc + self.acc_bias + self._gauss(nz.acc_std, 3)
        if self.attitude is not None:
            rot = self.attitude.update(gyro, acc, self.dt)
        else:
            rot = true_rot @ pin.exp3(dtheta)
        qn = rotation_quaternion(rot)
        quat = np.array([qn.w, qn.x, qn.y, qn.z])
        if quat[0] < 0:
            quat = -quat
        raw = self.foot_force_scale * truth.foot_force + self._gauss(nz.foot_force_std, 4)
        raw = np.clip(np.round(raw), -32768, 32767).astype(np.int16)
        return Measurement(truth.t, q, dq, tau, quat, gyro, acc, raw)

    def _preroll(self, truth: Truth, true_rot: np.ndarray) -> AttitudeFilter:
        """The attitude filter after ``attitude_filter_preroll`` s at rest in the first truth sample's attitude (its
        own noise stream, biases held), levelled from the first reading and its yaw set to the true one."""
        nz = self.noise
        rng = np.random.default_rng([self.seed, 11])
        filt = AttitudeFilter(nz.attitude_filter_gain, nz.attitude_filter_integral)
        filt.level(truth.imu_acc + self.acc_bias)
        for _ in range(int(round(nz.attitude_filter_preroll / self.dt))):
            gyro = truth.imu_gyro + self.gyro_bias + rng.normal(0.0, 1.0, 3) * nz.gyro_std
            acc = truth.imu_acc + self.acc_bias + rng.normal(0.0, 1.0, 3) * nz.acc_std
            filt.update(gyro, acc, self.dt)
        filt.set_yaw(_yaw(true_rot))
        return filt

    def imu_variances(self) -> tuple[float, float, float]:
        """Per-axis variances (orientation rad^2, gyro (rad/s)^2, accel (m/s^2)^2) incl. bias spread (the attitude
        filter's orientation: its accelerometer bias's tilt, acc_bias_std / g, at least).

        Floored at 1e-12 because an all-zero covariance means "unknown" in sensor_msgs/Imu.
        """
        nz = self.noise
        filtered = (nz.acc_bias_std / GRAVITY) ** 2 if nz.attitude_filter_gain > 0.0 else 0.0
        return (
            max(nz.orientation_std**2 + filtered, 1e-12),
            max(nz.gyro_std**2 + nz.gyro_bias_std**2, 1e-12),
            max(nz.acc_std**2 + nz.acc_bias_std**2, 1e-12),
        )


#: m/s^2, the attitude filter's gravity (its accelerometer gate)
GRAVITY = 9.81


def _yaw(rot: np.ndarray) -> float:
    """Heading (rad) of a rotation matrix (3, 3): the angle of its x axis in the horizontal plane."""
    return float(np.arctan2(rot[1, 0], rot[0, 0]))


class AttitudeFilter:
    """A 6-axis IMU's onboard attitude filter (complementary filter in Mahony's form; see module docstring).

    gain: k_p 1/s; integral: k_i 1/s^2; gate: the accelerometer's correction is skipped while its magnitude is more
    than ``gate`` g away from g (free fall, landings), as attitude filters do. ``rotation`` (3, 3) is the filter's R̂
    (IMU frame to odom)."""

    def __init__(self, gain: float, integral: float, gate: float = 0.2) -> None:
        self.gain, self.integral = float(gain), float(integral)
        self.gate = float(gate)  #: the accelerometer corrects only while | ‖a‖ − g | < gate g
        self.rotation = np.eye(3)
        self.correction = np.zeros(3)  #: c (3,) rad/s, the integral term (the filter's gyro-bias estimate, negated)
        self._steps = 0

    def level(self, acc: np.ndarray) -> None:
        """Roll and pitch from one accelerometer reading (3,) m/s^2 (yaw 0): the up direction R̂ᵀ e_z = a / ‖a‖."""
        up = np.asarray(acc, float) / np.linalg.norm(acc)
        axis = np.cross(up, [0.0, 0.0, 1.0])  # rotate the IMU's up onto e_z
        s, c = np.linalg.norm(axis), float(up[2])
        self.rotation = pin.exp3(axis / s * np.arctan2(s, c)) if s > 1e-12 else np.eye(3)

    def set_yaw(self, yaw: float) -> None:
        """Turn R̂ about the vertical so that its heading is ``yaw`` rad (roll, pitch unchanged)."""
        self.rotation = pin.exp3(np.array([0.0, 0.0, yaw - _yaw(self.rotation)])) @ self.rotation

    def update(self, gyro: np.ndarray, acc: np.ndarray, dt: float) -> np.ndarray:
        """One step with a gyro (3,) rad/s and accelerometer (3,) m/s^2 reading (IMU frame); returns R̂ (3, 3)."""
        norm = np.linalg.norm(acc)
        if abs(norm - GRAVITY) < self.gate * GRAVITY:
            err = cross(np.asarray(acc, float) / norm, self.rotation[2, :])
        else:  # not gravity alone (a flight, a landing): the gyro only
            err = np.zeros(3)
        self.correction += self.integral * err * dt
        omega = np.asarray(gyro) + self.gain * err + self.correction
        self.rotation = self.rotation @ pin.exp3(omega * dt)
        self._steps += 1
        if self._steps % 500 == 0:  # exp3 is exact: only the products' round-off to remove now and then
            u, _, vt = np.linalg.svd(self.rotation)
            self.rotation = u @ vt
        return self.rotation
