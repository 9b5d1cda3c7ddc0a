"""Actuator-parameter guards (issue 13): excitation measure, freeze anchor, bounds, and the estimator using them."""

import numpy as np
import pytest

from mcoe_ros.estimation.excitation import ActuatorGuard, anchored, horizontal_excitation, joint_excitation
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


class _ImuKnot:
    def __init__(self, acc):
        self.imu = type("I", (), {"acc": np.asarray(acc, dtype=float)})()


def test_horizontal_excitation_is_the_rms_variation_of_the_smoothed_specific_force():
    """Constant specific force (any tilt): 0; a horizontal sinusoid of amplitude A: A/√2 (the 20 ms average keeps a
    1 Hz motion); white noise: reduced by the average; fewer knots than the average: 0."""
    t = np.arange(500) * 0.002
    tilted = [_ImuKnot([0.5, -0.3, 9.7]) for _ in t]
    assert horizontal_excitation(tilted) == pytest.approx(0.0, abs=1e-12)
    sway = [_ImuKnot([0.4 * np.sin(2 * np.pi * s), 0.1, 9.8]) for s in t]
    assert horizontal_excitation(sway) == pytest.approx(0.4 / np.sqrt(2), rel=1e-2)
    rng = np.random.default_rng(0)
    noise = [_ImuKnot(np.r_[0.04 * rng.standard_normal(2), 9.8]) for _ in t]
    assert horizontal_excitation(noise) < 0.04 * np.sqrt(2) / np.sqrt(10) * 1.3
    assert horizontal_excitation(sway[:9]) == 0.0


@pytest.mark.parametrize("backend", ["python", "auto"])
def test_unexcited_windows_keep_the_vertical_first_moment(backend):
    """A threshold no window reaches freezes h_z (theta[3], exp-eigval) at the prior on every solve; without the gate
    the same data move it."""
    frozen = _run({"payload.min_vertical_excitation": 10.0, "solver.backend": backend})
    gate = frozen.estimator.moment_gate
    assert gate.frozen == gate.solves > 0
    h_z0 = frozen.estimator.prior_theta[3]
    assert frozen.estimator.last_good.theta[3] == pytest.approx(h_z0, abs=1e-4)
    assert frozen.diagnostics().key_values()["vertical_moment_frozen_solves"] == f"{gate.solves} of {gate.solves}"
    free = _run({"payload.min_vertical_excitation": 0.0, "solver.backend": backend})
    assert free.estimator.moment_gate is None
    assert abs(free.estimator.last_good.theta[3] - h_z0) > 1e-3


def test_the_vertical_moment_gate_needs_h_z_as_a_coordinate():
    with pytest.raises(ValueError, match="payload.min_vertical_excitation"):
        SensorFeed(node_config({"payload.parametrization": "log-cholesky"}))
    assert SensorFeed(node_config({"payload.parametrization": "log-cholesky", "payload.min_vertical_excitation": 0}))


@pytest.fixture(scope="module")
def stand_bag(tmp_path_factory):
    """2 s of the realism suite's stand: 3 kg payload 5 cm above the trunk origin, Go1-like noise, biases, actuator
    losses, soft round feet on a soft floor; seed 7; the IMU orientation as before session 25 (the true one with
    white noise: the numbers of docs/realism.md session 14; with the attitude filter the ungated drag is 4 cm)."""
    from mcoe_ros.sim.cli import main as sim_main

    out = str(tmp_path_factory.mktemp("stand") / "bag")
    argv = ["--scenario", "stand:2", "--payload-mass", "3", "--payload-com", "0", "0", "0.05"]
    assert sim_main([*argv, "--realistic", "--attitude-filter-gain", "0", "--seed", "7", "--out", out]) == 0
    return out


def test_standing_still_keeps_the_payload_com_near_the_trunk(stand_bag):
    """Recorded stand: without the gate the reported torques' noise drags the payload's CoM tens of centimetres below
    the trunk (errors in variables, docs/realism.md session 14); with it the CoM stays at the prior's height (the
    trunk origin, 5 cm below the truth) and the mass is unchanged."""
    from mcoe_ros.io.bag import iter_messages
    from mcoe_ros.testing.datasets import replay_with_truth

    truth = next(msg for _, _, msg in iter_messages(stand_bag, ["ground_truth/payload"]))
    c_true = np.array([truth.inertia.com.x, truth.inertia.com.y, truth.inertia.com.z])

    def com_error(overrides):
        good, _, feed = replay_with_truth(stand_bag, overrides)
        pi = good[-1].payload_pi
        return pi[1:4] / pi[0] - c_true, pi[0], feed

    gated, m_gated, feed = com_error({})
    free, m_free, _ = com_error({"payload.min_vertical_excitation": 0.0})
    gate = feed.estimator.moment_gate
    assert gate.frozen == gate.solves > 0  # standing: every window unexcited
    assert abs(free[2]) > 0.12  # 0.147 m with the errors-in-variables default (frozen weight: > 0.15)
    assert abs(gated[2]) < 0.06 and np.linalg.norm(gated[:2]) < 0.01
    assert m_gated == pytest.approx(3.0, rel=0.02)
