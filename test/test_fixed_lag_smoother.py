"""The EKF baseline's fixed-lag Rauch–Tung–Striebel smoother (:func:`mcoe_ros.estimation.leg_odometry.fixed_lag_smooth`)
against the batch least-squares solution of the same linear-Gaussian problem, and the recording filter on a real
Go1 model (benchmarks/paper_jump.py compares it with the optimal estimator's window)."""

import numpy as np
import pytest

from mcoe_ros.estimation.config import EstimatorConfig
from mcoe_ros.estimation.estimator import Estimator
from mcoe_ros.estimation.leg_odometry import LegKinematicsEkf, fixed_lag_smooth
from mcoe_ros.estimation.smoothed import SmoothedTrajectory
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import node_config
from mcoe_ros.testing.data import first_estimates


def _problem(n: int, seed: int = 0):
    """A time-varying linear-Gaussian system (3 states, 1-2 measurements per step): F_k, Q_k, H_k, R_k, data, prior."""
    rng = np.random.default_rng(seed)
    nx = 3
    steps = []
    for k in range(n):
        f = np.eye(nx) + 0.1 * rng.standard_normal((nx, nx))
        a = rng.standard_normal((nx, nx))
        q = 0.05 * (a @ a.T) + 0.01 * np.eye(nx)
        m = 1 + k % 2
        h = rng.standard_normal((m, nx))
        r = np.diag(rng.uniform(0.05, 0.3, m))
        steps.append((f, q, h, r, rng.standard_normal(m)))
    return nx, steps, rng.standard_normal(nx), np.diag(rng.uniform(0.5, 2.0, nx))


def _filter(nx, steps, m0, p0):
    """Kalman filter: step 0 is the prior updated with its measurement; each later step predicts with its F, Q."""
    transitions, posteriors = [], []
    x, p = m0.copy(), p0.copy()
    for k, (f, q, h, r, y) in enumerate(steps):
        if k > 0:
            x, p = f @ x, f @ p @ f.T + q
            transitions.append((f, x.copy(), p.copy()))
        s = h @ p @ h.T + r
        gain = np.linalg.solve(s, h @ p).T
        x = x + gain @ (y - h @ x)
        p = (np.eye(nx) - gain @ h) @ p
        posteriors.append((x.copy(), p.copy()))
    return transitions, posteriors


def _batch(nx, steps, m0, p0):
    """The MAP trajectory (n, nx) of all the data: dense weighted least squares over every state."""
    n = len(steps)
    rows, rhs = [], []

    def block(k, mat):
        out = np.zeros((mat.shape[0], n * nx))
        out[:, k * nx : (k + 1) * nx] = mat
        return out

    w0 = np.linalg.cholesky(np.linalg.inv(p0)).T
    rows.append(block(0, w0))
    rhs.append(w0 @ m0)
    for k, (f, q, h, r, y) in enumerate(steps):
        wr = np.linalg.cholesky(np.linalg.inv(r)).T
        rows.append(block(k, wr @ h))
        rhs.append(wr @ y)
        if k > 0:
            wq = np.linalg.cholesky(np.linalg.inv(q)).T
            rows.append(block(k, wq) - block(k - 1, wq @ f))
            rhs.append(np.zeros(nx))
    sol = np.linalg.lstsq(np.vstack(rows), np.concatenate(rhs), rcond=None)[0]
    return sol.reshape(n, nx)


def test_the_full_lag_is_the_batch_solution_and_lag_zero_the_filter():
    nx, steps, m0, p0 = _problem(12)
    transitions, posteriors = _filter(nx, steps, m0, p0)
    batch = _batch(nx, steps, m0, p0)
    np.testing.assert_allclose(fixed_lag_smooth(transitions, posteriors, 11), batch, atol=1e-10)
    np.testing.assert_allclose(fixed_lag_smooth(transitions, posteriors, 50), batch, atol=1e-10)
    np.testing.assert_allclose(fixed_lag_smooth(transitions, posteriors, 0), [p[0] for p in posteriors])
    # the newest state's smoothed mean is the filter's whatever the lag
    np.testing.assert_allclose(fixed_lag_smooth(transitions, posteriors, 4)[-1], posteriors[-1][0])


@pytest.mark.parametrize("lag", [1, 3, 5])
def test_each_row_sees_the_data_up_to_its_lag(lag):
    """Row k equals the batch solution of the data of steps 0 … k + lag (the filter of a truncated record)."""
    nx, steps, m0, p0 = _problem(10, seed=3)
    transitions, posteriors = _filter(nx, steps, m0, p0)
    out = fixed_lag_smooth(transitions, posteriors, lag)
    for k in range(len(steps)):
        end = min(k + lag, len(steps) - 1)
        np.testing.assert_allclose(out[k], _batch(nx, steps[: end + 1], m0, p0)[k], atol=1e-10)


