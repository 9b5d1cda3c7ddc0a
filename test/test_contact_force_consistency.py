"""benchmarks/contact_force_consistency.py on real simulator recordings: the simulator's torques and motion agree
with the URDF's rigid point contacts (lossless robot), and taking the simulated actuator losses out of the reported
torques is what makes a lossy robot's agree."""

import numpy as np
import pytest

from mcoe_ros.sim.cli import main as sim_main

TROT = ["--scenario", "trot:1.2", "--payload-mass", "3", "--payload-com", "0.05", "0", "0.04", "--seed", "7"]


@pytest.fixture(scope="module")
def consistency(benchmark_module):
    return benchmark_module("contact_force_consistency")


@pytest.fixture(scope="module")
def bags(tmp_path_factory):
    root = tmp_path_factory.mktemp("consistency")
    out = {}
    lossy = ["--noise", "0", "--joint-damping", "1", "1.5", "2", "--rotor-inertia", "0.01"]
    for name, extra in (("clean", ["--noise", "0"]), ("lossy", lossy)):
        out[name] = str(root / name)
        assert sim_main([*TROT, *extra, "--out", out[name]]) == 0
    return out


def _excess(res) -> float:
    rows = res["rows"]
    return float(np.mean(rows[:, 3] - rows[:, 2]))


def test_a_lossless_trot_agrees_with_rigid_point_contacts(consistency, bags):
    res = consistency.stance_forces(bags["clean"], contact_depth=0.02, losses=False, landing=(75.0, 0.05))
    rows = res["rows"]
    weight = res["mass"] * consistency.GRAVITY
    assert res["payload"] == pytest.approx(3.0)
    assert set(np.unique(rows[:, 0])) >= {2.0}  # a trot: diagonal pairs
    assert abs(rows[:, 2].mean() - weight) < 0.02 * weight  # the motion holds the robot up on average
    assert abs(_excess(res)) < 0.01 * weight  # torques and motion agree
    stance = ~np.isnan(rows[:, 4])
    assert stance.any() and np.all(np.isfinite(rows[stance, 4]))  # the rigid model's view at every stance sample


def test_the_simulated_losses_explain_a_lossy_trots_torques(consistency, bags):
    raw = _excess(consistency.stance_forces(bags["lossy"], contact_depth=0.02, losses=False))
    corrected = _excess(consistency.stance_forces(bags["lossy"], contact_depth=0.02, losses=True))
    weight = consistency.stance_forces(bags["clean"], contact_depth=0.02, losses=False)["mass"] * consistency.GRAVITY
    assert abs(raw) > 2.0 * abs(corrected)
    assert abs(corrected) < 0.01 * weight
