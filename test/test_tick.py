"""Tick scheduling of issue 16: a cold start spread over ticks (``estimator.COLD_ITERATIONS_PER_TICK``), on the
committed sample bag through the replay's feed loop."""

import os

from mcoe_ros.estimation import estimator
from mcoe_ros.io.bag import iter_messages
from mcoe_ros.io.feed import SensorFeed

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mcoe_ros", "data", "go1_sample")


def test_a_cold_start_spread_over_ticks_publishes_once_its_budget_is_spent(monkeypatch):
    monkeypatch.setattr(estimator, "COLD_ITERATIONS_PER_TICK", 2)
    feed = SensorFeed()
    est = feed.estimator
    published, t0 = [], None
    for _topic, t_ns, msg in iter_messages(SAMPLE, ["low_state"]):
        t0 = t_ns if t0 is None else t0
        if (t_ns - t0) * 1e-9 > 0.6:
            break
        feed.low_state(msg, t_ns * 1e-9)
        out = feed.poll()
        if out:
            published.append((est.counters.ticks, out[0]))
        elif est.counters.ticks and est.counters.ticks <= est.counters.warmup:
            assert est.propagator.track is None and est.last_good is None  # nothing out while converging
    c = est.counters
    cold = est.cold_iterations
    warm_up = -(-cold // 2)  # ticks of 2 iterations
    assert c.warmup == warm_up - 1 and c.held == 0
    assert c.iterations[:warm_up] == [2] * warm_up  # never more than 2 per tick, the whole budget in the end
    assert published[0][0] == warm_up and len(published) == c.ticks - warm_up + 1
    assert published[0][1].solve["iterations"] == 2 and published[0][1].is_finite()
    assert all(n == est.options.max_iter for n in c.iterations[warm_up:])  # then warm real-time iterations
    assert str(feed.diagnostics().key_values()["warmup_ticks"]) == str(warm_up - 1)


def test_by_default_a_cold_start_runs_its_budget_in_one_tick():
    assert estimator.COLD_ITERATIONS_PER_TICK is None
    feed = SensorFeed()
    est = feed.estimator
    for _topic, t_ns, msg in iter_messages(SAMPLE, ["low_state"]):
        feed.low_state(msg, t_ns * 1e-9)
        if feed.poll():
            break
    assert est.counters.ticks == 1 and est.counters.warmup == 0
    assert est.counters.iterations == [est.cold_iterations]
