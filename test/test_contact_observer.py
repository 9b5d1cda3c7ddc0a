"""The momentum-observer contact detector (contact.method 'momentum', mcoe_ros/multibody/contact.py): the momentum
identity of the leg rows (finite differences, floating base with a moving base), a known external force recovered
through the observer's first-order response, the inverse-dynamics limit, and a swinging leg with rotor inertia."""

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.multibody.actuator import ActuatorModel
from mcoe_ros.multibody.contact import ContactConfig, ContactDetector
from mcoe_ros.multibody.imu import GRAVITY, imu_mount
from mcoe_ros.multibody.robot import RobotModel


@pytest.fixture(scope="module")
def robot():
    return RobotModel()


def _imu_sample(robot, q, v, a):
    """IMU sample (quat w, x, y, z; gyro; specific force; angular acceleration, IMU frame) of the floating-base state
    q (nq,), v (nv,) (Pinocchio local base velocity) and spatial acceleration a (nv,)."""
    rot_bi, r = imu_mount(robot)
    rot_wb = pin.Quaternion(q[6], *q[3:6]).toRotationMatrix()
    w, dw = v[3:6], a[3:6]
    a_o = a[:3] + np.cross(w, v[:3])  # classical acceleration of the base origin, base axes
    a_imu = a_o + np.cross(dw, r) + np.cross(w, np.cross(w, r))
    quat = pin.Quaternion(rot_wb @ rot_bi)
    spec = rot_bi.T @ (a_imu - rot_wb.T @ GRAVITY)
    return np.array([quat.w, quat.x, quat.y, quat.z]), rot_bi.T @ w, spec, rot_bi.T @ dw


def _trajectory(robot, rng):
    """q(t), v(t) = v0 + t a (constant spatial acceleration a, base linear velocity nonzero) for t in seconds."""
    q0 = robot.neutral()
    q0[3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(*rng.uniform(-0.3, 0.3, 3))).coeffs()
    q0[7:] = np.tile([0.1, 0.8, -1.6], 4) + rng.uniform(-0.3, 0.3, 12)
    v0, acc = rng.normal(0, 1.0, robot.nv), rng.normal(0, 5.0, robot.nv)
    v0[:3] = [1.5, -0.7, 0.4]  # the base moves: the leg rows must not depend on its linear velocity

    def state(t):
        # exact flow of v(t) = v0 + t a on the configuration manifold, by fine integration (second-order)
        n = 400
        q, h = q0.copy(), t / n
        for i in range(n):
            q = pin.integrate(robot.model, q, (v0 + (i + 0.5) * h * acc) * h)
        return q, v0 + t * acc

    return state, acc


def test_the_reduced_leg_momentum_changes_by_torque_force_specific_force_and_coriolis(robot):
    """d p_l / dt = tau_l + J_l^T f - M_l,lin s_O + (C(q, nu0)^T nu0)_l (module docstring) against a central
    difference of p_l = (M nu0)_l along a moving floating-base trajectory, where tau_l + J_l^T f are the leg rows of
    the inverse dynamics (RNEA with the true, nonzero base linear velocity), with a rotor inertia in the armature."""
    rng = np.random.default_rng(3)
    det = ContactDetector(robot, compiled=False)
    act = ActuatorModel(robot)
    params = np.concatenate([np.zeros(3), np.zeros(3), [0.01, 0.012, 0.015]])
    det.set_actuator(act, params)
    model = robot.model.copy()
    model.armature[6:] += act.rotor_inertia(params)
    data = model.createData()
    state, acc = _trajectory(robot, rng)
    h = 1e-4
    momenta = []
    for t in (0.05 - h, 0.05 + h):
        q, v = state(t)
        quat, gyro, spec, dw = _imu_sample(robot, q, v, acc)
        p, _ = det._momentum(quat, gyro, spec, q[7:], v[6:], np.zeros(12), dw)
        momenta.append(p)
    q, v = state(0.05)
    quat, gyro, spec, dw = _imu_sample(robot, q, v, acc)
    tau_legs = pin.rnea(model, data, q, v, acc)[6:]  # = tau + J^T f on the leg rows, any split
    _, rhs = det._momentum(quat, gyro, spec, q[7:], v[6:], tau_legs, dw)
    dp = (momenta[1] - momenta[0]) / (2 * h)
    np.testing.assert_allclose(dp, rhs, atol=2e-5 * max(1.0, np.abs(rhs).max()))


