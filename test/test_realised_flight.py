"""noise.realised_flight_time: the realised accelerometer in a flight and for a while after its landing
(docs/localisation.md, session 21): the window's time since the last flight (GridKnot.since_flight) and the
builder's rule."""

import numpy as np
import pytest
from test_window import _feed, _ScriptedForces

from mcoe_ros.estimation.config import EstimatorConfig, NoiseConfig
from mcoe_ros.estimation.estimator import Estimator
from mcoe_ros.estimation.window import GridKnot, SlidingWindow
from mcoe_ros.io.params import ConfigError, node_config
from mcoe_ros.multibody.contact import ContactConfig
from mcoe_ros.multibody.robot import RobotModel


@pytest.fixture(scope="module")
def robot():
    return RobotModel()


def test_the_window_counts_the_time_since_the_last_flight(robot):
    """Four feet loaded from the start, every foot in the air in [0.04, 0.08) s, down again after: since_flight is
    inf before the flight (also on the detector's start knots, whose flags are empty until a contact is confirmed:
    no flight), 0 on the knots created in the flight (those a backdated touch-down relabels too) and the time since
    the last of them after the landing; a restart forgets it (the replayed knots count as the first time)."""

    def fz(t):
        return np.full(4, 0.0 if 0.04 - 1e-9 <= t < 0.08 - 1e-9 else 60.0)

    det = _ScriptedForces(robot, ContactConfig(force_on=8.0, force_off=4.0, min_duration=0.004), fz)
    win = SlidingWindow(det, 0.002, 100, 0.1)
    for i in range(70):
        _feed(win, 0.002 * i)
        win.advance()
    knots = list(win.knots)
    assert not any(knots[0].contacts) and knots[0].since_flight == np.inf  # the start: no flight
    airborne = [k.t for k in knots if not any(k.contacts) and k.t > 0.02]
    assert airborne and min(airborne) == pytest.approx(0.04, abs=0.005) and max(airborne) < 0.08
    # the knots created in the air (the landing's backdated ones too: relabelled after they were made) count 0
    last = max(k.t for k in knots if k.since_flight == 0.0)
    assert max(airborne) <= last < 0.08 + 0.004 + 1e-9
    for k in knots:
        if k.t < min(airborne) - 1e-9:
            assert k.since_flight == np.inf, k.t
        elif k.t <= last + 1e-9:
            assert k.since_flight == 0.0, k.t
        else:
            assert any(k.contacts) and k.since_flight == pytest.approx(k.t - last), k.t
    det.t = 0.0
    win.restart()
    win.advance()
    again = {round(k.t, 6): k.since_flight for k in win.knots}  # the same samples again, from the grid's start
    assert again == {round(k.t, 6): k.since_flight for k in knots if round(k.t, 6) in again}
    assert again[round(knots[0].t, 6)] == np.inf


def test_the_builder_couples_a_flight_and_the_time_after_its_landing():
    """With noise.realised_flight_time T > 0 an interval whose first knot is less than T after a flight (or in it)
    has the realised accelerometer, whatever its feet; the standing rule still applies; 0 leaves the models as
    before (the default is 0.05 s, session 21)."""
    assert EstimatorConfig().noise.realised_flight_time == 0.05
    feet = [(False,) * 4] * 3 + [(False, False, True, True)] * 4 + [(True,) * 4] * 5
    since = [0.0] * 3 + [0.002 * (i + 1) for i in range(9)]  # the flight's last knot at index 2
    knots = [
        GridKnot(0.002 * i, None, None, f, np.zeros((4, 3)), stance_time=tuple(0.002 * i if c else 0.0 for c in f))
        for i, f in enumerate(feet)
    ]
    for k, s in zip(knots, since, strict=True):
        k.since_flight = s
    cfg = NoiseConfig(accelerometer_realised=True, realised_flight_time=0.01)
    running, _ = Estimator(EstimatorConfig(noise=cfg)).builder.phase_models(knots, None)
    assert [i for i, m in enumerate(running) if m.noise_coupled] == [0, 1, 2, 3, 4, 5, 6]  # since_flight < 0.01
    off_cfg = NoiseConfig(accelerometer_realised=True, realised_flight_time=0.0)
    off, _ = Estimator(EstimatorConfig(noise=off_cfg)).builder.phase_models(knots, None)
    assert not any(m.noise_coupled for m in off)
    for m, r in zip(running, off, strict=True):  # same contact set and measurements, only the accelerometer
        assert (m.contacts, m.impulse, len(m.measurements)) == (r.contacts, r.impulse, len(r.measurements))
    assert node_config({"noise.realised_flight_time": 0.05}).estimator.noise.realised_flight_time == 0.05
    with pytest.raises(ConfigError, match="noise.realised_flight_time"):
        node_config({"noise.realised_flight_time": -0.1})
