"""Actuator-parameter guards (issue 13): excitation measure, freeze anchor, bounds, and the estimator using them."""

import numpy as np
import pytest

from mcoe_ros.estimation.excitation import ActuatorGuard, anchored, joint_excitation
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import node_config
from mcoe_ros.ocp import numdiff
from mcoe_ros.ocp.problem import ArrivalPrior
from mcoe_ros.ocp.state import StateVector
from mcoe_ros.testing.data import first_estimates


class _Knot:
    def __init__(self, dq):
        self.joint = type("J", (), {"dq": np.asarray(dq, dtype=float)})()


def test_joint_excitation_is_the_rms_joint_velocity():
    knots = [_Knot([0.3, -0.3, 0.3]), _Knot([-0.3, 0.3, -0.3])]
    assert joint_excitation(knots) == pytest.approx(0.3)
    assert joint_excitation([]) == 0.0


def test_anchor_adds_a_quadratic_on_the_chosen_parameters_only():
    """cost' − cost = ½ w ‖θ_i − a_i‖² + const; its gradient (the prior's linearisation) matches finite differences."""
    rng = np.random.default_rng(3)
    ndx, nth = 3, 5
    a = rng.normal(size=(ndx + nth, ndx + nth))
    prior = ArrivalPrior(rng.normal(size=ndx), rng.normal(size=nth), a @ a.T + np.eye(ndx + nth), rng.normal(size=8))
    anchor, idx, w = rng.normal(size=nth), np.array([1, 3]), 7.0
    before = (prior.hessian.copy(), prior.gradient.copy())
    new = anchored(prior, idx, anchor, w)
    state, x0 = StateVector(ndx), rng.normal(size=ndx)

    def extra(theta):
        return new.cost(state, x0, theta) - prior.cost(state, x0, theta)

    th1, th2 = rng.normal(size=nth), rng.normal(size=nth)
    expect = 0.5 * w * (np.sum((th1[idx] - anchor[idx]) ** 2) - np.sum((th2[idx] - anchor[idx]) ** 2))
    assert extra(th1) - extra(th2) == pytest.approx(expect, rel=1e-10)
    _, grad, hess = new.linearize(state, x0, th1)
    fd = numdiff.jacobian(lambda th: np.array([new.cost(state, x0, th)]), th1)[0]
    assert numdiff.relative_error(grad[ndx:], fd) < 1e-7
    assert np.allclose(hess - prior.linearize(state, x0, th1)[2], np.diag(np.r_[np.zeros(ndx), [0, w, 0, w, 0]]))
    assert np.array_equal(prior.hessian, before[0]) and np.array_equal(prior.gradient, before[1])  # not modified


def _run(overrides: dict, n_estimates: int = 5) -> SensorFeed:
    over = {"actuator.enabled": True, "estimator.window": 0.06, "estimator.tick_period": 0.02}
    feed = SensorFeed(node_config({**over, **overrides}))
    out = first_estimates(feed, n_estimates)
    assert out and all(e.is_finite() for e in out)
    return feed


@pytest.mark.parametrize("backend", ["python", "auto"])  # auto: the compiled solver when the extension is built
def test_unexcited_windows_keep_the_actuator_parameters_at_their_prior(backend):
    """An excitation threshold no window reaches freezes every solve: the parameters stay at the prior medians;
    without the gate the same data move them."""
    frozen = _run({"actuator.min_excitation": 1e3, "solver.backend": backend})
    guard = frozen.estimator.actuator_guard
    assert guard.frozen == guard.solves > 0
    est = frozen.estimator.last_good
    prior = np.repeat([1.0, 0.2, 0.01], 3)
    np.testing.assert_allclose(est.actuator[0], prior, rtol=1e-3)
    assert frozen.diagnostics().key_values()["actuator_frozen_solves"] == f"{guard.solves} of {guard.solves}"
    free = _run({"actuator.min_excitation": 0.0, "solver.backend": backend})
    assert free.estimator.actuator_guard.frozen == 0
    assert np.max(np.abs(np.log(free.estimator.last_good.actuator[0] / prior))) > 1e-2


def test_actuator_parameters_stay_below_their_bounds():
    """A bound below the prior median clips every solve (result, published value and the solver's warm start)."""
    feed = _run({"actuator.max_coulomb": 0.05, "actuator.min_excitation": 0.0})
    guard = feed.estimator.actuator_guard
    assert guard.clipped > 0
    coulomb = feed.estimator.last_good.actuator[0][3:6]
    assert np.all(coulomb <= 0.05 * (1 + 1e-12))
    assert np.all(np.exp(feed.estimator.solver.theta[13:16]) <= 0.05 * (1 + 1e-12))


def test_guard_bound_leaves_results_inside_the_bounds_untouched():
    guard = ActuatorGuard(np.array([0, 1]), np.array([2.0, 3.0]), 0.1)

    class Result:
        theta = np.log(np.array([1.0, 2.0, 5.0]))

    res = Result()
    assert guard.bound(None, res) is res and guard.clipped == 0


def test_imu_bias_prior_is_carried_from_window_to_window():
    """The bias states keep a memory longer than one window: the arrival prior after several shifts holds more
    information on them (marginalised knots) than the initial prior, less the random-walk growth."""
    feed = _run({"actuator.enabled": False, "imu_bias.enabled": True}, n_estimates=6)
    est = feed.estimator
    idx = est.parameters.bias_indices
    prior = est.solver.problem.prior
    ndx = len(prior.hessian) - len(prior.theta_bar)
    cov = np.linalg.inv(prior.hessian)[ndx + idx][:, ndx + idx]
    initial = 1.0 / np.diag(est.parameters.prior_info)[idx]
    assert np.all(np.diag(cov) < initial)