def _lift_off(robot, n, dt, rotor, t_lift):
    """Samples (every dt s) of a held robot (base still, level) whose front-left foot is pushed by a 60 N ground
    force until t_lift (between two samples), then swings free under smooth joint torques (the stance torques
    unloading: the leg snaps up), with the true rotor
    inertia ``rotor`` (kg m^2): the leg's forward dynamics integrated finely (midpoint rule). Returns the samples
    and the true vertical force at each sample time."""
    q = robot.neutral()
    q[3:7] = [0, 0, 0, 1.0]
    q[7:] = np.tile([0.0, 0.8, -1.6], 4)
    model = robot.model.copy()
    model.armature[6:] += rotor
    data = model.createData()
    leg, foot = slice(6, 9), robot.foot_frame_ids[0]
    force = np.array([0.0, 0.0, 60.0])
    hold = pin.rnea(model, data, q, np.zeros(robot.nv), np.zeros(robot.nv))[leg]
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    push = pin.getFrameJacobian(model, data, foot, pin.LOCAL_WORLD_ALIGNED)[:3, leg].T @ force

    def torque(t):  # stance torques unloaded over 10 ms around the lift-off (a controller's output)
        ramp = np.clip((t - t_lift + 0.004) / 0.01, 0.0, 1.0)
        return hold - push * 0.5 * (1.0 + np.cos(np.pi * ramp)) + 0.5 * np.sin(2 * np.pi * 5.0 * t)

    def ground(t):
        return force if t < t_lift else np.zeros(3)

    def qdd(qk, vk, t):
        mass = pin.crba(model, data, qk)
        mass = np.triu(mass) + np.triu(mass, 1).T
        h = pin.rnea(model, data, qk, vk, np.zeros(robot.nv))[leg]
        pin.computeJointJacobians(model, data, qk)
        pin.updateFramePlacements(model, data)
        jac = pin.getFrameJacobian(model, data, foot, pin.LOCAL_WORLD_ALIGNED)[:3, leg]
        return np.linalg.solve(mass[leg, leg], torque(t) + jac.T @ ground(t) - h)

    fine = 100
    h = dt / fine
    qk, vk = q.copy(), np.zeros(robot.nv)
    quat, gyro, spec, dw = _imu_sample(robot, q, np.zeros(robot.nv), np.zeros(robot.nv))
    samples, true_fz = [], []
    for k in range(n):
        tau = np.concatenate([torque(k * dt), hold, hold, hold])
        samples.append((quat, gyro, spec, qk[7:].copy(), vk[6:].copy(), tau, dw))
        true_fz.append(ground(k * dt)[2])
        for i in range(fine):
            t = k * dt + i * h
            a1 = qdd(qk, vk, t)
            qm, vm = qk.copy(), vk.copy()
            qm[7:10] += 0.5 * h * vk[6:9]
            vm[6:9] += 0.5 * h * a1
            a2 = qdd(qm, vm, t + 0.5 * h)
            qk[7:10] += h * vm[6:9]
            vk[6:9] += h * a2
    return samples, np.array(true_fz)


def test_a_lifting_leg_reads_no_force_with_rotor_inertia_and_differenced_accelerations(robot):
    """A foot leaves the ground between two samples (continuous torques, a correct 0.01 kg m^2 rotor inertia): the
    inverse dynamics with backward-differenced accelerations pairs the interval's mean acceleration with the torque at
    its end: with the torques unloading fast, a released foot reads more than force_off after the lift-off; the
    momentum observer at K dt = 1 (the interval's momentum change against the trapezoidal mean of the torques) sees
    the force vanish within a sample, and the true force before."""
    dt, rotor, t_lift = 0.002, 0.01, 0.0403
    samples, true_fz = _lift_off(robot, 40, dt, rotor, t_lift)
    act = ActuatorModel(robot)
    params = np.concatenate([np.zeros(6), np.full(3, rotor)])
    times = np.arange(len(samples)) * dt
    after = times > t_lift + dt  # from the first full interval after the lift-off
    before = (times > 0) & (times < t_lift)
    errors = {}
    for method in ("dynamics", "momentum"):
        det = ContactDetector(robot, ContactConfig(method=method, observer_gain=1.0 / dt), compiled=False)
        det.set_actuator(act, params)
        prev, fz = None, []
        for s in samples:
            quat, gyro, spec, qj, dqj, tau, dw = s
            ddq = None if prev is None else (dqj - prev[4]) / dt
            f = det.estimate_forces(quat, gyro, spec, qj, dqj, tau, ddq, dw, None if prev is None else dt)
            fz.append(f[0, 2])
            prev = s
        errors[method] = np.abs(np.array(fz) - true_fz)
    # the inverse-dynamics detector fails here: a released foot still reads more than force_off (late lift-off)
    assert errors["dynamics"][after].max() > ContactConfig().force_off
    # the observer: within 1.2 N of the true force before (60 N) and after (0) the lift-off's interval
    assert errors["momentum"][before | after].max() < 0.3 * ContactConfig().force_off


