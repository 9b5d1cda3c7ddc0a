"""The published horizontal position covariance: relative to the odometry origin (the arrival anchor removed) plus
the touch-downs' drift (``noise.odometry_slip_time``, :mod:`mcoe_ros.estimation.drift`; issue 14, calibrated
uncertainty; docs/realism.md session 14)."""

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.estimation.drift import MIN_VARIANCE, TouchdownDrift, relative_to_origin
from mcoe_ros.multibody.robot import RobotModel

TAU = 0.003


@pytest.fixture(scope="module")
def go1():
    return RobotModel()


@dataclass
class _Knot:
    """The fields of a GridKnot that the drift model reads."""

    t: float
    contacts: tuple
    detector_start: bool = False


def _state(robot: RobotModel, base_velocity, rpy=(0.0, 0.0, 0.4)) -> np.ndarray:
    """Go1 standing pose (base orientation rpy) moving as a rigid body at base_velocity (3,) m/s (joints still): every
    foot has that speed and the base's orientation."""
    q = robot.neutral()
    q[2] = 0.3
    q[3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(*rpy)).coeffs()
    v = np.zeros(robot.nv)
    v[:3] = pin.rpy.rpyToMatrix(*rpy).T @ np.asarray(base_velocity, dtype=float)  # base frame
    return np.r_[q, v]


def _window(first: int, n: int, flags: dict, states: dict, robot, dt=0.002, start=()):
    """Knots first..first+n-1 (contacts from flags {index: contacts}, default all down) and their states."""
    knots, xs = [], []
    for i in range(first, first + n):
        knots.append(_Knot(i * dt, flags.get(i, (True,) * 4), i in start))
        xs.append(states.get(i, _state(robot, (0.0, 0.0, 0.0))))
    return knots, xs


def test_relative_to_origin_removes_the_anchor_on_x_y_only():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 6))
    rel = a @ a.T * 1e-6
    anchored = rel.copy()
    anchored[:2, :2] += 0.05**2 * np.eye(2)
    out = relative_to_origin(anchored, 0.05)
    assert np.allclose(out, rel, atol=2e-12)
    # no negative variance when the window's share is below the anchor (numerical noise): clipped to PSD
    small = np.diag([0.05**2 - 1e-9, 0.05**2, 1e-4, 1e-6, 1e-6, 1e-6])
    clipped = relative_to_origin(small, 0.05)
    assert np.all(np.linalg.eigvalsh(clipped[:2, :2]) >= MIN_VARIANCE * (1 - 1e-9))
    assert np.array_equal(clipped[2:, 2:], small[2:, 2:])


def test_relative_to_origin_stays_positive_definite_when_the_subtraction_is_noisy():
    """A sway's relative x variance (1e-8 m²) below the anchor's numerical noise, with x correlated to pitch at 0.95:
    the plain block subtraction would leave x–pitch correlations above 1; the Schur-complement floor keeps the matrix
    positive definite, touches only the x, y block, and leaves a consistent matrix as the plain subtraction does."""
    rel = np.diag([1e-8, 1e-8, 1e-4, 4e-6, 4e-6, 9e-6])
    rel[0, 4] = rel[4, 0] = 0.95 * np.sqrt(1e-8 * 4e-6)
    rel[1, 3] = rel[3, 1] = -0.95 * np.sqrt(1e-8 * 4e-6)
    noisy = rel.copy()
    noisy[:2, :2] += 0.05**2 * np.eye(2) - 5e-9 * np.eye(2)  # the anchor, minus half the relative variance of noise
    out = relative_to_origin(noisy, 0.05)
    assert np.linalg.eigvalsh(out).min() > 0.0
    corr = out / np.sqrt(np.outer(np.diag(out), np.diag(out)))
    assert np.abs(corr[np.triu_indices(6, 1)]).max() < 1.0
    assert np.array_equal(out[2:, 2:], noisy[2:, 2:]) and np.array_equal(out[:2, 2:], noisy[:2, 2:])
    # consistent input: the same as the plain subtraction
    clean = rel.copy()
    clean[:2, :2] += 0.05**2 * np.eye(2)
    assert np.allclose(relative_to_origin(clean, 0.05), rel, atol=1e-15, rtol=1e-9)


