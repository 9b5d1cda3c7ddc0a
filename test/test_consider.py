"""Consider analysis of the unestimated IMU biases and the orientation reading's offset (issue 14, calibrated
uncertainty): the solver's sensitivity S = ∂(x̂_N, θ̂)/∂b of the converged estimate to constant offsets b of the gyro
and accelerometer readings and a rotation offset R_meas exp(δ) of the orientation reading, against
finite differences of re-solved windows (single window and across a marginalising shift), on Go1 windows of the
estimator's own model (exact dynamics, velocity process noise, noise-free readings: at zero residual the
Gauss–Newton Hessian the analysis uses is the exact one; with noisy readings the two differ by the residual curvature)
and a parameter prior of unit information (as the estimator always has: without one the weakly observed inertia
directions amplify the marginal prior's second-order terms)."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.multibody.imu import rotation_quaternion
from mcoe_ros.multibody.interval import IMU_CONSIDER, imu_bias_jacobian
from mcoe_ros.multibody.measurements import (
    ImuAngularVelocity,
    ImuOrientation,
    ImuSpecificForce,
    default_measurements,
)
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.ocp.problem import ArrivalPrior
from mcoe_ros.ocp.solver import MCOESolver, SolverOptions
from mcoe_ros.testing.go1 import go1_velocity_window

OPTIONS = SolverOptions(max_iter=200, tol_stop=1e-14, tol_gap=1e-12)
NB = 3 * len(IMU_CONSIDER)  #: gyro bias, accelerometer bias, orientation offset


def _offset(model, z: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A knot's readings z (nz,) with the consider parameters b (9,): the biases added to the gyro and accelerometer
    slices, the orientation (w, x, y, z) turned to R exp(δ)."""
    out = z.copy()
    for meas, zs in zip(model.measurements, model.z_slices, strict=True):
        if isinstance(meas, ImuAngularVelocity):
            out[zs] += b[0:3]
        elif isinstance(meas, ImuSpecificForce):
            out[zs] += b[3:6]
        elif isinstance(meas, ImuOrientation):
            w, x, y, zz = z[zs]
            q = rotation_quaternion(pin.Quaternion(w, x, y, zz).toRotationMatrix() @ pin.exp3(b[6:9]))
            out[zs] = [q.w, q.x, q.y, q.z]
    return out


def _estimate(solver) -> tuple[np.ndarray, np.ndarray]:
    return solver.xs[-1].copy(), solver.theta.copy()


def _fd_sensitivity(estimate, state, delta: float = 1e-4) -> np.ndarray:
    """Central differences in each bias of ``estimate(b)`` = the converged (x_N, θ) with readings offset by b."""
    cols = []
    for i in range(NB):
        ends = []
        for sign in (1.0, -1.0):
            b = np.zeros(NB)
            b[i] = sign * delta
            ends.append(estimate(b))
        dx = state.difference(ends[1][0], ends[0][0]) / (2 * delta)
        cols.append(np.r_[dx, (ends[0][1] - ends[1][1]) / (2 * delta)])
    return np.column_stack(cols)


def test_imu_bias_jacobian_rows():
    robot = RobotModel()
    meas = default_measurements(robot)
    slices, nr = [], 0
    for m in meas:
        slices.append(slice(nr, nr + m.nr))
        nr += m.nr
    jac = imu_bias_jacobian(meas, slices, nr)
    gyro = next(s for m, s in zip(meas, slices, strict=True) if isinstance(m, ImuAngularVelocity))
    acc = next(s for m, s in zip(meas, slices, strict=True) if isinstance(m, ImuSpecificForce))
    w_acc = next(m.W for m in meas if isinstance(m, ImuSpecificForce))
    orient = next(s for m, s in zip(meas, slices, strict=True) if isinstance(m, ImuOrientation))
    w_orient = next(m.W for m in meas if isinstance(m, ImuOrientation))
    np.testing.assert_array_equal(jac[acc, 3:6], w_acc)
    np.testing.assert_array_equal(jac[orient, 6:9], w_orient)
    nonzero = [np.count_nonzero(jac[r, c]) for r, c in ((gyro, slice(0, 3)), (acc, slice(3, 6)), (orient, slice(6, 9)))]
    assert np.count_nonzero(jac) == sum(nonzero)
    assert imu_bias_jacobian(meas[:2], slices[:2], slices[1].stop) is None  # encoders only


