"""Input-rate odometry (mcoe_ros.estimation.propagation) on the committed sample bag through the real feed path."""

import os

import numpy as np
import pytest

from mcoe_ros.estimation.propagation import Propagator
from mcoe_ros.io.bag import iter_messages
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import node_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "mcoe_ros", "data", "go1_sample")


def low_states(end: float):
    t0 = None
    for _topic, t_ns, msg in iter_messages(SAMPLE, ["low_state"]):
        t0 = t_ns if t0 is None else t0
        if (t_ns - t0) * 1e-9 > end:
            return
        yield t_ns * 1e-9, msg


@pytest.fixture(scope="module")
def replayed():
    """0.6 s of the bag through the replay's loop: message, odometry, poll (grid, solve, re-anchoring)."""
    feed = SensorFeed()
    odoms, estimates = [], []
    for t, msg in low_states(0.6):
        feed.low_state(msg, t)
        odo = feed.odometry()
        if odo is not None:
            odoms.append(odo)
        estimates += feed.poll()
    return feed, odoms, estimates


def test_one_output_per_sample_after_the_first_solve_with_the_input_stamps(replayed):
    feed, odoms, estimates = replayed
    assert len(estimates) >= 5
    stamps = np.array([o.t for o in odoms])
    assert np.all(np.diff(stamps) > 0)
    imu_stamps = np.array([s.t for s in feed.estimator.window.imu.items]) + feed.estimator.epoch
    newer = imu_stamps[imu_stamps >= stamps[0]]
    assert len(newer) == len(stamps) and np.array_equal(newer, stamps)  # every sample, its own stamp
    assert 0 < odoms[0].t - estimates[0].t < 0.004 and odoms[0].age < 0.004  # the sample after the first solve
    assert all(o.is_finite() for o in odoms)


def test_propagated_state_agrees_with_the_next_solve(replayed):
    """At every solve the new track replaces the old one at the newest sample: the jump (the correction) is small."""
    feed, _odoms, estimates = replayed
    corrections = np.array(feed.estimator.propagator.corrections[1:])  # the first anchoring has no predecessor
    assert corrections.size == len(estimates) - 1
    assert np.all(corrections > 0)  # two different estimates of the same instant (not a copy)
    assert corrections.max() < 0.006, corrections  # m; a solve per 50 ms of sensor time (max 5.5 mm measured)


def test_a_solve_older_than_the_buffered_samples_does_not_re_anchor(replayed):
    feed, _odoms, estimates = replayed
    prop = feed.estimator.propagator
    knot = feed.estimator.window.knots[-1]
    assert prop.begin(estimates[-1], knot.imu, prop.entries[0].t - 0.1) is None
    assert prop.begin(estimates[-1], knot.imu, prop.entries[0].t) is not None


def test_a_short_input_gap_is_stepped_over_a_long_silence_ends_the_track(replayed):
    feed, _odoms, estimates = replayed
    prop = Propagator(feed.estimator.robot)
    entries = list(feed.estimator.propagator.entries)[-10:]
    prop.track = prop.anchor(estimates[-1], entries[0].imu, entries[0].t - 0.002)
    for e in entries[:5]:
        prop.push(e.t, e.imu, e.joint, e.contacts)
    e = entries[5]
    prop.push(e.t + 0.3, e.imu, e.joint, e.contacts)  # 0.3 s without input (the window restarts after 0.1 s)
    assert prop.track is not None and prop.track.t == e.t + 0.3 and prop.output().is_finite()
    e = entries[6]
    prop.push(e.t + 1.0, e.imu, e.joint, e.contacts)  # 0.7 s later
    assert prop.track is None and prop.output() is None


