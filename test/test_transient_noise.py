"""Contact-phase dependent process noise (noise.touchdown_transient, noise.settled_joint_velocity, noise.settled_time):
the schedule of loose and tight intervals from a contact sequence, the window's per-interval noise at a shift, the
estimator's wiring into the solver, config validation."""

import numpy as np
import pytest

from mcoe_ros.estimation.builder import transient_knots
from mcoe_ros.estimation.config import DynamicsConfig, EstimatorConfig, NoiseConfig
from mcoe_ros.estimation.estimator import Estimator
from mcoe_ros.estimation.samples import ImuSample, JointSample
from mcoe_ros.estimation.window import GridKnot
from mcoe_ros.io.bag import iter_messages
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import ConfigError, node_config
from mcoe_ros.multibody import compiled
from mcoe_ros.testing.data import SAMPLE_BAG

FEET4 = (True, True, True, True)


def test_transient_knots_follow_the_touch_downs():
    """Knots within `length` knots from a touch-down (a foot held that was not at the knot before) are loose; a
    lift-off, a foot held throughout and knot 0 (no predecessor) start none; overlapping transients merge."""
    held = [FEET4] * 12
    held[2] = held[3] = (True, False, True, True)  # FR lifts off at 2, lands at 4
    held[7] = (True, True, False, True)  # RL lifts off at 7, lands at 8
    held[8] = held[9] = (True, True, True, False)  # ... while RR lifts off at 8 and lands at 10
    expected = np.zeros(12, dtype=bool)
    expected[[4, 5, 6, 8, 9, 10, 11]] = True
    np.testing.assert_array_equal(transient_knots(held, 3), expected)
    np.testing.assert_array_equal(transient_knots(held, 0), np.zeros(12, dtype=bool))
    first = [(False,) * 4] + [FEET4] * 3  # everything lands at knot 1
    np.testing.assert_array_equal(transient_knots(first, 2), [False, True, True, False])
    # ... unless knot 0 is the detector's start (its no-contact flags are no detection)
    assert not transient_knots(first, 2, [False, True, True, True]).any()
    assert not transient_knots([FEET4] * 3, 2).any()  # standing: no touch-down


def _knots(flags):
    return [GridKnot(0.002 * i, None, None, f, np.zeros((4, 3))) for i, f in enumerate(flags)]


def test_interval_noise_of_a_shift_is_the_windows_schedule():
    """The noise of the k newest intervals (a shift) is the tail of the whole window's schedule: an interval's noise
    depends on its own and earlier knots only, so it does not change while the interval stays in the window. The
    tight value goes to the intervals with a foot in the air outside a transient (a gait's swing and stance); an
    interval whose first knot holds every foot keeps the loose one; with touchdown_transient 0 every interval gets
    process_joint_velocity."""
    assert EstimatorConfig().noise.touchdown_transient == 0.05
    cfg = EstimatorConfig(noise=NoiseConfig(touchdown_transient=0.006, settled_joint_velocity=0.0))  # 3 knots of 2 ms
    builder = Estimator(cfg).builder
    assert builder.transient_length == 3
    tight, loose = builder.noise_info, builder.transient_info
    assert np.allclose(tight, cfg.noise.process_velocity**-2.0)
    assert np.allclose(loose[6:], cfg.noise.process_joint_velocity**-2.0) and np.allclose(loose[:6], tight[:6])
    # a trot-like run: two feet in the air at knots 3..12 (touch-down at 13), a foot in the air at 17..24 (at 25)
    flags = [FEET4] * 30
    for i in range(3, 13):
        flags[i] = (False, True, True, False)
    for i in range(17, 25):
        flags[i] = (True, True, True, False)
    knots = _knots(flags)
    full = builder.interval_noise(knots, 29)
    gait = [*range(3, 13), *range(17, 25)]  # a foot in the air, no landing within 3 knots: tight
    assert [i for i, w in enumerate(full) if w is tight] == gait
    assert all(w is loose for i, w in enumerate(full) if i not in gait)  # every foot held, or a landing's transient
    for k in (1, 3, 5, 11):  # a shift by k: the window now ends at knot 29, the new intervals are 29-k..28
        assert builder.interval_noise(knots, k) == full[-k:]
        assert builder.interval_noise(knots[: 20 + 1], k) == full[20 - k : 20]  # an earlier window
    # a landing into a foot still in the air: its transient is loose, the interval after it tight again
    flags[13:17] = [(True, True, True, False)] * 4  # the foot stays up through 24
    transient = builder.interval_noise(_knots(flags), 29)
    assert [i for i in range(12, 25) if transient[i] is loose] == [13, 14, 15]
    knots[13].detector_start = True  # a restart at knot 13: knot 13's contacts are no touch-down ...
    restarted = builder.interval_noise(knots, 29)
    assert restarted[:13] == full[:13] and restarted[13] is loose  # ... but every foot held there still is loose
    every = Estimator(EstimatorConfig(noise=NoiseConfig(touchdown_transient=0.0, settled_joint_velocity=0.0))).builder
    assert every.transient_length == 0
    assert all(w is every.noise_info for w in every.interval_noise(knots, 29))
    assert np.allclose(every.noise_info[6:], cfg.noise.process_joint_velocity**-2.0)