@pytest.mark.parametrize("realised", [False, True], ids=["model-accelerometer", "realised-accelerometer"])
def test_consider_sensitivity_equals_finite_differences_of_the_solution(realised):
    """Also with the accelerometer of the realised acceleration, whose residual depends on the process noise."""
    n = 12
    prob0, xs_true, pi_true = go1_velocity_window(n, seed=3, noise=0.0, info_theta=1.0, realised=realised)
    assert all(k.coupled for k in prob0.knots[:-1]) == realised
    zs = [k.data.z.copy() for k in prob0.knots]
    model = prob0.knots[0].model
    theta0 = prob0.param.theta(pi_true)

    def build():
        prob, _, _ = go1_velocity_window(n, seed=3, noise=0.0, info_theta=1.0, realised=realised)
        return MCOESolver(prob, OPTIONS)

    def solve(solver, b):
        for k, z in enumerate(zs):
            solver.problem.set_knot(k, z=_offset(model, z, b))
        res = solver.solve(xs_true, None, theta0)
        assert res.converged
        return _estimate(solver)

    solver = build()
    solve(solver, np.zeros(NB))
    assert solver.problem.n_consider == NB
    solver.terminal_covariance()
    sens = solver.consider_sensitivity
    ref = _fd_sensitivity(lambda b: solve(build(), b), solver.problem.state)
    err = np.abs(sens - ref).max() / np.abs(ref).max()
    assert err < 1e-4, err
    assert np.abs(ref[:, 3:6]).max() > 0.0  # the accelerometer moves the estimate
    assert np.abs(ref[:, 6:9]).max() > 0.0  # and the orientation reading


@pytest.mark.parametrize("realised", [False, True], ids=["model-accelerometer", "realised-accelerometer"])
def test_consider_sensitivity_is_carried_across_a_shift(realised):
    """A 12-interval window solved, shifted by 6 (the dropped knots marginalised into the prior with their
    sensitivity, 6 recorded knots appended) and solved again: its S against re-solving both stages with offset
    readings in every knot (also with noise-coupled knots, whose measurement joins their noise step)."""
    n, k = 12, 6
    full, xs_true, pi_true = go1_velocity_window(n + k, seed=5, noise=0.0, info_theta=1.0, realised=realised)
    zs = [kn.data.z.copy() for kn in full.knots]
    us = [kn.data.u.copy() for kn in full.knots]
    model = full.knots[0].model
    theta0 = full.param.theta(pi_true)

    def run(b):
        # the first n + 1 knots of the same recording
        prob, _, _ = go1_velocity_window(n, seed=5, noise=0.0, info_theta=1.0, realised=realised)
        for j in range(n + 1):
            prob.set_knot(j, z=_offset(model, zs[j], b))
        solver = MCOESolver(prob, OPTIONS)
        assert solver.solve(xs_true[: n + 1], None, theta0).converged
        inputs = [(us[j], _offset(model, zs[j], b)) for j in range(n, n + k)]
        last = (us[n + k], _offset(model, zs[n + k], b))
        solver.shift(k, [model] * k, model, inputs, last, xs_new=xs_true[n + 1 :])
        assert solver.problem.prior.sensitivity is not None
        assert solver.solve(solver.xs, None, solver.theta).converged
        return solver

    base = run(np.zeros(NB))
    base.terminal_covariance()
    sens = base.consider_sensitivity
    ref = _fd_sensitivity(lambda b: _estimate(run(b)), base.problem.state)
    err = np.abs(sens - ref).max() / np.abs(ref).max()
    assert err < 1e-4, err
    # without the prior's sensitivity (the dropped knots' bias information lost) the result is measurably different
    prior = base.problem.prior
    prior.sensitivity = None
    base.terminal_covariance()
    assert np.abs(base.consider_sensitivity - ref).max() / np.abs(ref).max() > 1e-2


def _first(over: dict, n: int = 6, feeds: list | None = None):
    from mcoe_ros.io.feed import SensorFeed
    from mcoe_ros.io.params import node_config
    from mcoe_ros.testing.data import first_estimates

    base = {"estimator.window": 0.06, "estimator.tick_period": 0.02, "solver.max_iterations": 1}
    feed = SensorFeed(node_config({**base, **over}))
    if feeds is not None:
        feeds.append(feed)
    return first_estimates(feed, n)