def test_a_known_external_force_is_recovered_with_the_observers_first_order_response(robot):
    """A still robot: a step of vertical force on one foot at t = 0 (torques of the statics) is seen as
    f (1 - (1 - K dt)^k) after k samples (the discrete first-order filter), and exactly at K dt = 1."""
    q = robot.neutral()
    q[3:7] = [0, 0, 0, 1.0]
    q[7:] = np.tile([0.0, 0.8, -1.6], 4)
    data = robot.create_data()
    grav = pin.rnea(robot.model, data, q, np.zeros(robot.nv), np.zeros(robot.nv))
    pin.computeJointJacobians(robot.model, data, q)
    pin.updateFramePlacements(robot.model, data)
    jac = pin.getFrameJacobian(robot.model, data, robot.foot_frame_ids[2], pin.LOCAL_WORLD_ALIGNED)[:3]
    force = np.array([3.0, -2.0, 40.0])
    quat, gyro, spec, dw = _imu_sample(robot, q, np.zeros(robot.nv), np.zeros(robot.nv))
    dt = 0.002
    for gain in (100.0, 1.0 / dt):
        det = ContactDetector(robot, ContactConfig(method="momentum", observer_gain=gain), compiled=False)
        # before: the leg hangs (torques of gravity only); the base is held (base rows are not used)
        det.estimate_forces(quat, gyro, spec, q[7:], np.zeros(12), grav[6:])
        for k in range(1, 30):
            f = det.estimate_forces(quat, gyro, spec, q[7:], np.zeros(12), (grav - jac.T @ force)[6:], None, None, dt)
            # trapezoid: the step enters with weight 1/2 at its first sample
            alpha = min(gain * dt, 1.0)
            expected = force * (1 - (1 - alpha) ** (k - 1) * (1 - alpha / 2))
            np.testing.assert_allclose(f[2], expected, atol=1e-8)
            assert np.abs(f[[0, 1, 3]]).max() < 1e-8


def test_the_observer_restarts_at_the_inverse_dynamics_after_a_gap(robot):
    """dt None (first sample, grid restart): the observer's output is the inverse-dynamics estimate."""
    rng = np.random.default_rng(1)
    state, acc = _trajectory(robot, rng)
    q, v = state(0.0)
    quat, gyro, spec, dw = _imu_sample(robot, q, v, acc)
    tau = rng.normal(0, 5, 12)
    ref = ContactDetector(robot, compiled=False).estimate_forces(quat, gyro, spec, q[7:], v[6:], tau, acc[6:], dw)
    det = ContactDetector(robot, ContactConfig(method="momentum"), compiled=False)
    det.estimate_forces(quat, gyro, spec, q[7:], v[6:], tau, acc[6:], dw, 0.002)
    det.reset()
    out = det.estimate_forces(quat, gyro, spec, q[7:], v[6:], tau, acc[6:], dw, None)
    np.testing.assert_allclose(out, ref, atol=1e-9)


def test_config_rejects_an_unknown_method_and_a_bad_gain():
    with pytest.raises(ValueError, match="method"):
        ContactConfig(method="kalman")
    with pytest.raises(ValueError, match="observer_gain"):
        ContactConfig(observer_gain=0.0)