def test_settled_joint_noise_while_every_foot_is_settled():
    """noise.settled_joint_velocity (default): an interval whose first knot has every foot settled (its settled flags:
    down and loaded, or its contacts without them) gets the tight joint value, any other interval
    process_joint_velocity; the base block is the same on both; the schedule of a shift is the tail of the window's;
    0 turns the rule off (touch-down transients off: process_joint_velocity on the others)."""
    assert EstimatorConfig().noise.settled_joint_velocity == 0.002 and EstimatorConfig().noise.settled_time == 0.3
    cfg = EstimatorConfig(noise=NoiseConfig(settled_time=0.0, touchdown_transient=0.0))  # settled (loaded) feet only
    builder = Estimator(cfg).builder
    tight, loose = builder.settled_info, builder.noise_info
    assert np.allclose(tight[6:], 0.002**-2.0) and np.allclose(loose[6:], cfg.noise.process_joint_velocity**-2.0)
    np.testing.assert_array_equal(tight[:6], loose[:6])
    knots = _settling_knots()
    full = builder.interval_noise(knots, 29)
    expected = [4, 9, 15, 20]
    assert [i for i, w in enumerate(full) if w is loose] == expected
    assert all(w is tight for i, w in enumerate(full) if i not in expected)
    for k in (1, 5, 21, 26):
        assert all(a is b for a, b in zip(builder.interval_noise(knots, k), full[-k:], strict=True))
    off = Estimator(
        EstimatorConfig(noise=NoiseConfig(settled_joint_velocity=0.0, settled_time=0.0, touchdown_transient=0.0))
    ).builder
    assert off.settled_info is None
    assert all(w is off.noise_info for w in off.interval_noise(knots, 29))
    assert node_config({"noise.settled_joint_velocity": 0.003}).estimator.noise.settled_joint_velocity == 0.003
    with pytest.raises(ConfigError, match="noise.settled_joint_velocity"):
        node_config({"noise.settled_joint_velocity": -0.001})


def _settling_knots():
    """30 knots of four-foot stance but a foot in the air at knot 4, a foot down but unloaded at 9 (a sway's light
    foot) and at 20 (down for 50 ms), a foot landed 10 ms before knot 15."""
    flags = [FEET4] * 30
    flags[4] = (False, True, True, True)
    knots = _knots(flags)
    knots[9].settled = (True, True, False, True)
    knots[12].settled = FEET4  # explicit flags, all settled
    knots[15].stance_time = (1.0, 0.01, 1.0, 1.0)
    knots[15].settled = (True, False, True, True)
    knots[20].stance_time = (0.05, 1.0, 1.0, 1.0)
    knots[20].settled = (False, True, True, True)
    return knots


@pytest.mark.parametrize(("settled_time", "expected"), [(0.03, [4, 15]), (0.1, [4, 15, 20])])
def test_settled_time_counts_feet_down_long_enough_as_settled(settled_time, expected):
    """noise.settled_time > 0: an interval whose first knot has every foot down for at least that long (its stance
    times; its contacts without them) gets the tight joint value too, loaded or not; a foot in the air or landed
    since less keeps the loose value unless every foot is settled."""
    builder = Estimator(EstimatorConfig(noise=NoiseConfig(settled_time=settled_time, touchdown_transient=0.0))).builder
    full = builder.interval_noise(_settling_knots(), 29)
    assert [i for i, w in enumerate(full) if w is builder.noise_info] == expected
    assert all(w is builder.settled_info for i, w in enumerate(full) if i not in expected)
    assert node_config({"noise.settled_time": 0.1}).estimator.noise.settled_time == 0.1
    with pytest.raises(ConfigError, match="noise.settled_time"):
        node_config({"noise.settled_time": -0.01})


