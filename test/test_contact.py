"""Contact detection from the dynamics (estimated ground reaction forces) and its hysteresis."""

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.multibody.contact import ContactConfig, ContactDetector
from mcoe_ros.multibody.robot import RobotModel


@pytest.fixture(scope="module")
def robot():
    return RobotModel()


def _standing(robot, feet_idx, quat=(1.0, 0, 0, 0)):
    """Joint torques holding the robot still on the given feet (min-norm force split), and the true forces."""
    q = robot.neutral()
    q[3:7] = [quat[1], quat[2], quat[3], quat[0]]
    q[7:] = np.tile([0.0, 0.8, -1.6], 4)
    data = robot.create_data()
    g = pin.rnea(robot.model, data, q, np.zeros(18), np.zeros(18))
    pin.computeJointJacobians(robot.model, data, q)
    pin.updateFramePlacements(robot.model, data)
    jac = np.vstack(
        [
            pin.getFrameJacobian(robot.model, data, robot.foot_frame_ids[i], pin.LOCAL_WORLD_ALIGNED)[:3]
            for i in feet_idx
        ]
    )
    forces = np.linalg.lstsq(jac[:, :6].T, g[:6], rcond=None)[0]
    return q, (g - jac.T @ forces)[6:], forces.reshape(-1, 3)


@pytest.mark.parametrize("compiled", [False, None])
def test_forces_from_torques_match_the_true_stance_forces(robot, compiled):
    det = ContactDetector(robot, compiled=compiled)
    rot = pin.rpy.rpyToMatrix(0.1, -0.05, 0.3)
    quat = pin.Quaternion(rot)
    wxyz = (quat.w, quat.x, quat.y, quat.z)
    for feet in ([0, 1, 2, 3], [0, 3], [1, 2, 3]):
        q, tau, true = _standing(robot, feet, wxyz)
        acc = rot.T @ np.array([0, 0, 9.81])  # specific force at rest, body axes
        est = det.estimate_forces(wxyz, np.zeros(3), acc, q[7:], np.zeros(12), tau)
        np.testing.assert_allclose(est[feet], true, atol=1e-8)
        swing = [i for i in range(4) if i not in feet]
        assert np.abs(est[swing]).max(initial=0.0) < 1e-8
        assert abs(est[:, 2].sum() - robot.total_mass * 9.81) < 0.05 * robot.total_mass * 9.81 + 1e-9 or len(feet) < 4


def test_compiled_forces_equal_the_python_reference(robot):
    """The compiled estimate (one C++ call per input sample) against the Python reference on random moving states,
    with and without an identified actuator model (friction loss and rotor inertia)."""
    from mcoe_ros.multibody import contact
    from mcoe_ros.multibody.actuator import ActuatorModel

    if contact._CompiledForces is None:
        pytest.skip("compiled extension (ContactForces) not built")
    rng = np.random.default_rng(4)
    act = ActuatorModel(robot)
    for with_actuator in (False, True):
        ref, fast = ContactDetector(robot, compiled=False), ContactDetector(robot, compiled=True)
        if with_actuator:
            params = np.abs(rng.normal(size=act.n_params)) * 0.1
            for det in (ref, fast):
                det.set_actuator(act, params)
        worst = 0.0
        for _ in range(50):
            q = pin.randomConfiguration(robot.model, -np.ones(robot.nq), np.ones(robot.nq))
            v, a, tau = rng.normal(size=robot.nv), rng.normal(size=robot.nv), 10 * rng.normal(size=robot.nj)
            f_ref = ref.forces_from_state(q, v, a, tau).copy()
            f_fast = fast.forces_from_state(q, v, a, tau).copy()
            worst = max(worst, float(np.abs(f_fast - f_ref).max() / (1.0 + np.abs(f_ref).max())))
        assert worst < 1e-10, worst


def test_hysteresis_and_debounce():
    det = ContactDetector(RobotModel(), ContactConfig(force_on=20, force_off=10, min_duration=0.01))
    f = np.zeros((4, 3))
    t = 0.0
    f[0, 2] = 25.0
    assert not det.update(t, f)[0]  # not yet persisted
    assert not det.update(t + 0.004, f)[0]
    assert det.update(t + 0.010, f)[0]
    f[0, 2] = 15.0  # between thresholds: stays in contact
    assert det.update(t + 0.02, f)[0] and det.update(t + 0.05, f)[0]
    f[0, 2] = 5.0
    assert det.update(t + 0.06, f)[0]  # glitch shorter than min_duration is ignored
    f[0, 2] = 15.0
    assert det.update(t + 0.062, f)[0]
    f[0, 2] = 5.0
    det.update(t + 0.07, f)
    assert not det.update(t + 0.081, f)[0]
    assert not det.flags[1:].any()
