"""Online RLS payload estimator on the grid-node stream of the sample bag, and its estimator integration."""

import os

import numpy as np
import pytest

from mcoe_ros.bag import iter_messages
from mcoe_ros.config import resolve
from mcoe_ros.contact import ContactDetector
from mcoe_ros.inertia import is_physically_consistent, pi_about_com
from mcoe_ros.inputs import low_state_arrays
from mcoe_ros.model import RobotModel
from mcoe_ros.payload_rls import OnlinePayloadRls
from mcoe_ros.samples import SampleStats, validate_imu, validate_joint
from mcoe_ros.window import SlidingWindow

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mcoe_ros", "data", "go1_sample")


@pytest.fixture(scope="module")
def stream():
    robot = RobotModel()
    msgs = []
    for _topic, t_ns, msg in iter_messages(SAMPLE, ["low_state"]):
        msgs.append((t_ns * 1e-9 - 1.7e9, *low_state_arrays(msg, robot.joint_map)[:6]))  # s since the bag epoch
    return robot, msgs


def test_rls_recovers_the_sample_payload_and_stays_consistent(stream):
    robot, msgs = stream
    win = SlidingWindow(ContactDetector(robot), 0.002, 101, 0.1, SampleStats())
    rls = OnlinePayloadRls(robot, 0.002)
    created = 0
    for t, q, dq, tau, quat, gyro, acc in msgs:
        win.push_joint(validate_joint(t, q, dq, tau, 12))
        win.push_imu(validate_imu(t, quat, gyro, acc)[0])
        win.advance()
        for node in list(win.nodes)[len(win.nodes) - (win.n_created - created) :]:
            rls.update(node)
            if rls.updates % 500 == 1:
                assert is_physically_consistent(rls.pi)
        created = win.n_created
    mass, com, _ = pi_about_com(rls.pi)
    assert rls.ready and rls.updates > 3000 and rls.skipped > 0  # trot: samples around contact changes skipped
    assert abs(mass - 7.2) / 7.2 < 0.03, mass
    assert np.linalg.norm(com - [0.02, 0.0, 0.05]) < 0.015, com
    std = np.sqrt(np.diag(rls.covariance()))
    assert np.all(np.isfinite(std)) and std[0] < 0.5
    rls.reset()
    assert rls.updates == 0 and not rls.ready and pi_about_com(rls.pi)[0] == pytest.approx(1.0)


def test_estimator_publishes_rls_payload_in_rls_mode_and_resets_it(stream):
    from mcoe_ros.estimator import Estimator

    _robot, msgs = stream
    est = Estimator(resolve({"estimator.payload_estimator": "rls", "solver.max_iterations": 1}))
    outs = []
    for t, q, dq, tau, quat, gyro, acc in msgs[:400]:
        est.add_imu(t, quat, gyro, acc)
        est.add_joints(t, q, dq, tau)
        outs += est.poll()
    assert outs and outs[-1].source == "rls"
    assert abs(outs[-1].payload_pi[0] - 7.2) < 0.5 and abs(est.rls_pi[0] - 7.2) < 0.5
    np.testing.assert_allclose(outs[-1].combined_pi, est.robot.combined_pi(outs[-1].payload_pi))
    est.reset_payload()
    assert est.rls_pi is None