def test_touchdown_transient_is_validated_and_bounded_by_the_window():
    assert node_config({"noise.touchdown_transient": 0.03}).estimator.noise.touchdown_transient == 0.03
    with pytest.raises(ConfigError, match="noise.touchdown_transient"):
        node_config({"noise.touchdown_transient": -0.01})
    # longer than the window allows (the landing of a shift's new interval must still be in the window): shortened
    short = node_config({"noise.touchdown_transient": 0.18, "estimator.window": 0.2, "estimator.tick_period": 0.05})
    assert Estimator(short.estimator).builder.transient_length == 75  # (0.2 - 0.05) / 2 ms
    small = node_config({"estimator.window": 0.05, "estimator.tick_period": 0.02})  # the default 0.05 s, too
    assert Estimator(small.estimator).builder.transient_length == 15


@pytest.mark.parametrize("backend", ["compiled", "python"])
def test_estimator_solver_holds_the_windows_schedule(backend):
    """On the sample bag (touch-downs, shifts, a cold start, settled stance) the solver's intervals carry the noise of
    the window's schedule (touch-down transients and the settled rule), with either backend."""
    if backend == "compiled" and not compiled.available():
        pytest.skip(f"extension not built: {compiled.IMPORT_ERROR}")
    feed = SensorFeed(node_config({"noise.touchdown_transient": 0.03, "solver.backend": backend}))
    est, loose_seen, settled_seen, ticks, t_first = feed.estimator, 0, 0, 0, None
    for _topic, t_ns, msg in iter_messages(SAMPLE_BAG, ["low_state"]):
        feed.low_state(msg, t_ns * 1e-9)
        polled = feed.poll()
        if t_first is None and est.window.knots:
            t_first = est.window.knots[0].t
        if not polled:
            continue
        ticks += 1
        knots = list(est.window.knots)
        assert sum(kn.detector_start for kn in knots) == (knots[0].t == t_first)  # the grid's first knot only
        expected = est.builder.interval_noise(knots, len(knots) - 1)
        problem = est.solver.problem
        for k, w in enumerate(expected):
            if backend == "compiled":
                got = est.solver._cpp.knot_noise_info(k)
            else:
                got = np.diag(problem.knots[k].W_base)
            np.testing.assert_array_equal(got, w)
        loose_seen += sum(w is est.builder.transient_info for w in expected)
        settled_seen += sum(w is est.builder.settled_info for w in expected)
        if ticks >= 4 and loose_seen and settled_seen:
            break
    assert ticks >= 4 and loose_seen > 0 and settled_seen > 0


def test_the_detectors_start_knot_takes_the_next_knots_stance_feet():
    """The detector starts with no contact, which says nothing about the feet: the start knot's interval takes the
    next knot's stance feet with their impulse (no flight interval) and the next knot has no landing, in a new
    problem and in a shift; a real landing later gets its impulse (with the impulse landing model,
    dynamics.landing_damping 0; the default lands it over time, test_landing_damping.py)."""
    builder = Estimator(EstimatorConfig(dynamics=DynamicsConfig(landing_damping=0.0))).builder
    flags = [(False,) * 4] + [FEET4] * 5
    flags[3] = (True, False, True, True)  # FR lifts off at 3, lands at 4
    knots = _knots(flags)
    knots[0].detector_start = True
    feet = tuple(builder.robot.foot_names)
    running, _ = builder.phase_models(knots, None)
    assert [bool(m.impulse) for m in running] == [True, False, False, False, True]
    assert tuple(running[0].contacts) == tuple(running[0].impulse) == feet and len(running[3].contacts) == 3
    joint, imu = JointSample(0.0, *np.zeros((3, 12))), ImuSample(0.0, np.r_[1.0, 0, 0, 0], np.zeros(3), np.zeros(3))
    for kn in knots:
        kn.joint, kn.imu = joint, imu
    running, _, _, _ = builder.shift_arguments(knots[:3], 1)  # the shift whose knot before is the start knot
    assert not running[0].impulse and tuple(running[0].contacts) == feet
    knots[0].detector_start = False  # a real no-contact knot before: a flight interval, then the landing's impulse
    running, _ = builder.phase_models(knots, None)
    assert not running[0].contacts and running[1].impulse
