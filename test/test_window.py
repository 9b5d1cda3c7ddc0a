"""Sliding window: resampling onto the grid, contact flags per knot, gap restarts."""

import numpy as np
import pytest

from mcoe_ros.estimation.samples import validate_imu, validate_joint
from mcoe_ros.estimation.window import SlidingWindow
from mcoe_ros.multibody.contact import ContactDetector
from mcoe_ros.multibody.robot import RobotModel


@pytest.fixture(scope="module")
def robot():
    return RobotModel()


def _feed(win, t, q=None, tau=None):
    q = np.tile([0.0, 0.8, -1.6], 4) if q is None else q
    tau = np.zeros(12) if tau is None else tau
    win.push_joint(validate_joint(t, q, np.zeros(12), tau, 12))
    win.push_imu(validate_imu(t, [1.0, 0, 0, 0], np.zeros(3), [0, 0, 9.81])[0])


def test_grid_is_aligned_uniform_and_bounded(robot):
    win = SlidingWindow(ContactDetector(robot), 0.002, 50, 0.1)
    stats = win.stats
    rng = np.random.default_rng(0)
    t = 0.0011
    while t < 0.3:
        _feed(win, t)
        win.advance()
        t += 0.002 + rng.uniform(-3e-4, 3e-4)  # jittered 500 Hz stream
    times = np.array([n.t for n in win.knots])
    assert win.full and len(times) == 50
    np.testing.assert_allclose(np.diff(times), 0.002, atol=1e-12)
    assert np.allclose(times / 0.002, np.round(times / 0.002), atol=1e-6)
    assert times[-1] <= win.joints.last_t
    assert stats.n_rejected == 0


def test_interpolated_values_and_contacts_from_torques(robot):
    from test_contact import _standing  # same helper: torques that hold the robot on given feet

    q, tau, _ = _standing(robot, [0, 3])  # FL and RR in stance
    win = SlidingWindow(ContactDetector(robot), 0.002, 100, 0.1)
    for i in range(60):
        _feed(win, 0.001 + 0.002 * i, q[7:] + 1e-3 * i, tau)
        win.advance()
    last = win.knots[-1]
    assert last.contacts == (True, False, False, True)
    k = round((last.t - 0.001) / 0.002)  # the node lies halfway between samples k and k+1
    np.testing.assert_allclose(last.joint.q, q[7:] + 1e-3 * (k + 0.5), atol=1e-12)


def test_gap_longer_than_max_gap_restarts_and_is_counted(robot):
    win = SlidingWindow(ContactDetector(robot), 0.002, 100, 0.05)
    stats = win.stats
    for i in range(40):
        _feed(win, 0.002 * i)
        win.advance()
    assert len(win.knots) > 30
    _feed(win, 0.002 * 40 + 0.2)  # 0.2 s silence
    win.advance()
    assert stats.rejected["gap"] >= 1 and len(win.knots) <= 1 and win.restarts == 1
    for i in range(41, 80):
        _feed(win, 0.002 * i + 0.2)
        win.advance()
    assert len(win.knots) > 30


class _ScriptedForces(ContactDetector):
    """The real hysteresis (ContactDetector.update) on scripted vertical foot forces (the force estimate from the
    sensors is replaced: the test is about which knots carry a change, not about the estimate)."""

    def __init__(self, robot, config, fz_of_t):
        super().__init__(robot, config, compiled=False)
        self.fz_of_t = fz_of_t
        self.t = 0.0

    def estimate_forces(self, *args, **kwargs):
        self.forces[:] = 0.0
        self.forces[:, 2] = self.fz_of_t(self.t)
        return self.forces

    def update(self, t, forces, foot_force=None):
        self.t = t + 0.002  # the next knot's forces
        return super().update(t, forces, foot_force)


def test_a_backdated_touchdown_relabels_the_unsolved_knots_only(robot):
    """Foot 0 lands at t = 0.05 s (force above force_on from that knot on); the detector confirms it after
    min_duration = 0.006 s (three knots later). The window relabels the knots since the onset (stance clock from the
    onset, not settled, not aged), replaces rather than mutates them (a snapshot keeps its flags), and never touches
    a knot older than the last snapshot's newest (a solve's models are built on it)."""
    from mcoe_ros.multibody.contact import ContactConfig

    def fz(t):
        return np.array([50.0 if t >= 0.05 - 1e-9 else 0.0, 0.0, 0.0, 0.0])

    for backdate, snap_at in ((True, None), (False, None), (True, 0.054)):
        cfg = ContactConfig(force_on=8.0, force_off=4.0, min_duration=0.006, backdate=backdate)
        det = _ScriptedForces(robot, cfg, fz)
        win = SlidingWindow(det, 0.002, 100, 0.1)
        snap = None
        for i in range(50):
            _feed(win, 0.002 * i)
            win.advance()
            if snap_at is not None and snap is None and win.knots and win.knots[-1].t >= snap_at - 1e-9:
                snap = win.snapshot()
                before = [k.contacts for k in snap]
        flags = {round(k.t, 6): k for k in win.knots}
        assert flags[0.048].contacts[0] is False
        first = 0.056 if not backdate else (0.054 if snap_at is not None else 0.05)
        for t in (0.05, 0.052, 0.054, 0.056, 0.058):
            knot = flags[round(t, 6)]
            assert knot.contacts[0] is (t >= first - 1e-9), (backdate, snap_at, t)
            if knot.contacts[0]:
                assert knot.stance_time[0] == pytest.approx(t - (0.05 if backdate else 0.056))
                assert not knot.settled[0] and not knot.aged[0]
        assert win.backdated == (0 if not backdate else (1 if snap_at is not None else 3))
        if snap is not None:
            assert [k.contacts for k in snap] == before  # the snapshot's knots are replaced, not changed


def test_feet_the_detector_starts_on_did_not_land(robot):
    """Feet loaded from the detector's first knot start a stance that is no landing (``GridKnot.landed`` False: the
    start interval's impulse projects them; dynamics.landing_damping leaves them undamped); a foot that touches down
    later landed, also on the knots that a backdated touch-down relabels; a lift-off clears it."""
    from mcoe_ros.multibody.contact import ContactConfig

    def fz(t):
        return np.array([50.0, 50.0 if t >= 0.05 - 1e-9 else 0.0, 50.0 if t < 0.08 - 1e-9 else 0.0, 50.0])

    det = _ScriptedForces(robot, ContactConfig(force_on=8.0, force_off=4.0, min_duration=0.004), fz)
    win = SlidingWindow(det, 0.002, 100, 0.1)
    for i in range(60):
        _feed(win, 0.002 * i)
        win.advance()
    knots = {round(k.t, 6): k for k in win.knots}
    assert knots[0.02].contacts == (True, False, True, True) and knots[0.02].landed == (False,) * 4
    for t in (0.05, 0.052, 0.06, 0.1):  # foot 1 landed at 0.05 (confirmed at 0.054, backdated)
        assert knots[round(t, 6)].landed == (False, True, False, False), t
    assert knots[0.1].contacts == (True, True, False, True)  # foot 2 lifted off at 0.08
    det.t = 0.0  # the scripted forces of the first knot again
    win.restart()  # the grid starts again on the buffered samples: from its first knot
    win.advance()
    first = win.knots[0]
    assert first.detector_start and win.detector.start_time == first.t
    expected = (False, first.t < 0.05 - 1e-9, False, False)
    assert all(k.landed == tuple(e and c for e, c in zip(expected, k.contacts, strict=True)) for k in win.knots)
