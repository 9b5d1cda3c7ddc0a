"""Before the first solve (recorded trots forward of the simulated Go1):

* the contact detector explains the joint torques with the actuator model's prior (before: the reported torque taken
  for the joint torque, so a lossy swing leg's friction read as ground force until a solve identified it);
* a window solved from scratch without the input-rate odometry starts its base from the IMU + leg-kinematics filter
  run over the window (before: held still at the start position).
"""

from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.io.bag import iter_messages, time_ns_of
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import node_config
from mcoe_ros.sim.cli import main as sim_main
from mcoe_ros.testing.datasets import load_bag

#: the Go1 actuator priors of config/go1.yaml as the simulated robot's losses (viscous, Coulomb, rotor inertia)
PRIOR_LOSSES = ["--joint-damping", "1.0", "--joint-friction", "0.2", "--rotor-inertia", "0.01"]


@pytest.fixture(scope="module")
def lossy_trot(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("cold") / "bag")
    argv = ["--scenario", "trot-forward:1.5", "--payload-mass", "3", "--noise", "0", *PRIOR_LOSSES, "--seed", "7"]
    assert sim_main([*argv, "--out", out]) == 0
    return out


def _fill_window(bag: str, overrides: dict):
    """(estimator whose window just filled, no solve run; the bag's truth {t: (p world, v world, contacts)})."""
    series, _ = load_bag(bag)
    stamps = []
    truth = {}
    for _, _, msg in iter_messages(bag, ["ground_truth/odom"]):
        p, v, o = msg.pose.pose.position, msg.twist.twist.linear, msg.pose.pose.orientation
        rot = pin.Quaternion(o.w, o.x, o.y, o.z).toRotationMatrix()
        t = round(time_ns_of(msg.header.stamp) * 1e-9, 3)
        stamps.append(t)
        truth[t] = [np.array([p.x, p.y, p.z]), rot @ [v.x, v.y, v.z]]
    for t, c in zip(stamps, series.contacts, strict=False):
        truth[t].append(tuple(bool(f) for f in c))
    feed = SensorFeed(node_config(overrides))
    est = feed.estimator
    t0 = stamps[0]
    for k in range(len(series)):
        feed.sample(t0 + float(series.t[k]), series.q[k], series.dq[k], series.tau[k], *series.imu(k))
        est.advance()
        if est.window.full:
            break
    assert est.counters.ticks == 0
    return est, truth


def _truth_at(est, truth, knots):
    epoch = est.epoch or 0.0  # knot times are on the window's clock
    return [truth[round(kn.t + epoch, 3)] for kn in knots]


def test_the_detector_uses_the_actuator_prior_before_the_first_solve(lossy_trot):
    def disagreement(overrides):
        est, truth = _fill_window(lossy_trot, {"estimator.window": 1.0, **overrides})
        knots = est.window.snapshot()
        return np.mean([kn.contacts != tr[2] for kn, tr in zip(knots, _truth_at(est, truth, knots), strict=True)])

    with_prior = disagreement({})
    without = disagreement({"actuator.enabled": False})  # the reported torque as the joint torque
    assert with_prior < 0.05, with_prior
    assert without > 0.2, without  # swing legs' friction read as ground force


def test_a_cold_window_starts_from_leg_kinematics(lossy_trot):
    est, truth = _fill_window(lossy_trot, {"estimator.window": 1.0})
    knots = est.window.snapshot()
    true = _truth_at(est, truth, knots)
    # the simulator's flags (this test is about the guess, the one above about the detector)
    knots = [replace(kn, contacts=tr[2], settled=tr[2]) for kn, tr in zip(knots, true, strict=True)]
    start = true[0][0].copy()
    start[2] = est.builder.standing_height(knots[0])  # the window's frame: the feet's frames on z = 0
    guess = est._kinematic_base_guess(knots, start)
    v_err = np.array([g[1] - t[1] for g, t in zip(guess, true, strict=True)])
    speed = np.array([np.linalg.norm(t[1][:2]) for t in true])
    walked = true[-1][0][:2] - true[0][0][:2]
    assert np.linalg.norm(walked) > 0.1  # the robot moves: a still base is 10 cm off by the window's end
    assert np.sqrt(np.mean(np.sum(v_err[:, :2] ** 2, axis=1))) < 0.25 * np.sqrt(np.mean(speed**2))
    assert np.linalg.norm((guess[-1][0] - start)[:2] - walked) < 0.25 * np.linalg.norm(walked)
    rise = (true[-1][0] - true[0][0])[2]
    assert abs((guess[-1][0] - start)[2] - rise) < 0.02
