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
    # the previous rules (no re-touch guard): with the guard an unloaded foot that is the only stance foot lifts off
    # at once (nothing carries the robot: a flight's onset, test/test_retouch_guard.py)
    det = ContactDetector(RobotModel(), ContactConfig(force_on=20, force_off=10, min_duration=0.01, retouch_time=0.0))
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
    assert det.onset[0] == pytest.approx(t + 0.07)  # the lift-off dates from its first sample below force_off
    assert np.isnan(det.onset[1:]).all()  # never changed


def test_a_confirmed_change_dates_from_its_onset():
    """With ``backdate`` the touch-down's onset is the first sample above force_on, and the stance clock
    (settled, stance_time) counts from there; without it, from the confirming sample."""
    for backdate in (True, False):
        cfg = ContactConfig(force_on=20, force_off=10, min_duration=0.004, settle_time=0.01, backdate=backdate)
        det = ContactDetector(RobotModel(), cfg)
        f = np.full((4, 3), 0.0)
        f[:, 2] = 50.0
        f[1, 2] = 0.0
        times = 0.002 * np.arange(12)
        for t in times[:3]:  # feet 0, 2, 3 want contact from t = 0, confirmed at t = 0.004
            flags = det.update(t, f)
            det.settled(t, flags, f)
        assert flags[[0, 2, 3]].all() and not flags[1]
        assert det.onset[0] == pytest.approx(0.0 if backdate else 0.004)
        assert det.stance_time[0] == pytest.approx(0.004 if backdate else 0.0)
        for t in times[3:6]:
            det.settled(t, det.update(t, f), f)
        assert det.aged[0] == backdate  # t = 0.01: 0.01 s since the onset, 0.006 s since the confirmation


def test_a_landing_rings_through_the_band_a_spike_does_not_land():
    """A touch-down pending since the force first exceeded force_on holds while the force stays above force_off
    (a landing rings: 25, 15, 30 N with force_on 20 -> contact from the first sample); a one-sample spike that
    falls below force_off is no touch-down (the pronk's flight read ~22 N on every foot for one knot)."""
    det = ContactDetector(RobotModel(), ContactConfig(force_on=20, force_off=10, min_duration=0.004))
    f = np.zeros((4, 3))
    for t, fz0, fz1 in ((0.0, 25.0, 25.0), (0.002, 15.0, 5.0), (0.004, 30.0, 0.0), (0.006, 30.0, 0.0)):
        f[0, 2], f[1, 2] = fz0, fz1
        flags = det.update(t, f)
    assert flags[0] and not flags[1]
    assert det.onset[0] == pytest.approx(0.0)


@pytest.mark.parametrize("compiled", [False, None])
def test_an_unloaded_foot_that_stands_keeps_its_contact(robot, compiled):
    """contact.force_off_still / lift_off_speed: a stance foot unloaded below force_off leaves contact only when it
    moves relative to the other stance feet (a sway's light foot stays down, a lifting foot leaves) or when its force
    falls below force_off_still; the relative velocity is that of the feet on a moving base whose linear velocity the
    detector does not know (it cancels: a base twist with the legs holding all feet still reads as still); a foot
    alone on the ground leaves at force_off; lift_off_speed 0 with force_off_still = force_off is the plain rule."""
    from mcoe_ros.multibody.imu import base_motion, imu_mount

    rng = np.random.default_rng(3)
    cfg = ContactConfig(force_on=8.0, force_off=4.0, force_off_still=1.0, lift_off_speed=0.1, min_duration=0.0)
    q, tau, _ = _standing(robot, [0, 1, 2, 3])
    wxyz = (1.0, 0.0, 0.0, 0.0)
    gyro = rng.normal(scale=0.5, size=3)
    omega = base_motion(imu_mount(robot), wxyz, gyro).omega
    twist = np.r_[rng.normal(scale=0.3, size=3), omega]  # base linear (unknown to the detector) and angular, local
    data = robot.create_data()
    pin.computeJointJacobians(robot.model, data, q)
    jac = np.vstack(
        [pin.getFrameJacobian(robot.model, data, f, pin.LOCAL_WORLD_ALIGNED)[:3] for f in robot.foot_frame_ids]
    )
    dq_still = np.linalg.solve(jac[:, 6:], -jac[:, :6] @ twist)  # every foot still in the world
    acc = np.array([0.0, 0.0, 9.81])

    def flags_after(dq, fz, feet=(0, 1, 2, 3), config=cfg):
        det = ContactDetector(robot, config, compiled=compiled)
        f = np.zeros((4, 3))
        f[list(feet), 2] = 50.0
        det.update(0.0, f)  # the stance feet on
        det.estimate_forces(wxyz, gyro, acc, q[7:], dq, tau)  # the sample whose kinematics the test reads
        f[0, 2] = fz
        return det.update(0.002, f)

    lift = dq_still.copy()
    leg0 = slice(0, 3)  # foot 0's leg joints (model order FL, FR, RL, RR)
    lift[leg0] += np.linalg.solve(jac[0:3, 6:9], np.array([0.0, 0.0, 0.3]))  # foot 0 rises at 0.3 m/s
    assert flags_after(dq_still, 2.0).all()  # unloaded to 2 N, standing: stays down
    assert not flags_after(lift, 2.0)[0] and flags_after(lift, 2.0)[1:].all()  # it lifts: leaves
    assert not flags_after(dq_still, 0.5)[0]  # below force_off_still: leaves even standing
    assert flags_after(lift, 5.0)[0]  # above force_off: stays, moving or not
    assert not flags_after(dq_still, 2.0, feet=(0,))[0]  # alone on the ground: the plain threshold
    plain = ContactConfig(force_on=8.0, force_off=4.0, force_off_still=4.0, lift_off_speed=0.0, min_duration=0.0)
    assert not flags_after(dq_still, 2.0, config=plain)[0]