def test_observer_forces_against_the_simulated_contact_forces_of_a_pronk(robot):
    """A 2 s simulated pronk (MuJoCo, realistic joint losses, soft feet, realistic sensor noise), both detectors
    given the simulated actuator model: the observer's vertical foot forces follow the simulator's normal contact
    forces in steady stance (RMS < 5 N, loads 0-150 N) and in steady swing (|f| < 25 N; the inverse dynamics with
    differenced accelerations reads > 35 N), and its flags disagree with the simulator's on < 1 % of foot-samples."""
    from mcoe_ros.sim.mjcf import REALISTIC_LOSSES, SOFT_FEET
    from mcoe_ros.sim.runner import Episode, EpisodeConfig
    from mcoe_ros.sim.sensors import REALISTIC_NOISE

    out = []
    cfg = EpisodeConfig(
        segments=[("pronk", 2.0)], losses=REALISTIC_LOSSES, contact=SOFT_FEET, noise=REALISTIC_NOISE, seed=0
    )
    Episode(cfg).run(lambda truth, meas, payload: out.append((truth, meas)))
    true_fz = np.array([tr.foot_force for tr, _ in out])
    truth = np.array([tr.contacts for tr, _ in out])
    steady = np.ones_like(truth)  # no contact change within +-10 ms
    for s in range(-5, 6):
        steady &= np.roll(truth, s, axis=0) == truth
    losses = REALISTIC_LOSSES
    params = np.concatenate([losses.viscous, losses.coulomb, losses.rotor_inertia])
    result = {}
    for method in ("dynamics", "momentum"):
        det = ContactDetector(robot, ContactConfig(method=method), compiled=False)
        det.set_actuator(ActuatorModel(robot), params)
        fz, flags, prev = [], [], None
        for _, m in out:
            dt = None if prev is None else m.t - prev.t
            ddq = None if prev is None else (m.dq - prev.dq) / dt
            dw = None if prev is None else (m.gyro - prev.gyro) / dt
            f = det.estimate_forces(m.quat, m.gyro, m.acc, m.q, m.dq, m.tau, ddq, dw, dt)
            fz.append(f[:, 2].copy())
            flags.append(det.update(m.t, f))
            prev = m
        err = np.array(fz) - true_fz
        result[method] = (
            np.sqrt(np.mean(err[steady & truth] ** 2)),
            np.abs(err[steady & ~truth]).max(),
            np.mean(np.array(flags) != truth),
        )
    stance_rms, swing_max, wrong = result["momentum"]
    assert (~truth).all(axis=1).mean() > 0.05  # a pronk: flight phases
    assert stance_rms < 5.0 and swing_max < 25.0 and wrong < 0.01, result
    assert result["dynamics"][1] > 35.0, result


def test_a_new_identified_model_is_no_change_of_momentum(robot):
    """The estimator sets the identified actuator model (and leg scale) after each solve: the observer recomputes
    the previous sample's momentum with the new model, so from the change on (K dt = 1) it reads exactly what a
    detector with the new model from the start reads (otherwise a swinging leg reads Delta I_r dq / dt once)."""
    dt = 0.002
    samples, _ = _lift_off(robot, 30, dt, 0.01, 0.0203)
    act = ActuatorModel(robot)
    old, new = np.array([0.5] * 3 + [0.1] * 3 + [0.005] * 3), np.array([1.0] * 3 + [0.2] * 3 + [0.01] * 3)
    switched = ContactDetector(robot, ContactConfig(observer_gain=1.0 / dt), compiled=False)
    fixed = ContactDetector(robot, ContactConfig(observer_gain=1.0 / dt), compiled=False)
    switched.set_actuator(act, old)
    fixed.set_actuator(act, new)
    fixed.set_leg_scale(1.1)
    for k, (quat, gyro, spec, qj, dqj, tau, dw) in enumerate(samples):
        if k == 20:
            switched.set_actuator(act, new)
            switched.set_leg_scale(1.1)
        step = None if k == 0 else dt
        a = switched.estimate_forces(quat, gyro, spec, qj, dqj, tau, None, dw, step).copy()
        b = fixed.estimate_forces(quat, gyro, spec, qj, dqj, tau, None, dw, step)
        if k >= 20:
            np.testing.assert_allclose(a, b, atol=1e-9)
        elif k > 1:
            assert np.abs(a - b).max() > 1e-3  # the models differ before the switch


def _compiled_or_skip():
    from mcoe_ros.multibody import contact

    if contact._CompiledForces is None:
        pytest.skip("compiled extension (ContactForces) not built")


class _Counting:
    """The compiled ContactForces with a count of its momentum() and observe() calls (the samples it served)."""

    def __init__(self, compiled):
        self.compiled, self.calls = compiled, 0

    def momentum(self, *args):
        self.calls += 1
        return self.compiled.momentum(*args)

    def observe(self, *args):
        self.calls += 1
        return self.compiled.observe(*args)

    def __getattr__(self, name):
        return getattr(self.compiled, name)


