"""noise.stance_foot_height: the flat-ground pseudo-measurement of each settled stance foot at every knot
(:class:`mcoe_ros.multibody.measurements.ContactHeight`; docs/localisation.md, session 21). The measurement's
finite-difference and C++ = Python tests are in test_measurement.py and test_compiled.py; here the builder's rule
and the estimator on the sample bag with both backends."""

import numpy as np
import pytest

from mcoe_ros.estimation.config import DynamicsConfig, EstimatorConfig, NoiseConfig
from mcoe_ros.estimation.estimator import Estimator
from mcoe_ros.estimation.window import GridKnot
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import ConfigError, node_config
from mcoe_ros.multibody import compiled
from mcoe_ros.multibody.measurements import ContactHeight, ContactVelocity
from mcoe_ros.testing.data import first_estimates


def _knots() -> list[GridKnot]:
    """Three knots: four feet down, FR not yet settled (its zero-velocity pseudo-measurement is off), then a flight."""
    feet = [(True,) * 4, (True,) * 4, (False,) * 4]
    settled = [(True, False, True, True), (True,) * 4, (False,) * 4]
    return [
        GridKnot(0.002 * i, None, None, f, np.zeros((4, 3)), settled=s, stance_time=(0.2,) * 4)
        for i, (f, s) in enumerate(zip(feet, settled, strict=True))
    ]


def test_the_height_goes_with_the_zero_velocity_pseudo_measurement():
    """Each foot with the zero-velocity pseudo-measurement gets one ContactHeight row after it, on the ground plane
    of dynamics.ground_height with σ = noise.stance_foot_height; 0 (the default) adds none."""
    assert EstimatorConfig().noise.stance_foot_height == 0.0
    cfg = EstimatorConfig(noise=NoiseConfig(stance_foot_height=0.02), dynamics=DynamicsConfig(ground_height=0.05))
    running, terminal = Estimator(cfg).builder.phase_models(_knots(), None)
    for model, n in zip([*running, terminal], (3, 4, 0), strict=True):
        heights = [m for m in model.measurements if isinstance(m, ContactHeight)]
        quiet = [m for m in model.measurements if isinstance(m, ContactVelocity)]
        assert len(heights) == len(quiet) == n
        assert [h.frame_id for h in heights] == [q.frame_id for q in quiet]
        assert all(h.ground_height == 0.05 and h.W[0, 0] == pytest.approx(1 / 0.02) for h in heights)
    off, _ = Estimator(EstimatorConfig()).builder.phase_models(_knots(), None)
    assert not any(isinstance(m, ContactHeight) for model in off for m in model.measurements)
    assert node_config({"noise.stance_foot_height": 0.01}).estimator.noise.stance_foot_height == 0.01
    with pytest.raises(ConfigError, match="noise.stance_foot_height"):
        node_config({"noise.stance_foot_height": -0.01})


def test_estimator_with_the_stance_foot_height_runs_both_solvers():
    """On the sample bag the option changes the estimate (not a no-op) and the compiled solver gives the Python
    reference's payload and base position."""
    over = {"noise.stance_foot_height": 0.01, "estimator.window": 0.06, "estimator.tick_period": 0.02}
    feed = SensorFeed(node_config({**over, "solver.backend": "python"}))
    out = first_estimates(feed, 3)
    knots = feed.estimator.solver.problem.knots
    assert any(isinstance(m, ContactHeight) for k in knots for m in k.model.measurements)
    assert all(e.is_finite() for e in out)
    plain = first_estimates(
        SensorFeed(node_config({**over, "noise.stance_foot_height": 0.0, "solver.backend": "python"})), 3
    )
    assert abs(plain[-1].position[2] - out[-1].position[2]) > 1e-6
    if not compiled.available():
        return
    assert compiled.unsupported(knots[0].model) is None
    cfeed = SensorFeed(node_config(over))
    cout = first_estimates(cfeed, 3)
    assert type(cfeed.estimator.solver).__name__ == "CompiledSolver"
    for e, ce in zip(out, cout, strict=True):
        np.testing.assert_allclose(ce.payload_pi, e.payload_pi, rtol=1e-5, atol=1e-8)
        np.testing.assert_allclose(ce.position, e.position, atol=1e-7)
