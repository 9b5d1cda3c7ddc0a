"""The orientation reading's weight on gait intervals (``noise.orientation_gait``, docs/localisation.md session 30).

On an interval with a foot in the air the accelerometer measures the model's acceleration (the contact forces'),
which ties the tilt to the torque-driven dynamics and their errors; the window's tilt then drifts from the reading
(15–45 mrad over a 10 s trot in place on the realism suite). There the reading weighs ``noise.orientation_gait``;
with every foot down, ``noise.orientation``.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from mcoe_ros.estimation.config import EstimatorConfig, NoiseConfig
from mcoe_ros.estimation.estimator import Estimator
from mcoe_ros.estimation.window import GridKnot
from mcoe_ros.io.bag import iter_messages, time_ns_of
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import node_config
from mcoe_ros.multibody.measurements import ImuOrientation
from mcoe_ros.testing.data import SAMPLE_BAG


def _orientation_std(model) -> float:
    (meas,) = [m for m in model.measurements if isinstance(m, ImuOrientation)]
    return float(1.0 / meas.W[0, 0])


def test_the_reading_weighs_orientation_gait_while_a_foot_is_in_the_air():
    """Every interval with a foot in the air (realised accelerometer or not) has the reading at
    noise.orientation_gait, every interval with all feet down at noise.orientation; 0 = noise.orientation everywhere;
    the accelerometer's choice (realised or the model's) is unchanged."""
    assert NoiseConfig().orientation_gait == 0.03 and NoiseConfig().orientation == 0.1
    feet4 = (True,) * 4
    flags = [feet4] * 10
    flags[3] = flags[4] = (True, False, False, True)  # a trot's diagonal pair
    flags[7] = (False,) * 4  # a flight
    knots = [GridKnot(0.002 * i, None, None, f, np.zeros((4, 3))) for i, f in enumerate(flags)]
    for kn in knots:
        kn.stance_time = tuple(0.2 if c else 0.0 for c in kn.contacts)
    knots[5].stance_time = (0.2, 0.0, 0.0, 0.2)  # every foot down, two just landed: the model's accelerometer
    running, terminal = Estimator(EstimatorConfig()).builder.phase_models(knots, None)
    gait = [not all(kn.contacts) for kn in knots[:-1]]
    assert [_orientation_std(m) for m in running] == [0.03 if g else 0.1 for g in gait]
    assert _orientation_std(terminal) == 0.1
    realised = [m.noise_coupled for m in running]
    assert realised[5] is False and realised[0] is True and realised[3] is False
    off = Estimator(EstimatorConfig(noise=NoiseConfig(orientation_gait=0.0))).builder.phase_models(knots, None)[0]
    assert [_orientation_std(m) for m in off] == [0.1] * len(off)
    assert [m.noise_coupled for m in off] == realised
    assert node_config({"noise.orientation_gait": 0.05}).estimator.noise.orientation_gait == 0.05


def _tilt_errors(over: dict, start: float = 5.5, end: float = 9.0) -> np.ndarray:
    """(n, 2) mrad: the published tilt's error (the world vertical in the base frame, x and y) against the sample
    bag's truth over its trot (from 6.7 s), the estimator started at ``start`` s (on the sway)."""
    truth = {}
    for _, _, msg in iter_messages(SAMPLE_BAG, ["ground_truth/odom"]):
        o = msg.pose.pose.orientation
        truth[round(time_ns_of(msg.header.stamp) * 1e-9, 3)] = pin.Quaternion(o.w, o.x, o.y, o.z).toRotationMatrix()
    feed = SensorFeed(node_config(over))
    t0, out = None, []
    for _, t_ns, msg in iter_messages(SAMPLE_BAG, ["low_state"]):
        t0 = t_ns if t0 is None else t0
        t = (t_ns - t0) * 1e-9
        if t < start:
            continue
        if t > end:
            break
        feed.low_state(msg, t_ns * 1e-9)
        for e in feed.poll():
            if e.source == "oe" and e.t - t0 * 1e-9 > 6.7 and round(e.t, 3) in truth:
                x, y, z, w = e.quat_xyzw
                rot = pin.Quaternion(w, x, y, z).toRotationMatrix()
                out.append(1e3 * (rot[2, :2] - truth[round(e.t, 3)][2, :2]))
    return np.array(out)


def test_on_a_trot_the_window_keeps_the_tilt_of_a_good_reading():
    """The sample bag's reading is the true orientation with 3 mrad of noise: over its trot the published tilt
    follows it closer with the gait weight than with noise.orientation everywhere."""
    gait, plain = _tilt_errors({}), _tilt_errors({"noise.orientation_gait": 0.0})
    assert len(gait) == len(plain) >= 30
    rms = [float(np.sqrt(np.mean(np.sum(e**2, axis=1)))) for e in (gait, plain)]
    print(f"sample bag trot: tilt error RMS {rms[0]:.2f} mrad (gait weight) against {rms[1]:.2f} (without)")
    assert rms[0] < 0.8 * rms[1], rms