@pytest.mark.parametrize("floating_base", [True, False])
def test_the_compiled_momentum_terms_equal_the_python_reference(floating_base):
    """The compiled (p, rhs) and legs' J^T of one sample (ContactForces.momentum: crba symmetrised, C(q, nu0)^T nu0,
    the specific-force term) and its leg solves (ContactForces.solve) against ContactDetector._momentum's and
    _solve_legs' Python reference, on random moving samples with an identified actuator (friction, rotor inertia),
    floating and fixed base."""
    from mcoe_ros.multibody.robot import RobotSpec

    _compiled_or_skip()
    robot = RobotModel(RobotSpec(floating_base=floating_base))
    rng = np.random.default_rng(7)
    ref, fast = ContactDetector(robot, compiled=False), ContactDetector(robot, compiled=True)
    act = ActuatorModel(robot)
    params = np.concatenate([[1.0, 1.5, 2.0], [0.2, 0.3, 0.2], [0.01, 0.012, 0.015]])
    for det in (ref, fast):
        det.set_actuator(act, params)
    worst = 0.0
    for _ in range(30):
        quat = rng.normal(size=4)
        gyro, spec, dw = rng.normal(0, 2.0, 3), rng.normal(0, 15.0, 3) + [0, 0, 9.81], rng.normal(0, 20.0, 3)
        qj = np.tile([0.1, 0.8, -1.6], 4) + rng.uniform(-0.5, 0.5, 12)
        dqj, tau = rng.normal(0, 5, 12), rng.normal(0, 10, 12)
        sample = (quat, gyro, spec, qj, dqj, tau, dw)
        p_ref, rhs_ref = ref._momentum(*sample)
        p, rhs = fast._momentum(*sample, compiled=fast._compiled)
        jac_t = fast._compiled.jacobians_t.reshape(-1, 3, 3)
        ref._rhs_legs[:] = rhs_ref.reshape(-1, 3)
        forces = fast._compiled.solve(rhs_ref)
        for a, b in ((p, p_ref), (rhs, rhs_ref), (jac_t, ref._jac_t), (forces, ref._solve_legs())):
            worst = max(worst, float(np.abs(a - b).max() / (1.0 + np.abs(b).max())))
        assert np.abs(rhs_ref).max() > 1.0 and np.abs(p_ref).max() > 0.01  # the terms are exercised
    assert worst < 1e-12, worst


def test_the_compiled_observer_equals_the_python_reference_through_model_changes_and_a_restart(robot):
    """The whole observer (compiled steps, ContactForces.observe; restart at the compiled inverse dynamics and
    momentum) against the Python reference on one sample stream of a moving floating base (K dt < 1: the filter
    keeps its memory): forces to 1e-10 and equal flags through an identified-actuator change (the previous sample's
    momentum recomputed), a restart (reset, dt None), and a leg scale != 1 (the compiled detector falls back to
    Python from there)."""
    _compiled_or_skip()
    rng = np.random.default_rng(5)
    state, acc = _trajectory(robot, rng)
    dt, n = 0.002, 40
    act = ActuatorModel(robot)
    params = [np.array([1.0, 1.5, 2.0] + [0.2] * 3 + [0.01] * 3), np.array([0.5, 1.0, 1.0] + [0.1] * 3 + [0.02] * 3)]
    cfg = ContactConfig(observer_gain=200.0, force_on=2.0, force_off=1.0)
    dets = [ContactDetector(robot, cfg, compiled=c) for c in (True, False)]
    counting = dets[0]._compiled = _Counting(dets[0]._compiled)
    for det in dets:
        det.set_actuator(act, params[0])
    prev, worst, changed = None, 0.0, []
    for k in range(n):
        q, v = state(k * dt)
        quat, gyro, spec, dw = _imu_sample(robot, q, v, acc)
        tau = rng.normal(0, 5.0, 12) + 3.0 * np.sin(np.arange(12) + 0.2 * k)
        ddq = None if prev is None else (v[6:] - prev) / dt
        step = None if prev is None else dt
        if k == 12:  # a new identified actuator: the previous sample's momentum is recomputed with it
            for det in dets:
                det.set_actuator(act, params[1])
        if k == 22:  # a restart (grid gap)
            for det in dets:
                det.reset()
            step = None
        if k == 32:  # identified leg bodies: the compiled detector computes in Python from here on
            calls = counting.calls
            for det in dets:
                det.set_leg_scale(1.1)
            assert dets[0]._compiled is None
        out = [det.estimate_forces(quat, gyro, spec, q[7:], v[6:], tau, ddq, dw, step).copy() for det in dets]
        flags = [det.update(k * dt, f) for det, f in zip(dets, out, strict=True)]
        worst = max(worst, float(np.abs(out[0] - out[1]).max()))
        np.testing.assert_array_equal(flags[0], flags[1])
        changed.append(flags[1].copy())
        prev = v[6:]
    assert worst < 1e-10, worst
    assert calls == 32 + 1  # every sample before the leg scale was compiled, and the one recomputed at k = 12
    assert (np.array(changed) != changed[0]).any()  # the flags change along the stream: their equality is tested
