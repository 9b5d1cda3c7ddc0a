"""The gyro bias learnt from the IMU's orientation reading (``imu_bias.attitude_tracking``, GyroBiasTracker).

The reading comes from the simulator's own attitude filter (a Mahony filter on the biased gyro and accelerometer, the
same class ``mcoe_sim`` uses), on a body that rocks about all three axes: the tracker must find the horizontal bias
within its own stated uncertainty, shrink that uncertainty with time, leave the vertical bias at its prior, ignore a
constant tilt offset of the reading, keep what it learnt across a sensor gap; and the estimator must subtract it.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.estimation.gyro_bias import GyroBiasTracker
from mcoe_ros.sim.sensors import AttitudeFilter

G = 9.81
DT = 0.002
BIAS = np.array([0.021, -0.026, 0.004])  # rad/s, the suite's seed 3 (2.6 sigma of the prior)


def _rocking(t: float) -> np.ndarray:
    """Body angular velocity (3,) rad/s of a trunk rocking in roll, pitch and yaw (a sway's amplitudes)."""
    return np.array([0.3 * np.cos(2.0 * t), 0.25 * np.cos(1.3 * t + 0.4), 0.2 * np.cos(0.7 * t)])


def _run(duration: float, offset=(0.0, 0.0, 0.0), gap: tuple[float, float] | None = None, seed: int = 0):
    """The tracker fed with the biased gyro and the attitude filter's reading (turned by a
    constant world tilt ``offset`` rad); samples inside ``gap`` (t0, t1) are dropped."""
    rng = np.random.default_rng(seed)
    tracker = GyroBiasTracker(0.01, 1e-3, 0.02 * np.sqrt(DT), 0.015, 0.5)
    filt = AttitudeFilter(1.0, 0.1)
    rot = np.eye(3)
    turn = pin.exp3(np.asarray(offset, float))
    for k in range(int(duration / DT)):
        t = k * DT
        omega = _rocking(t)
        gyro = omega + BIAS + rng.normal(0.0, 0.004, 3)
        acc = rot.T @ np.array([0.0, 0.0, G]) + rng.normal(0.0, 0.03, 3)
        reading = turn @ filt.update(gyro, acc, DT)
        if gap is None or not gap[0] <= t < gap[1]:
            tracker.add(t, reading, gyro)
        rot = rot @ pin.exp3(omega * DT)
    return tracker


def test_the_horizontal_bias_is_learnt_within_its_stated_uncertainty():
    early, late = _run(4.0), _run(20.0)
    for tracker in (early, late):
        sd = np.sqrt(tracker.variance)
        assert np.all(np.abs(tracker.bias[:2] - BIAS[:2]) < 3.0 * sd[:2])
        # yaw is not measured: the vertical bias stays about at its prior (0.01 rad/s; the rocking's tilts of up to
        # 0.15 rad give the body's z axis a small horizontal share)
        assert sd[2] > 0.008 and abs(tracker.bias[2] - BIAS[2]) < 3.0 * sd[2]
    assert np.all(np.sqrt(late.variance[:2]) < 0.6 * np.sqrt(early.variance[:2]))  # the random walk (1e-3) bounds it
    assert np.all(np.abs(late.bias[:2] - BIAS[:2]) < 0.004)  # against 0.021 / 0.026 unknown at the start


def test_a_constant_tilt_of_the_reading_is_not_a_bias():
    plain, tilted = _run(20.0), _run(20.0, offset=[0.02, -0.015, 0.0])
    assert np.allclose(tilted.bias[:2], plain.bias[:2], atol=1e-3)


def test_a_gap_keeps_what_was_learnt():
    tracker = _run(20.0, gap=(9.0, 9.5))
    assert np.all(np.abs(tracker.bias[:2] - BIAS[:2]) < 3.0 * np.sqrt(tracker.variance[:2]))
    assert np.all(np.abs(tracker.bias[:2] - BIAS[:2]) < 0.005)
    with pytest.raises(ValueError):
        GyroBiasTracker(0.01, 1e-3, 0.0, 0.0, 0.5)


def test_the_estimator_subtracts_the_tracked_bias_before_the_window():
    from mcoe_ros.estimation.config import EstimatorConfig, ImuBiasConfig
    from mcoe_ros.estimation.estimator import Estimator

    on = Estimator(EstimatorConfig())
    off = Estimator(EstimatorConfig(imu_bias=ImuBiasConfig(attitude_tracking=False)))
    assert on.gyro_tracker is not None and off.gyro_tracker is None
    gyro = np.array([0.1, 0.2, 0.3])
    quat = np.array([1.0, 0.0, 0.0, 0.0])
    acc = np.array([0.0, 0.0, G])
    for est in (on, off):
        assert est.add_imu(100.0, quat, gyro, acc)
    on.gyro_tracker.bias[:] = [0.01, -0.02, 0.0]  # as if learnt
    for est in (on, off):
        assert est.add_imu(100.002, quat, gyro, acc)
    assert np.allclose(off.window.imu.items[-1].gyro, gyro)
    assert np.allclose(on.window.imu.items[-1].gyro, gyro - on.gyro_tracker.bias)
    assert np.allclose(on.window.imu.items[-1].raw_gyro, gyro)  # what a baseline gets: the sensor's reading
    assert on.diagnostics().extra["gyro_bias_tracked_y_rad_s"].startswith("-0.02000")
    # the biases estimated in the window: one estimator of the gyro bias at a time
    assert Estimator(EstimatorConfig(imu_bias=ImuBiasConfig(enabled=True))).gyro_tracker is None