def test_a_long_stretch_without_solves_then_a_late_tick():
    """0.4 s propagated without a solve (longer than the window): covariance grows monotonically, the position stays
    within 2 cm of the next solve, which shifts the solver by the whole window, warm from the odometry."""
    feed = SensorFeed()
    est = feed.estimator
    samples = low_states(1.0)
    for t, msg in samples:  # to the first solve
        feed.low_state(msg, t)
        if feed.poll():
            break
    anchor = est.last_good
    odoms = []
    for t, msg in samples:
        feed.low_state(msg, t)
        odoms.append(feed.odometry())
        feed.advance()  # the grid, but no tick
        if odoms[-1].age > 0.4:
            break
    pos_var = [np.trace(o.pose_cov[:3, :3]) for o in odoms]
    rot_var = [np.trace(o.pose_cov[3:, 3:]) for o in odoms]
    assert np.all(np.diff(pos_var) > 0) and np.all(np.diff(rot_var) > 0)
    assert pos_var[0] > np.trace(anchor.pose_cov[:3, :3])
    tick = est.due()
    assert tick is not None and tick.n_created - est._knots_at_last_solve > est.n_intervals
    new = est.solve(tick)
    assert est.counters.late == 1 and est.counters.rebuilt == 0 and est.counters.skipped >= 6
    assert new.solve["iterations"] == est.options.max_iter  # the warm budget, the solver re-used
    propagated = odoms[-1]
    assert 0 <= propagated.t - new.t < 0.002
    assert np.linalg.norm(propagated.position - new.position) < 0.02
    est.rebase(new, tick)
    after = est.propagator.output(est.epoch)
    assert after.t == propagated.t and after.age < 0.002
    # back to the solve's covariance plus at most one sample's growth (the propagated one need not be larger: since
    # the first window has its ground-height term the anchor's height is as certain as the late solve's)
    grown = np.trace(after.pose_cov[:3, :3]) - np.trace(new.pose_cov[:3, :3])
    assert 0.0 <= grown < 1e-3 * np.trace(new.pose_cov[:3, :3])
    assert est.propagator.correction == pytest.approx(np.linalg.norm(propagated.position - after.position))


def _twin_feeds_solved() -> tuple[list[SensorFeed], int, tuple, tuple]:
    """Two identical feeds given 0.35 s of samples (odometry from their first solve on), each then solved on the
    newest window: (feeds, samples given, (tick a, tick b), (solution a, solution b))."""
    feeds = [SensorFeed(), SensorFeed()]
    samples = list(low_states(0.35))
    for t, msg in samples:
        for feed in feeds:
            feed.low_state(msg, t)
            feed.odometry()
            if feed.estimator.propagator.track is None:
                feed.poll()  # to the first solve, anchored synchronously
            else:
                feed.advance()
    est_a, est_b = (f.estimator for f in feeds)
    est_a.last_tick_n = est_b.last_tick_n = -(10**12)  # force a tick on the newest window
    tick_a, tick_b = est_a.due(), est_b.due()
    return feeds, len(samples), (tick_a, tick_b), (est_a.solve(tick_a), est_b.solve(tick_b))


def _feed(feed: SensorFeed, samples: list) -> None:
    """Give the feed the samples, with its odometry and grid advanced after each (no solve)."""
    for t, msg in samples:
        feed.low_state(msg, t)
        feed.odometry()
        feed.advance()