def test_estimator_publishes_the_imu_bias_uncertainty_without_moving_the_estimate():
    """imu_bias.consider (default): the same estimates as without it, covariances larger by a nonzero positive
    semidefinite term, recorded in Estimate.bias_cov; with the biases estimated the orientation offset's share alone
    (off with imu_bias.orientation_offset_std 0)."""
    feeds = []
    on, off = _first({}, feeds=feeds), _first({"imu_bias.consider": False}, feeds=feeds)
    assert len(on) == len(off) == 6
    for a, b in zip(on, off, strict=True):
        np.testing.assert_array_equal(a.position, b.position)
        np.testing.assert_array_equal(a.payload_pi, b.payload_pi)
        for name in ("pose_cov", "twist_cov", "payload_cov"):
            diff = getattr(a, name) - getattr(b, name)
            assert np.linalg.eigvalsh(0.5 * (diff + diff.T)).min() >= -1e-12 * np.abs(diff).max()
        pose, twist, payload = a.bias_cov
        assert np.all(np.diag(pose)[3:] > 0.0)  # rotation: the accelerometer bias tilts the estimated gravity
        for name, part in (("pose_cov", pose), ("twist_cov", twist), ("payload_cov", payload)):
            diff = getattr(a, name) - getattr(b, name)
            np.testing.assert_allclose(diff, part, rtol=1e-9, atol=1e-12 * np.abs(part).max())
        assert b.bias_cov is None
    both = {"imu_bias.enabled": True, "imu_bias.accelerometer": True}
    estimated = _first({**both, "imu_bias.orientation_offset_std": 0.0}, 2, feeds)
    assert all(e.bias_cov is None for e in estimated)
    # with the biases estimated the orientation reading's offset is still considered: a tilt share, no yaw
    offset_only = _first(both, 2)
    for e in offset_only:
        rot = np.diag(e.bias_cov[0])[3:]
        assert rot[0] > 0.0 and rot[1] > 0.0 and rot[2] < 1e-3 * rot[:2].max()
    # the estimator's shifts carry the marginalised past's sensitivity (through the ground-height prior update)
    prior = feeds[0].estimator.solver.problem.prior
    assert prior.sensitivity is not None and np.abs(prior.sensitivity).max() > 0.0
    # diagnostics: the biases' share of the standard deviations, or the estimated biases
    with_share, without, biased = (f.diagnostics().key_values() for f in feeds)
    rot = [float(v) for v in with_share["imu_bias_sigma_rotation_mrad"].split()]
    np.testing.assert_allclose(rot, 1e3 * np.sqrt(np.diag(on[-1].bias_cov[0])[3:]), atol=0.006)  # printed 0.01 mrad
    assert "imu_bias_sigma_rotation_mrad" not in without and "imu_bias_sigma_rotation_mrad" not in biased
    assert "gyro_bias_x_rad_s" in biased


def test_arrival_prior_mean_sensitivity_moves_its_minimiser():
    """ArrivalPrior.with_mean_sensitivity: the prior's minimiser at biases b moves by S_θ b in θ (x unchanged)."""
    rng = np.random.default_rng(3)
    ndx, nth = 5, 4
    a = rng.standard_normal((ndx + nth, ndx + nth))
    prior = ArrivalPrior(np.zeros(7), np.zeros(nth), a @ a.T + np.eye(ndx + nth), rng.standard_normal(ndx + nth))
    s_theta = rng.standard_normal((nth, 6))
    moved = prior.with_mean_sensitivity(s_theta)
    b = rng.standard_normal(6)
    base = -np.linalg.solve(prior.hessian, prior.gradient)
    shifted = -np.linalg.solve(moved.hessian, moved.gradient + moved.sensitivity @ b)
    np.testing.assert_allclose(shifted - base, np.r_[np.zeros(ndx), s_theta @ b], atol=1e-10)
    # on top of an existing sensitivity
    again = moved.with_mean_sensitivity(s_theta)
    np.testing.assert_allclose(again.sensitivity, 2.0 * moved.sensitivity, atol=1e-12)


def test_a_problem_rebuilt_from_scratch_keeps_the_payload_beliefs_bias_sensitivity():
    """A window rebuilt from scratch (after a hold, a gap, a late tick) starts from the payload belief: its prior
    carries ∂θ̂/∂b of the belief (−H_θθ S_θ), so the published payload's bias share continues instead of restarting
    from the window's own."""
    from mcoe_ros.io.bag import iter_messages
    from mcoe_ros.io.feed import SensorFeed
    from mcoe_ros.io.params import node_config
    from mcoe_ros.testing.data import SAMPLE_BAG

    def run(carry: bool) -> tuple[list, np.ndarray | None, object]:
        feed = SensorFeed(node_config({"estimator.window": 0.06, "estimator.tick_period": 0.02}))
        est, out, captured = feed.estimator, [], None
        for _, t_ns, msg in iter_messages(SAMPLE_BAG, ["low_state"]):
            feed.low_state(msg, t_ns * 1e-9)
            got = feed.poll()
            out += got
            if got and len(out) == 8:  # force the next tick to build its problem from scratch
                captured = (est.theta_sensitivity.copy(), est.theta_info.copy())
                if not carry:
                    est.theta_sensitivity = None
                est.solver = None
            if len(out) >= 9:
                break
        return out, captured, est

    out, (s_theta, info), est = run(True)
    prior = est.solver.problem.prior
    nth = len(prior.theta_bar)
    assert np.abs(s_theta).max() > 0.0
    # the rebuilt problem's prior (after the solve; the prior object is the one the rebuild set)
    np.testing.assert_allclose(prior.sensitivity[-nth:], -info @ s_theta, rtol=1e-9, atol=1e-12)
    assert np.allclose(prior.sensitivity[:-nth], 0.0)
    before, after = out[7].bias_cov[2][0, 0], out[8].bias_cov[2][0, 0]
    lost, _, _ = run(False)
    assert after > 0.5 * before, (before, after)
    assert lost[8].bias_cov[2][0, 0] < 0.5 * before  # the window's own share alone: restarts small
