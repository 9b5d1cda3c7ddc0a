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
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.imu import rotation_quaternion


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

    def scaled(self, factor: float) -> NoiseConfig:
        """All noise levels (incl. biases and quantisation) multiplied by ``factor`` (0 = perfect sensors)."""
        if factor < 0:
            raise ValueError(f"noise factor must be >= 0, got {factor}")
        return replace(self, **{k: v * factor for k, v in asdict(self).items()})

    def as_dict(self) -> dict:
        return asdict(self)


#: Go1-like sensors of issue 13: the default noise with gyro bias 0.01 rad/s and accelerometer bias 0.05 m/s^2
#: (std per axis), bias random walks 5e-4 rad/s/sqrt(s) and 5e-3 m/s^2/sqrt(s), torque reported in 0.01 N m steps
REALISTIC_NOISE = NoiseConfig(
    gyro_bias_std=0.01, acc_bias_std=0.05, gyro_bias_walk=5e-4, acc_bias_walk=5e-3, tau_resolution=0.01
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
        self.rng = np.random.default_rng(seed)
        self.walk_rng = np.random.default_rng([seed, 7])
        self.foot_force_scale = float(foot_force_scale)
        self.dt = float(dt)  #: s between two measure() calls (bias random walk step)
        self.gyro_bias = self.rng.normal(0.0, 1.0, 3) * noise.gyro_bias_std
        self.acc_bias = self.rng.normal(0.0, 1.0, 3) * noise.acc_bias_std
        self.initial_gyro_bias, self.initial_acc_bias = self.gyro_bias.copy(), self.acc_bias.copy()
        self._bias_sum, self._n = np.zeros(6), 0

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
        dtheta = self._gauss(nz.orientation_std, 3)
        w, x, y, z = truth.imu_quat
        rot = pin.Quaternion(w, x, y, z).toRotationMatrix() @ pin.exp3(dtheta)
        qn = rotation_quaternion(rot)
        quat = np.array([qn.w, qn.x, qn.y, qn.z])
        if quat[0] < 0:
            quat = -quat
        if self._n:
            self._walk()
        self._bias_sum += np.r_[self.gyro_bias, self.acc_bias]
        self._n += 1
        gyro = truth.imu_gyro + self.gyro_bias + self._gauss(nz.gyro_std, 3)
        acc = truth.imu_acc + self.acc_bias + self._gauss(nz.acc_std, 3)
        raw = self.foot_force_scale * truth.foot_force + self._gauss(nz.foot_force_std, 4)
        raw = np.clip(np.round(raw), -32768, 32767).astype(np.int16)
        return Measurement(truth.t, q, dq, tau, quat, gyro, acc, raw)

    def imu_variances(self) -> tuple[float, float, float]:
        """Per-axis variances (orientation rad^2, gyro (rad/s)^2, accel (m/s^2)^2) incl. bias spread.

        Floored at 1e-12 because an all-zero covariance means "unknown" in sensor_msgs/Imu.
        """
        nz = self.noise
        return (
            max(nz.orientation_std**2, 1e-12),
            max(nz.gyro_std**2 + nz.gyro_bias_std**2, 1e-12),
            max(nz.acc_std**2 + nz.acc_bias_std**2, 1e-12),
        )