def test_split_re_anchoring_equals_the_synchronous_one():
    """begin (snapshot), samples arriving, run, finish (catch up) == re-anchoring after the samples arrived."""
    feeds, n_samples, (tick_a, tick_b), (sol_a, sol_b) = _twin_feeds_solved()
    est_a, est_b = (f.estimator for f in feeds)
    rebase = est_b.begin_rebase(sol_b, tick_b)
    more = list(low_states(0.4))[n_samples:]
    _feed(feeds[1], more)
    rebase.run()
    half = est_b.propagator.newer_than(rebase.track.last_seq)[: len(more) // 2]
    assert half
    rebase.run(half)  # the node's catch-up outside the lock, then finish() steps the rest
    est_b.finish_rebase(rebase)
    _feed(feeds[0], more)
    est_a.rebase(sol_a, tick_a)
    a, b = est_a.propagator.output(est_a.epoch), est_b.propagator.output(est_b.epoch)
    assert a.t == b.t and a.source == b.source == "propagated"
    np.testing.assert_allclose(a.position, b.position, atol=1e-12)
    np.testing.assert_allclose(a.pose_cov, b.pose_cov, atol=1e-15)


def test_re_anchoring_in_chunks_from_the_sensor_thread_equals_the_synchronous_one():
    """The node's path: begin (snapshot), then run_some(4) after every newer sample until caught up, then finish ==
    re-anchoring synchronously after the same samples."""
    feeds, n_samples, (tick_a, tick_b), (sol_a, sol_b) = _twin_feeds_solved()
    est_a, est_b = (f.estimator for f in feeds)
    rebase = est_b.begin_rebase(sol_b, tick_b)
    more = list(low_states(0.45))[n_samples:]
    chunks = 0
    for i, (t, msg) in enumerate(more):
        feeds[1].low_state(msg, t)
        feeds[1].odometry()
        feeds[1].advance()
        if rebase is not None and i >= 20:  # 20 samples arrived during the solve: several chunks
            chunks += 1
            if rebase.run_some(4):
                est_b.finish_rebase(rebase)
                rebase = None
    assert rebase is None and chunks > 4
    _feed(feeds[0], more)
    est_a.rebase(sol_a, tick_a)
    a, b = est_a.propagator.output(est_a.epoch), est_b.propagator.output(est_b.epoch)
    assert a.t == b.t and est_b.propagator.track.steps == est_a.propagator.track.steps
    np.testing.assert_allclose(a.position, b.position, atol=1e-12)
    np.testing.assert_allclose(a.pose_cov, b.pose_cov, atol=1e-15)


def test_a_solve_stopped_by_its_deadline_holds_the_payload_and_the_odometry_continues():
    # The Python solver: the test shortens the running solver's deadline after the first solve (the compiled solver
    # takes solver.time_budget when it is built; its max_time status is the same)
    feed = SensorFeed(node_config({"solver.backend": "python"}))
    est = feed.estimator
    first = None
    samples = low_states(0.5)
    for t, msg in samples:
        feed.low_state(msg, t)
        feed.odometry()
        out = feed.poll()
        if out:
            first = out[0]
            break
    est.solver.options.max_time = 1e-9  # every later solve misses its deadline before a step
    held = []
    for t, msg in samples:
        feed.low_state(msg, t)
        feed.odometry()
        held += feed.poll()
        if len(held) == 2:
            break
    assert est.counters.deadline_misses == 2 and all(h.solve["status"] == "max_time" for h in held)
    for h in held:
        np.testing.assert_array_equal(h.payload_pi, first.payload_pi)
    track = est.propagator.track
    assert track.t_anchor == pytest.approx(first.t - est.epoch)  # no step taken: the odometry was not re-anchored
    assert track.t > track.t_anchor + 0.09
    assert "solve_rate_hz" in feed.diagnostics().key_values()


def _malloc_in_use() -> int:
    """Bytes of native heap in use (glibc mallinfo2: every arena, Python's and the extensions' allocations)."""
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
        ]

    try:
        fn = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        pytest.skip("needs glibc >= 2.33 (mallinfo2)")
    fn.restype = MallInfo2
    return fn().uordblks + fn().hblkhd


def test_the_per_sample_path_keeps_no_native_memory(monkeypatch):
    """The node's per-message work (convert, buffer, contact detection, odometry step and output) leaves no native
    memory behind once its bounded buffers are full: eigenpy's Quaternion(rotation matrix) leaked 80 B per call on
    C-ordered matrices (~250 B per message here, ~0.5 kB per message in the node with its re-anchorings)."""
    import gc

    from mcoe_ros.estimation import propagation

    monkeypatch.setattr(propagation, "HISTORY", 200)  # bounded buffers fill within the first 0.5 s of samples
    feed = SensorFeed()
    feed.estimator.propagator.horizon = 0.5
    samples = low_states(100.0)
    for t, msg in samples:  # to the first solve (the track exists from then on)
        feed.low_state(msg, t)
        if feed.poll():
            break
    used = {}
    for k, (t, msg) in enumerate(samples):
        feed.low_state(msg, t)
        assert feed.odometry() is not None
        feed.advance()
        if k in (600, 1600):
            gc.collect()
            used[k] = _malloc_in_use()
        if k == 1600:
            break
    per_message = (used[1600] - used[600]) / 1000
    assert abs(per_message) < 40, f"{per_message:.0f} B of native heap kept per message"
