"""The accelerometer's bias along the IMU's z axis, learnt from the settled stance feet outside the window.

The window (0.2 s) cannot tell an accelerometer bias along gravity from a heavier or lighter robot: on a gait the
model's vertical acceleration is tied to the accelerometer's, and a bias b_z reads as (M / g) b_z kg of payload
(Go1 + 5 kg: 0.09 kg per 0.05 m/s², docs/realism.md session 29). Over seconds the base's vertical velocity closes the
books: the integrated vertical specific force minus g must equal the change of the velocity that the settled stance
feet give by leg kinematics. This class keeps that account as a two-state Kalman filter outside the window, state
(v_z, b_z): v_z the base origin's vertical velocity (world, m/s), b_z the accelerometer's bias along the IMU's z axis
(m/s²), fed with the window's final knots:

- predict at every knot with the sensor's specific force (``raw_acc``, ``raw_quat``; the centripetal lever-arm term
  of the IMU's offset, as :func:`~mcoe_ros.multibody.imu.base_motion` without the angular acceleration):
  v_z += dt (a_z − R_WI[2, 2] b_z), white noise ``accel_std`` per knot on the acceleration, b_z a random walk;
- update every ``update_interval`` s with each settled foot's kinematic base velocity
  (:class:`~mcoe_ros.estimation.leg_odometry.LegKinematics`), its z component, variance ``foot_velocity_std``² (the
  kinematics are the cost: at every 2 ms knot they took 8 % of a replay's time; the velocity's errors are correlated
  over more than 10 ms anyway).

These are the z rows of the IMU + leg-kinematics filter (:class:`~mcoe_ros.estimation.leg_odometry.LegKinematicsEkf`)
for a level trunk. Only z: the horizontal components trade against the orientation reading's tilt (its attitude
filter levels on the same accelerometer); along gravity the norm of the specific force is what the account checks.

robot: the estimator's model; prior_std m/s² (the bias's initial std), random_walk m/s²/√s, accel_std m/s² (white
noise per knot), foot_velocity_std m/s, update_interval s; a step longer than ``max_gap`` s restarts v_z (the bias and
its variance are kept).
"""

from __future__ import annotations

import numpy as np

from mcoe_ros.estimation.leg_odometry import LegKinematics
from mcoe_ros.multibody.imu import GRAVITY
from mcoe_ros.multibody.robot import RobotModel

#: (m/s)², the variance of a restarted vertical velocity
RESTART_VELOCITY_VARIANCE = 1.0


class VerticalAccelerometerBias:
    """The accelerometer's z bias (IMU frame) from the settled stance feet's kinematic velocity (module doc)."""

    def __init__(
        self,
        robot: RobotModel,
        prior_std: float,
        random_walk: float,
        accel_std: float,
        foot_velocity_std: float,
        max_gap: float,
        update_interval: float = 0.01,
    ) -> None:
        if min(prior_std, accel_std, foot_velocity_std, max_gap) <= 0.0 or min(random_walk, update_interval) < 0.0:
            raise ValueError(
                "need prior_std, accel_std, foot_velocity_std, max_gap > 0 and random_walk, update_interval >= 0"
            )
        self.legs = LegKinematics(robot)
        rot_bi, r_imu = self.legs.mount
        self._r_imu = (rot_bi.T @ r_imu).tolist()  #: m, the IMU's offset from the base origin, IMU frame
        self.update_interval = float(update_interval)
        self._last_update = -np.inf
        self.accel_var, self.walk_var = accel_std**2, random_walk**2
        self.foot_var, self.max_gap = foot_velocity_std**2, float(max_gap)
        self.v, self.b = 0.0, 0.0  #: m/s, m/s²
        #: covariance of (v_z, b_z): [[pvv, pvb], [pvb, pbb]]
        self.pvv, self.pvb, self.pbb = RESTART_VELOCITY_VARIANCE, 0.0, float(prior_std) ** 2
        self.last_t: float | None = None
        self.updates = 0  #: knots with at least one settled foot fused
        self.restarts = 0  #: velocity restarts after a gap

    @property
    def bias(self) -> np.ndarray:
        """(3,) m/s², IMU frame: (0, 0, b_z), what the estimator subtracts from the specific force."""
        return np.array([0.0, 0.0, self.b])

    @property
    def variance(self) -> float:
        """(m/s²)², of b_z."""
        return self.pbb

    def add(self, knot) -> None:
        """One final grid knot (:class:`~mcoe_ros.estimation.window.GridKnot`): predict with its sensor-reported IMU
        sample, then the zero-velocity update of its settled feet."""
        imu = knot.imu
        if self.last_t is not None:
            step = knot.t - self.last_t
            if step > self.max_gap:  # the velocity is lost: start it again from the next feet
                self.restarts += 1
                self.v, self.pvv, self.pvb = 0.0, RESTART_VELOCITY_VARIANCE, 0.0
            elif step > 0.0:
                self._predict(step, imu.raw_quat, imu.raw_gyro, imu.raw_acc)
        self.last_t = knot.t
        if any(knot.measured) and knot.t - self._last_update >= self.update_interval - 1e-9:
            self._last_update = knot.t
            for v in self.legs.base_velocities(imu.raw_quat, imu.raw_gyro, knot.joint.q, knot.joint.dq, knot.measured):
                self._update(float(v[2]))
            self.updates += 1

    def _predict(self, dt: float, quat_wxyz, gyro, acc) -> None:
        w, x, y, z = (float(c) for c in quat_wxyz)
        n2 = w * w + x * x + y * y + z * z
        r3 = (2.0 * (x * z - w * y) / n2, 2.0 * (y * z + w * x) / n2, 1.0 - 2.0 * (x * x + y * y) / n2)  # R_WI[2]
        (ox, oy, oz), (rx, ry, rz) = (float(c) for c in gyro), self._r_imu
        wr, ww = ox * rx + oy * ry + oz * rz, ox * ox + oy * oy + oz * oz
        f = [float(acc[i]) - (o * wr - r * ww) for i, (o, r) in enumerate(((ox, rx), (oy, ry), (oz, rz)))]
        a_z = r3[0] * f[0] + r3[1] * f[1] + r3[2] * f[2] + GRAVITY[2]  # world vertical acceleration, base origin
        h = -dt * r3[2]  # d v_z / d b_z
        self.v += dt * a_z + h * self.b
        pvv, pvb, pbb = self.pvv, self.pvb, self.pbb
        self.pvv = pvv + 2.0 * h * pvb + h * h * pbb + dt * dt * self.accel_var
        self.pvb = pvb + h * pbb
        self.pbb = pbb + dt * self.walk_var

    def _update(self, v_meas: float) -> None:
        s = self.pvv + self.foot_var
        kv, kb = self.pvv / s, self.pvb / s
        r = v_meas - self.v
        self.v += kv * r
        self.b += kb * r
        pvv, pvb, pbb = self.pvv, self.pvb, self.pbb
        self.pvv, self.pvb, self.pbb = pvv - kv * pvv, pvb - kv * pvb, pbb - kb * pvb