def test_bad_records_are_rejected():
    nx, steps, m0, p0 = _problem(4)
    transitions, posteriors = _filter(nx, steps, m0, p0)
    with pytest.raises(ValueError):
        fixed_lag_smooth(transitions[:-1], posteriors, 2)
    with pytest.raises(ValueError):
        fixed_lag_smooth(transitions, posteriors, -1)


def test_the_recording_filter_smooths_a_go1_stance():
    """The Go1 filter records one transition and one posterior per step and lag 0 gives its own track; started with a
    wrong velocity (0.1 m/s in x) on a standing robot, the filter's first states keep it while the smoother's take
    the later stance-foot updates' v = 0; an unrecorded filter refuses to smooth."""
    robot = Estimator(EstimatorConfig()).robot
    q_j = np.tile([0.0, 0.8, -1.6], 4)
    quat, gyro, acc = (1.0, 0.0, 0.0, 0.0), np.zeros(3), np.array([0.0, 0.0, 9.81])
    ekf = LegKinematicsEkf(robot, np.array([0.0, 0.0, 0.3]), v0=np.array([0.1, 0.0, 0.0]), v0_std=0.1, record=True)
    track = [ekf.x.copy()]
    for _ in range(40):
        ekf.predict(0.002, quat, gyro, acc)
        ekf.update(quat, gyro, q_j, np.zeros(12), (True,) * 4)
        ekf.close_step()
        track.append(ekf.x.copy())
    assert len(ekf.transitions) == 40 and len(ekf.posteriors) == 41
    np.testing.assert_allclose(ekf.smoothed(0), track)
    smoothed = ekf.smoothed(10)
    assert track[0][3] == pytest.approx(0.1)
    assert abs(smoothed[0, 3]) < 0.01  # the initial velocity, corrected by the data after it
    assert smoothed[1, 0] < 0.2 * track[1][0]  # the filter's first step integrated the wrong velocity
    np.testing.assert_allclose(smoothed[-1], ekf.x)
    with pytest.raises(ValueError):
        LegKinematicsEkf(robot, np.zeros(3)).smoothed(3)


def test_the_window_trajectory_is_the_last_solve_and_ends_at_the_published_position():
    """Estimator.window_trajectory: None before a solve; then the last solve's knot times (the window's clock) and
    base positions, whose newest is the published position."""
    feed = SensorFeed(node_config({"estimator.window": 0.06, "estimator.tick_period": 0.02}))
    assert feed.estimator.window_trajectory is None
    out = first_estimates(feed, 2)
    times, positions, quats = feed.estimator.window_trajectory
    assert positions.shape == (feed.estimator.n_intervals + 1, 3) and times.shape == (len(positions),)
    assert quats.shape == (len(times), 4)
    np.testing.assert_allclose(np.linalg.norm(quats, axis=1), 1.0)
    assert np.all(np.diff(times) > 0.0)
    np.testing.assert_allclose(times[-1] + feed.estimator.epoch, out[-1].t, atol=1e-9)
    np.testing.assert_allclose(positions[-1], out[-1].position, atol=1e-12)
    np.testing.assert_allclose(quats[-1], out[-1].quat_xyzw, atol=1e-12)


def test_the_smoothed_trajectory_keeps_each_knot_from_the_last_window(tmp_path):
    """SmoothedTrajectory after each solve: every knot once, the newest at the published pose, an older knot at its
    pose in the latest window (not the first one that held it), and the TUM file has one line per knot."""
    feed = SensorFeed(node_config({"estimator.window": 0.06, "estimator.tick_period": 0.02}))
    est = feed.estimator
    smoothed = SmoothedTrajectory()
    smoothed.update(est)  # before any solve: nothing
    assert len(smoothed) == 0
    out, windows = [], []
    for e in first_estimates(feed, 1):
        out.append(e)
    smoothed.update(est)
    windows.append(est.window_trajectory)
    for e in first_estimates(feed, 1):  # the next solve on the same feed
        out.append(e)
    smoothed.update(est)
    windows.append(est.window_trajectory)
    times = np.union1d(windows[0][0], windows[1][0])
    assert len(smoothed) == len(times)
    np.testing.assert_allclose(smoothed.position_at(out[-1].t), out[-1].position, atol=1e-12)
    shared = windows[1][0][0]  # the second window's oldest knot, also in the first window
    assert shared in windows[0][0]
    np.testing.assert_allclose(smoothed.position_at(shared + est.epoch), windows[1][1][0])
    poses = smoothed.poses()
    assert [p[0] for p in poses] == sorted(p[0] for p in poses)
    assert smoothed.write_tum(str(tmp_path / "t.tum")) == len(times)
    rows = np.loadtxt(tmp_path / "t.tum")
    np.testing.assert_allclose(rows[-1, 1:4], out[-1].position, atol=1e-8)
