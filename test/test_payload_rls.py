"""Online RLS payload estimator on the grid-knot stream of the sample bag, and its estimator integration."""

import numpy as np
import pytest

from mcoe_ros.io.bag import iter_messages
from mcoe_ros.io.feed import SensorFeed
from mcoe_ros.io.params import node_config
from mcoe_ros.multibody.inertia import is_physically_consistent, pi_about_com
from mcoe_ros.testing.data import SAMPLE_BAG


@pytest.fixture(scope="module")
def messages():
    return [(t_ns * 1e-9, msg) for _topic, t_ns, msg in iter_messages(SAMPLE_BAG, ["low_state"])]


def test_rls_recovers_the_sample_payload_and_stays_consistent(messages):
    """Every grid knot of the sample bag through the estimator's RLS (no optimal-estimation solve)."""
    feed = SensorFeed(node_config({"estimator.payload_estimator": "rls"}))
    rls = feed.estimator.rls
    for t, msg in messages:
        feed.low_state(msg, t)
        feed.advance()
        if rls.updates % 500 == 1:  # the estimated body (URDF trunk + payload) is consistent at every step
            assert is_physically_consistent(rls.pi + rls.offset)
    mass, com, _ = pi_about_com(rls.pi)
    assert rls.ready and rls.updates > 3000 and rls.skipped > 0  # trot: samples around contact changes skipped
    assert abs(mass - 7.2) / 7.2 < 0.03, mass
    assert np.linalg.norm(com - [0.02, 0.0, 0.05]) < 0.015, com
    std = np.sqrt(np.diag(rls.covariance()))
    assert np.all(np.isfinite(std)) and std[0] < 0.5
    rls.reset()
    assert rls.updates == 0 and not rls.ready and pi_about_com(rls.pi)[0] == pytest.approx(1.0)


def test_estimator_publishes_rls_payload_in_rls_mode_and_resets_it(messages):
    feed = SensorFeed(node_config({"estimator.payload_estimator": "rls", "solver.max_iterations": 1}))
    est = feed.estimator
    outs = []
    for t, msg in messages[:400]:
        feed.low_state(msg, t)
        outs += feed.poll()
    assert outs and outs[-1].source == "rls"
    assert outs[-1].rls_payload_pi is not None
    assert abs(outs[-1].payload_pi[0] - 7.2) < 0.5 and abs(est.rls_pi[0] - 7.2) < 0.5
    np.testing.assert_allclose(outs[-1].combined_pi, est.robot.combined_pi(outs[-1].payload_pi))
    est.reset_payload()
    assert est.rls_pi is None