def test_each_touch_down_counts_once_with_its_landing_speed(go1):
    """A landing adds τ ‖v_foot‖ (the state at the touch-down knot), follows the newest estimate while its knot is in
    the window, is frozen when the knot leaves; no touch-down at a window's unknown first knot or after a detector
    (re)start."""
    robot = go1
    drift = TouchdownDrift(robot, TAU, lambda k: k.contacts, 0.002)
    up0 = (False, True, True, True)
    up1 = (True, False, True, True)
    # window 1: knots 0..9, foot 0 in the air until knot 5 (lands at 5 with 0.3 m/s)
    flags = {i: up0 for i in range(0, 5)}
    states = {5: _state(robot, (0.3, 0.0, 0.0))}
    assert drift.update(*_window(0, 10, flags, states, robot)) == pytest.approx(TAU * 0.3, rel=1e-9)
    assert drift.count == 1
    # window 2: knots 4..13, the landing re-estimated at 0.4 m/s (3D: 0.4 = |(0, 0.24, -0.32)|), foot 1 lands at 12
    flags.update({i: up1 for i in (10, 11)})
    states = {5: _state(robot, (0.0, 0.24, -0.32)), 12: _state(robot, (0.1, 0.0, 0.0))}
    sigma = drift.update(*_window(4, 10, flags, states, robot))
    assert sigma == pytest.approx(TAU * (0.4 + 0.1), rel=1e-9) and drift.count == 2
    # window 3: knots 8..17: knot 5 left the window with its last value (0.4), not recounted
    states = {12: _state(robot, (0.2, 0.0, 0.0))}
    sigma = drift.update(*_window(8, 10, flags, states, robot))
    assert drift.sigma_past == pytest.approx(TAU * 0.4, rel=1e-9) and drift.count_past == 1
    assert sigma == pytest.approx(TAU * (0.4 + 0.2), rel=1e-9) and drift.count == 2
    # a detector restart at knot 20 (its flags: no contact): the knot after it is no touch-down
    flags.update({20: (False,) * 4})
    states = {21: _state(robot, (1.0, 0.0, 0.0))}
    assert drift.update(*_window(18, 6, flags, states, robot, start=(20,))) == pytest.approx(sigma, rel=1e-12)
    # a restarted window whose first knot's predecessor is unknown: no touch-down at its first knot
    fresh = TouchdownDrift(robot, TAU, lambda k: k.contacts, 0.002)
    assert fresh.update(*_window(100, 3, {}, {100: _state(robot, (1.0, 0.0, 0.0))}, robot)) == 0.0
    # published: σ² (and the rolling's, none here: the feet do not turn) on x and y only
    assert drift.rolling == 0.0
    pub = drift.publish(np.eye(6) * 1e-6)
    assert np.allclose(np.diag(pub), np.r_[[1e-6 + sigma**2] * 2, [1e-6] * 4])


def test_a_backdated_touch_down_on_the_last_updates_newest_knot_counts_there_once(go1):
    """The window may relabel the newest knot of the last update (a touch-down confirmed one knot later dates from
    it, ``contact.backdate``): the landing is counted at that knot, with its speed, once, and not at the next knot
    (whose held foot no longer moves)."""
    robot = go1
    drift = TouchdownDrift(robot, TAU, lambda k: k.contacts, 0.002)
    up0 = (False, True, True, True)
    flags = {i: up0 for i in range(0, 10)}
    states = {9: _state(robot, (0.3, 0.0, 0.0)), 10: _state(robot, (0.05, 0.0, 0.0))}
    assert drift.update(*_window(0, 10, flags, states, robot)) == 0.0  # knot 9: foot 0 still in the air
    del flags[9]  # relabelled: foot 0 down from knot 9 on
    sigma = drift.update(*_window(2, 10, flags, states, robot))
    assert sigma == pytest.approx(TAU * 0.3, rel=1e-9) and drift.count == 1
    assert drift.update(*_window(4, 10, flags, states, robot)) == pytest.approx(sigma, rel=1e-12)
    assert drift.count == 1


