"""A landing over time (``dynamics.landing_damping``): instead of the impulse map at a touch-down, a landing foot's
rigid contact damps its velocity (J a = -γ - kd J v) for its first ``dynamics.landing_time`` of stance. The builder's
schedule of damped contacts and impulses, the configuration, and the effect on a recorded pronk (docs/realism.md,
session 18). The law and its derivatives: test_dynamics.py (FD), test_compiled.py (C++ = Python)."""

from dataclasses import replace

import numpy as np
import pytest

from mcoe_ros.estimation.config import DynamicsConfig, EstimatorConfig
from mcoe_ros.estimation.estimator import Estimator
from mcoe_ros.estimation.window import GridKnot
from mcoe_ros.io.params import ConfigError, node_config

FEET4 = (True, True, True, True)


def _knots(flags, dt=0.002):
    """Knots with the contact flags and their stance times (s since each foot's touch-down; a foot down at knot 0 has
    been down for 1 s)."""
    out, since = [], [-1.0 if f else None for f in flags[0]]
    for i, f in enumerate(flags):
        t = dt * i
        since = [(s if s is not None else t) if c else None for c, s in zip(f, since, strict=True)]
        stance = tuple(t - s if s is not None else 0.0 for s in since)
        out.append(GridKnot(t, None, None, f, np.zeros((4, 3)), stance_time=stance))
    return out


def test_a_landing_foot_is_damped_for_the_landing_time_without_an_impulse():
    """FR lifts off at knot 3 and lands at knot 5: with the damping its contact is damped on the intervals from knots
    5, 6, 7 (stance 0, 2, 4 ms < 6 ms) and no interval has an impulse; the detector's start knot keeps the impulse
    that projects the feet it starts on. Without the damping (landing_damping 0) the landing has its impulse,
    nothing is damped."""
    flags = [FEET4] * 12
    flags[3] = flags[4] = (True, False, True, True)
    damped_cfg = EstimatorConfig(dynamics=DynamicsConfig(landing_damping=25.0, landing_time=0.006))
    builder = Estimator(damped_cfg).builder
    running, terminal = builder.phase_models(_knots(flags), None)
    fr = builder.robot.foot_names[1]
    assert [i for i, m in enumerate(running) if m.dynamics.damped] == [5, 6, 7]
    assert all(m.dynamics.damped == (fr,) and m.dynamics.kd == 25.0 for m in running[5:8])
    assert not any(m.impulse for m in running) and not terminal.dynamics.damped
    knots = _knots(flags)  # the same stance, begun at the detector's start: no landing, nothing damped
    knots = [replace(k, landed=(False,) * 4) for k in knots]
    assert not any(m.dynamics.damped or m.impulse for m in builder.phase_models(knots, None)[0])
    start = _knots([(False,) * 4] + flags[1:])
    start[0].detector_start = True
    running, _ = builder.phase_models(start, None)
    assert tuple(running[0].impulse) == tuple(builder.robot.foot_names)  # the start knot's projection
    assert [i for i, m in enumerate(running) if m.impulse] == [0]
    impulse = Estimator(EstimatorConfig(dynamics=DynamicsConfig(landing_damping=0.0))).builder
    running, _ = impulse.phase_models(_knots(flags), None)
    assert [i for i, m in enumerate(running) if m.impulse] == [5]
    assert not any(m.dynamics.damped for m in running) and running[5].dynamics.kd == 0.0


def test_landing_parameters_are_checked():
    with pytest.raises(ValueError, match="landing_damping"):
        DynamicsConfig(landing_damping=-1.0)
    with pytest.raises(ValueError, match="landing_time"):
        DynamicsConfig(landing_damping=25.0, landing_time=0.0)
    for name, value in (("dynamics.landing_damping", -1.0), ("dynamics.landing_time", 0.0)):
        with pytest.raises(ConfigError, match=name.replace(".", r"\.")):
            node_config({name: value})
    assert node_config({"dynamics.landing_damping": 25.0}).estimator.dynamics.landing_damping == 25.0
    # k_d dt > 1: the damped foot's velocity would oscillate (semi-implicit Euler multiplies it by 1 - k_d dt)
    with pytest.raises(ConfigError, match=r"'dynamics\.landing_damping'.*1 / estimator\.dt"):
        node_config({"dynamics.landing_damping": 600.0})
    assert node_config({"dynamics.landing_damping": 600.0, "estimator.dt": 0.001}).estimator.dynamics.landing_damping


@pytest.fixture(scope="module")
def pronk(tmp_path_factory):
    """A recorded pronk (MuJoCo, soft round feet, the realistic profile), 5 kg off-centre payload, seed 7: the
    realism suite's pronk_5kg-off_real_3s without the payload's rotated inertia."""
    from mcoe_ros.sim.cli import main as sim_main

    out = str(tmp_path_factory.mktemp("pronk") / "bag")
    payload = ["--payload-mass", "5", "--payload-com", "0.06", "-0.03", "0.06"]
    assert sim_main(["--scenario", "pronk:3", *payload, "--realistic", "--seed", "7", "--out", out]) == 0
    return out


def _errors(bag: str, overrides: dict) -> tuple[float, float]:
    """(payload CoM error mm, RMS base position error cm after aligning the first estimate) of a replay."""
    from mcoe_ros.testing.datasets import load_bag, replay_with_truth

    _, pi_true = load_bag(bag)
    good, truth, _ = replay_with_truth(bag, overrides)
    pi = good[-1].payload_pi
    com = 1e3 * float(np.linalg.norm(pi[1:4] / pi[0] - pi_true[1:4] / pi_true[0]))
    pairs = [(e.position, truth[round(e.t, 3)]) for e in good if round(e.t, 3) in truth]
    (pe0, p0) = pairs[0]
    err = [np.linalg.norm((pe - pe0) - (p - p0)) for pe, p in pairs]
    return com, 1e2 * float(np.sqrt(np.mean(np.square(err))))


def test_a_landing_over_time_beats_the_impulse_on_a_recorded_pronk(pronk):
    """The pronk's landings (soft feet that decelerate over ~10 ms, PD-controlled legs) against the rigid impulse that
    stops every landing foot at once: with the default landing damping (75 1/s for 50 ms) the payload CoM error and
    the base position error are both lower (realism suite, seed 7, session 18: CoM 21.4 -> 7.8 mm, ATE 4.1 -> 3.0
    cm). Fails with the impulse as the default."""
    assert EstimatorConfig().dynamics.landing_damping > 0.0
    com_impulse, ate_impulse = _errors(pronk, {"dynamics.landing_damping": 0.0})
    com, ate = _errors(pronk, {})
    print(f"impulse: CoM {com_impulse:.1f} mm, ATE {ate_impulse:.2f} cm; damped: CoM {com:.1f} mm, ATE {ate:.2f} cm")
    assert com < 0.7 * com_impulse and com < 10.0, (com, com_impulse)
    assert ate < 0.9 * ate_impulse, (ate, ate_impulse)