def test_stance_feet_rolling_adds_their_radius_times_the_horizontal_rotation(go1):
    """σ_roll = r √(mean over the newest knot's stance feet of ‖φ_h‖²), φ_h the horizontal part of a foot frame's
    rotation since its stance began: a pitch of the whole body (joints still) rolls every foot by it, a yaw does not;
    a foot that lifts and lands again starts from its new orientation."""
    robot, r = go1, go1.spec.foot_radius
    assert r == pytest.approx(0.02)
    drift = TouchdownDrift(robot, TAU, lambda k: k.contacts, 0.002)
    flat = {i: _state(robot, (0, 0, 0), (0.0, 0.0, 0.4)) for i in range(0, 40)}
    drift.update(*_window(0, 10, {}, flat, robot))  # every foot down from the first knot: stance starts there
    assert drift.rolling == 0.0
    pitched = dict(flat)
    pitched[19] = _state(robot, (0, 0, 0), (0.0, 0.1, 0.4))
    drift.update(*_window(10, 10, {}, pitched, robot))
    assert drift.rolling == pytest.approx(r * 0.1, rel=1e-6)
    turned = dict(flat)
    turned[29] = _state(robot, (0, 0, 0), (0.0, 0.0, 0.9))  # yaw only
    drift.update(*_window(20, 10, {}, turned, robot))
    assert drift.rolling == pytest.approx(0.0, abs=1e-9)
    # foot 0 lifts at 30-31 and lands at 32 pitched by 0.2: it starts from there; the others have rolled by 0.2
    flags = {30: (False, True, True, True), 31: (False, True, True, True)}
    states = {i: _state(robot, (0, 0, 0), (0.0, 0.2, 0.4)) for i in range(30, 40)}
    drift.update(*_window(30, 10, flags, states, robot))
    assert drift.rolling == pytest.approx(r * 0.2 * np.sqrt(3 / 4), rel=1e-6)
    pub = drift.publish(np.zeros((6, 6)))
    assert pub[0, 0] == pytest.approx(drift.sigma**2 + drift.rolling**2) and pub[0, 1] == 0.0


@pytest.fixture(scope="module")
def trot_forward(tmp_path_factory):
    """2.5 s of the realism suite's trot forward (3 kg payload, soft round feet on a soft floor, Go1-like noise,
    biases and actuator losses), seed 7."""
    from mcoe_ros.sim.cli import main as sim_main

    out = str(tmp_path_factory.mktemp("trot_forward") / "bag")
    argv = ["--scenario", "trot-forward:2.5", "--payload-mass", "3", "--payload-com", "0", "0", "0.05"]
    assert sim_main([*argv, "--realistic", "--seed", "7", "--out", out]) == 0
    return out


def _horizontal(bag: str, overrides: dict) -> tuple[list[tuple[float, float, float, int]], dict]:
    """Per estimate: (x, y NEES against the truth, σ_x m, drift σ m, touch-downs), first pose aligned (translation);
    and the diagnostics' key values at the end."""
    from mcoe_ros.testing.datasets import replay_with_truth

    good, truth, feed = replay_with_truth(bag, overrides)
    first = good[0]
    out = []
    for e in good:
        err = ((e.position - first.position) - (truth[round(e.t, 3)] - truth[round(first.t, 3)]))[:2]
        cov = e.pose_cov[:2, :2]
        out.append(
            (
                float(err @ np.linalg.solve(cov, err)),
                float(np.sqrt(cov[0, 0])),
                float(e.solve.get("odometry_drift_std", 0.0)),
                int(e.solve.get("touchdowns", 0)),
            )
        )
    return out, dict(feed.diagnostics().key_values())


def test_trot_forward_horizontal_covariance_covers_the_drift(trot_forward):
    """Simulated trot forward: the published x, y σ starts far below the 5 cm anchor and grows with the touch-downs
    (measured 20.4 -> 29.5 mm from 13 to 21 touch-downs; 26.5 -> 40.1 mm before the touch-downs were backdated to
    the knot their force crossed the threshold, whose pre-impact foot speed is lower); the final x, y NEES is inside
    the chi-square(2) 99 % bound (9.21; measured 3.2). Without the drift term (the window's covariance alone,
    relative to the origin) the same estimate is overconfident: NEES above the bound (measured 152)."""
    default, diagnostics = _horizontal(trot_forward, {})
    nees, sigma_x, drift, count = default[-1]
    assert default[0][1] < 0.02  # relative to the origin: the anchor (0.05 m) is not in it
    assert count >= 10 and drift > 0.0 and sigma_x >= drift
    # grows with the touch-downs (a pending landing's share follows the newest estimate, so not strictly monotone)
    mid = default[len(default) // 2]
    assert mid[3] < count and drift > 1.3 * mid[2]
    assert nees <= 9.21
    assert int(diagnostics["odometry_touchdowns"]) == count
    assert float(diagnostics["odometry_drift_std_mm"]) == pytest.approx(1e3 * drift, abs=0.06)
    window_only, diagnostics = _horizontal(trot_forward, {"noise.odometry_slip_time": 0.0})
    assert "odometry_touchdowns" not in diagnostics
    assert window_only[-1][2] == 0.0 and window_only[-1][3] == 0
    assert window_only[-1][0] > 9.21
