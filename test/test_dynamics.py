"""Phase dynamics f_p (free, 1-4 feet, reset map): central finite differences on the manifold, physics checks.

Run with ``pytest -s test/test_dynamics.py`` to print the worst FD error seen per Jacobian.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.multibody.actuator import ActuatorModel, ParameterLayout
from mcoe_ros.multibody.dynamics import PhaseDynamicsModel
from mcoe_ros.multibody.robot import RobotModel, RobotSpec
from mcoe_ros.multibody.state import StateMultibody
from mcoe_ros.ocp import numdiff

LOCAL, LWA = pin.ReferenceFrame.LOCAL, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")
PI = np.array([2.0, 0.1, -0.05, 0.2, 0.05, 0.001, 0.06, 0.002, 0.003, 0.07])  # 2 kg payload, c = (5, -2.5, 10) cm
WORST = numdiff.WorstErrors(tolerance=1e-5)


@pytest.fixture(scope="module", autouse=True)
def report_worst():
    yield
    print("\n" + WORST.report("dynamics"))


@pytest.fixture(scope="module")
def robot():
    return RobotModel()


def random_state(robot: RobotModel, rng: np.random.Generator) -> np.ndarray:
    model = robot.model
    q = pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq))
    q[:3] = 0.1 * rng.normal(size=3)
    return np.concatenate([q, rng.normal(size=model.nv)])


ACTUATOR_P = np.r_[0.8, 1.2, 1.5, 0.15, 0.2, 0.25, 0.008, 0.01, 0.012]  # b_v, b_c, I_r per hip/thigh/calf


def fd_dynamics(dyn: PhaseDynamicsModel, x: np.ndarray, u: np.ndarray, pi: np.ndarray) -> dict:
    """Central FD of (xnext on the manifold, a, lam) w.r.t. x (tangent) and pi."""
    state = StateMultibody(dyn.robot.model)
    data = dyn.create_data()

    def evaluate(xx, pp):
        dyn.calc(data, xx, u, pp)
        return data.xnext.copy(), data.a.copy(), data.lam.copy()

    outs = [state, None, None]
    fx, a_x, lam_x = numdiff.jacobian(lambda xx: evaluate(xx, pi), x, state=state, output_states=outs)
    fp, a_pi, lam_pi = numdiff.jacobian(lambda pp: evaluate(x, pp), pi, output_states=outs)
    return {"Fx": fx, "Fp": fp, "a_x": a_x, "a_pi": a_pi, "lam_x": lam_x, "lam_pi": lam_pi}


def check_fd(
    dyn: PhaseDynamicsModel,
    x: np.ndarray,
    u: np.ndarray,
    tag: str,
    lam_map: np.ndarray | None = None,
    pi: np.ndarray = PI,
) -> None:
    """FD-check Fx, Fp, da/d(x, pi) and (lam_map @) dlam/d(x, pi) at (x, u, pi)."""
    data = dyn.create_data()
    dyn.calc_diff(data, x, u, pi)
    calc_data = dyn.create_data()
    dyn.calc(calc_data, x, u, pi)
    np.testing.assert_allclose(data.xnext, calc_data.xnext, atol=1e-12)
    fd = fd_dynamics(dyn, x, u, pi)
    WORST.record(f"{tag} Fx", data.Fx, fd["Fx"])
    WORST.record(f"{tag} Fp", data.Fp, fd["Fp"])
    WORST.record(f"{tag} da_dx", data.da_dx, fd["a_x"])
    WORST.record(f"{tag} da_dpi", data.da_dpi, fd["a_pi"])
    if dyn.nc:
        sel = np.eye(dyn.nc) if lam_map is None else lam_map
        WORST.record(f"{tag} dlam_dx", sel @ data.dlam_dx, sel @ fd["lam_x"])
        WORST.record(f"{tag} dlam_dpi", sel @ data.dlam_dpi, sel @ fd["lam_pi"])


PHASES = [
    ((), (), LOCAL),
    (FEET[:1], (), LOCAL),
    (FEET[:2], (), LWA),
    (FEET[1:], (), LOCAL),
    (FEET, (), LOCAL),
    (FEET, (), LWA),
]
RESETS = [
    (FEET, FEET[:2], LOCAL),
    (FEET[:1], FEET[:1], LWA),
    (FEET[:3], FEET[:3], LOCAL),
    (FEET, FEET, LWA),
]


@pytest.mark.parametrize("contacts, impulse, ref", PHASES[::2] + RESETS)
def test_fd_with_actuator_model(robot, contacts, impulse, ref):
    """Friction (velocity dependence in Fx, b_v and b_c columns of Fp) and rotor inertia (mass matrix and impulse)."""
    rng = np.random.default_rng(20 + len(contacts) + 10 * len(impulse))
    act = ActuatorModel(robot)
    dyn = PhaseDynamicsModel(robot, contacts, 0.01, impulse, reference_frame=ref, actuator=act)
    assert dyn.npi == 19 and dyn.layout.actuator == slice(10, 19)
    tag = f"actuator {len(contacts)}c{len(impulse)}i"
    for _ in range(2):
        x = random_state(robot, rng)
        x[robot.nq + 6 :] *= 0.05  # joint speeds around the Coulomb smoothing (0.05 rad/s): the nonlinear region
        check_fd(dyn, x, rng.normal(size=robot.nj), tag, pi=np.r_[PI, ACTUATOR_P])


def test_actuator_losses_enter_as_torque_and_armature(robot):
    """Free phase: a = (M + diag(I_r))^-1 (S^T (u - b_v dq - b_c tanh(dq/eps)) - h), checked against plain Pinocchio."""
    rng = np.random.default_rng(5)
    act = ActuatorModel(robot, coulomb_smoothing=0.05)
    dyn = PhaseDynamicsModel(robot, (), 0.01, actuator=act)
    x, u = random_state(robot, rng), rng.normal(size=robot.nj)
    data = dyn.create_data()
    dyn.calc(data, x, u, np.r_[np.zeros(10), ACTUATOR_P])
    model = robot.model.copy()
    groups = [0 if "hip" in n else (1 if "thigh" in n else 2) for n in robot.joint_names]
    model.armature[6:] = ACTUATOR_P[6:9][groups]
    dq = x[robot.nq + 6 :]
    loss = ACTUATOR_P[0:3][groups] * dq + ACTUATOR_P[3:6][groups] * np.tanh(dq / 0.05)
    ref = pin.aba(model, model.createData(), x[: robot.nq], x[robot.nq :], np.r_[np.zeros(6), u - loss])
    np.testing.assert_allclose(data.a, ref, atol=1e-10)
    assert robot.model.armature[6] == 0.0  # the shared model is untouched


@pytest.mark.parametrize("contacts, impulse, ref", PHASES[::2] + RESETS)
def test_fd_with_leg_mass_scale(robot, contacts, impulse, ref):
    """Leg mass scale k (last pi entry, with the actuator block before it): its Fp / da / dlam column in free, contact
    and reset phases, away from k = 1."""
    rng = np.random.default_rng(40 + len(contacts) + 10 * len(impulse))
    act = ActuatorModel(robot)
    layout = ParameterLayout(n_actuator=act.n_params, leg_mass=True)
    dyn = PhaseDynamicsModel(robot, contacts, 0.01, impulse, reference_frame=ref, actuator=act, layout=layout)
    assert dyn.npi == 20 and layout.leg == slice(19, 20) and len(dyn.leg_joints) == 12
    tag = f"leg mass {len(contacts)}c{len(impulse)}i"
    for scale in (0.93, 1.08):
        check_fd(dyn, random_state(robot, rng), rng.normal(size=robot.nj), tag, pi=np.r_[PI, ACTUATOR_P, scale])


def test_leg_mass_scale_multiplies_the_leg_bodies(robot):
    """Free phase with k: the same acceleration as plain Pinocchio on a model whose 12 leg bodies have k times their
    URDF mass and inertia (CoM unchanged), the trunk untouched; the shared model stays nominal."""
    rng = np.random.default_rng(6)
    dyn = PhaseDynamicsModel(robot, (), 0.01, layout=ParameterLayout(leg_mass=True))
    x, u, k = random_state(robot, rng), rng.normal(size=robot.nj), 0.9
    data = dyn.create_data()
    dyn.calc(data, x, u, np.r_[PI, k])
    model = robot.model.copy()
    model.inertias[1] = pin.Inertia.FromDynamicParameters(robot.combined_pi(PI))
    for j in range(2, model.njoints):
        nom = robot.nominal_inertias[j]
        model.inertias[j] = pin.Inertia(k * nom.mass, nom.lever, k * nom.inertia)
    ref = pin.aba(model, model.createData(), x[: robot.nq], x[robot.nq :], np.r_[np.zeros(6), u])
    np.testing.assert_allclose(data.a, ref, atol=1e-10)
    assert robot.leg_joints == list(range(2, 14))
    assert abs(robot.leg_mass - sum(robot.model.inertias[j].mass for j in range(2, 14))) < 1e-12
    assert robot.model.inertias[2].mass == robot.nominal_inertias[2].mass  # the shared model is untouched


@pytest.mark.parametrize("contacts, impulse, ref", PHASES + RESETS)
def test_fd_phase_and_reset(robot, contacts, impulse, ref):
    rng = np.random.default_rng(len(contacts) + 10 * len(impulse) + (ref == LWA))
    dyn = PhaseDynamicsModel(robot, contacts, 0.01, impulse, reference_frame=ref)
    tag = f"{len(contacts)}c{len(impulse)}i"
    for _ in range(2):
        check_fd(dyn, random_state(robot, rng), rng.normal(size=robot.nj), tag)


@pytest.mark.parametrize("ref", [LOCAL, LWA])
def test_fd_baumgarte_with_anchors(robot, ref):
    rng = np.random.default_rng(3)
    dyn = PhaseDynamicsModel(robot, FEET[::2], 0.01, reference_frame=ref, kp=100.0, kd=20.0)
    x = random_state(robot, rng)
    data = dyn.create_data()
    pdata = robot.model.createData()
    pin.framesForwardKinematics(robot.model, pdata, x[: robot.nq])
    anchors = np.array([pdata.oMf[robot.model.getFrameId(f)].translation + 0.01 for f in FEET[::2]])
    u = rng.normal(size=robot.nj)
    dyn.calc(data, x, u, PI)
    a_no_anchor = data.a.copy()
    data.anchors = anchors
    dyn.calc(data, x, u, PI)
    assert np.abs(data.a - a_no_anchor).max() > 1e-3  # kp acts with explicit anchors only
    # FD through a data that carries the anchors
    orig = dyn.create_data

    def create_with_anchors():
        d = orig()
        d.anchors = anchors
        return d

    dyn.create_data = create_with_anchors
    check_fd(dyn, x, u, "2c baumgarte")


def test_fd_and_law_of_a_damped_landing(robot):
    """A landing over time (``damped`` contacts, dynamics.landing_damping): the damped feet's classical acceleration
    (LOCAL) is -kd times their velocity, the others' is zero; FD-exact Jacobians with a damped subset."""
    rng = np.random.default_rng(11)
    kd, damped = 25.0, (FEET[0], FEET[3])
    dyn = PhaseDynamicsModel(robot, FEET, 0.01, kd=kd, damped=damped)
    x = random_state(robot, rng)
    u = rng.normal(size=robot.nj)
    data = dyn.create_data()
    dyn.calc(data, x, u, PI)
    model = data.model  # the robot with the payload of the call
    pdata = model.createData()
    pin.forwardKinematics(model, pdata, x[: robot.nq], x[robot.nq :], data.a)
    for foot in FEET:
        fid = model.getFrameId(foot)
        acc = pin.getFrameClassicalAcceleration(model, pdata, fid, LOCAL).linear
        vel = pin.getFrameVelocity(model, pdata, fid, LOCAL).linear
        assert np.abs(vel).max() > 0.1  # the law is not trivially satisfied
        np.testing.assert_allclose(acc, -kd * vel if foot in damped else np.zeros(3), atol=1e-6)
    check_fd(dyn, x, u, "4c damped 2")
    with pytest.raises(ValueError, match="damped"):
        PhaseDynamicsModel(robot, FEET[:2], 0.01, kd=kd, damped=(FEET[3],))


def test_fd_restitution(robot):
    rng = np.random.default_rng(5)
    dyn = PhaseDynamicsModel(robot, FEET[:2], 0.01, FEET[:2], restitution=0.5)
    check_fd(dyn, random_state(robot, rng), rng.normal(size=robot.nj), "2c2i r=0.5")


def test_fd_fixed_base(robot):
    rng = np.random.default_rng(7)
    fixed = RobotModel(RobotSpec(floating_base=False, payload_frame="FL_calf"))
    assert fixed.nv == fixed.nj == 12
    for contacts in ((), ("RR_foot",)):
        dyn = PhaseDynamicsModel(fixed, contacts, 0.01)
        model = fixed.model
        q = pin.randomConfiguration(model)
        check_fd(dyn, np.concatenate([q, rng.normal(size=model.nv)]), rng.normal(size=12), "fixed base")


def standing_state(robot: RobotModel) -> tuple[np.ndarray, np.ndarray]:
    """Level trunk, bent legs, v = 0, and torques balancing gravity with the feet (min-norm forces)."""
    model = robot.model
    q = pin.neutral(model)
    q[2] = 0.3
    q[7:] = np.tile([0.0, 0.8, -1.6], 4)
    data = model.createData()
    g = pin.computeGeneralizedGravity(model, data, q)
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    jac = np.vstack([pin.getFrameJacobian(model, data, fid, LWA)[:3] for fid in robot.foot_frame_ids])
    lam = np.linalg.lstsq(jac[:, :6].T, g[:6], rcond=None)[0]  # base rows: g_b = J_b^T lam
    u = g[6:] - jac[:, 6:].T @ lam
    return np.concatenate([q, np.zeros(model.nv)]), u


@pytest.mark.parametrize("ref", [LOCAL, LWA])
def test_standing_zero_acceleration_and_force_sign(robot, ref):
    x, u = standing_state(robot)
    dyn = PhaseDynamicsModel(robot, FEET, 0.01, reference_frame=ref)
    data = dyn.create_data()
    dyn.calc(data, x, u, np.zeros(10))
    assert np.abs(data.a).max() < 1e-8
    model = data.model
    pdata = model.createData()
    pin.framesForwardKinematics(model, pdata, x[: robot.nq])
    lam = data.lam.reshape(4, 3)
    world = np.array(
        [lam[i] if ref == LWA else pdata.oMf[fid].rotation @ lam[i] for i, fid in enumerate(robot.foot_frame_ids)]
    )
    # forces ON the robot: upward, summing to the weight
    assert np.all(world[:, 2] > 0.0)
    np.testing.assert_allclose(world.sum(axis=0), [0.0, 0.0, robot.total_mass * 9.81], atol=1e-6)
    # without contacts: zero torque -> free fall of the level trunk (base z acceleration -g)
    free = PhaseDynamicsModel(robot, (), 0.01)
    fdata = free.create_data()
    free.calc(fdata, x, np.zeros(robot.nj), np.zeros(10))
    np.testing.assert_allclose(fdata.a, np.r_[0.0, 0.0, -9.81, np.zeros(15)], atol=1e-9)
    # next state: stays put (v' = 0, q' = q)
    np.testing.assert_allclose(data.xnext[: robot.nq], x[: robot.nq], atol=1e-9)


def test_payload_enters_exactly(robot, tmp_path):
    rng = np.random.default_rng(11)
    loaded = RobotModel()
    loaded.set_payload(PI)
    for contacts in ((), FEET[:2], FEET):
        x, u = random_state(robot, rng), rng.normal(size=robot.nj)
        dyn = PhaseDynamicsModel(robot, contacts, 0.01)
        data = dyn.create_data()
        dyn.calc(data, x, u, PI)
        ref_dyn = PhaseDynamicsModel(loaded, contacts, 0.01)
        ref_data = ref_dyn.create_data()
        ref_data.model = loaded.model  # the robot model with the payload set, used as is
        ref_dyn.payload_on_universe = True  # do not touch its inertia
        ref_data.pdata = loaded.model.createData()
        if contacts:
            pin.initConstraintDynamics(loaded.model, ref_data.pdata, ref_data.cmodels, ref_data.cdatas)
        ref_dyn.calc(ref_data, x, u, np.zeros(10))
        np.testing.assert_allclose(data.a, ref_data.a, rtol=1e-10, atol=1e-9)
        np.testing.assert_allclose(data.xnext, ref_data.xnext, rtol=1e-12, atol=1e-12)
    # the shared robot model is never modified
    assert robot.model.inertias[robot.payload_joint] == robot.nominal_inertias[robot.payload_joint]


def test_payload_derivative_matches_dense_kkt(robot):
    """Paper eq. 18: d[a; -lambda]/dpi = -KKT^-1 [Y A; 0] with the undamped KKT of M, J (LOCAL)."""
    rng = np.random.default_rng(13)
    x, u = random_state(robot, rng), rng.normal(size=robot.nj)
    dyn = PhaseDynamicsModel(robot, FEET[:3], 0.01)
    data = dyn.create_data()
    dyn.calc_diff(data, x, u, PI)
    model, q = data.model, x[: robot.nq]
    pdata = model.createData()
    mass = pin.crba(model, pdata, q)
    mass = np.triu(mass) + np.triu(mass, 1).T
    pin.computeJointJacobians(model, pdata, q)
    jac = np.vstack([pin.getFrameJacobian(model, pdata, robot.foot_frame_ids[i], LOCAL)[:3] for i in range(3)])
    kkt = np.block([[mass, jac.T], [jac, np.zeros((9, 9))]])
    y = pin.computeJointTorqueRegressor(model, pdata, q, x[robot.nq :], data.a)[:, :10] @ robot.payload_to_joint
    sol = -np.linalg.solve(kkt, np.vstack([y, np.zeros((9, 10))]))
    np.testing.assert_allclose(data.da_dpi, sol[:18], atol=1e-8 * np.abs(sol).max())
    np.testing.assert_allclose(data.dlam_dpi, -sol[18:], atol=1e-8 * np.abs(sol).max())


def test_redundant_contacts_are_finite_and_exact(robot):
    rng = np.random.default_rng(17)
    x, u = random_state(robot, rng), rng.normal(size=robot.nj)
    dup = PhaseDynamicsModel(robot, ("FL_foot", "FL_foot", "FR_foot", "RL_foot", "RR_foot"), 0.01)
    ref = PhaseDynamicsModel(robot, FEET, 0.01)
    d_dup, d_ref = dup.create_data(), ref.create_data()
    dup.calc_diff(d_dup, x, u, PI)
    ref.calc_diff(d_ref, x, u, PI)
    for arr in (d_dup.xnext, d_dup.Fx, d_dup.Fp, d_dup.lam, d_dup.dlam_dx):
        assert np.all(np.isfinite(arr))
    np.testing.assert_allclose(d_dup.a, d_ref.a, atol=1e-8)
    np.testing.assert_allclose(d_dup.Fx, d_ref.Fx, atol=1e-6)
    np.testing.assert_allclose(d_dup.Fp, d_ref.Fp, atol=1e-6)
    # the duplicated foot's force is split between its two copies
    np.testing.assert_allclose(d_dup.lam[:3] + d_dup.lam[3:6], d_ref.lam[:3], atol=1e-6)
    # the split itself is not unique (minimum-norm, forward noise ~ machine eps / mu): FD-check the
    # per-point totals, which are well defined
    per_point = np.zeros((12, 15))
    per_point[:3, :3] = per_point[:3, 3:6] = np.eye(3)
    per_point[3:, 6:] = np.eye(9)
    check_fd(dup, x, u, "redundant 5c", lam_map=per_point)


def test_four_feet_with_impulse_no_nan(robot):
    rng = np.random.default_rng(19)
    dyn = PhaseDynamicsModel(robot, FEET, 0.01, FEET)
    data = dyn.create_data()
    model = robot.model
    pdata = model.createData()
    for _ in range(20):
        x = random_state(robot, rng)
        x[robot.nq :] *= 5.0  # hard landing
        dyn.calc_diff(data, x, rng.normal(size=robot.nj), PI)
        for arr in (data.xnext, data.Fx, data.Fp, data.a, data.lam, data.impulse_c, data.da_dx, data.dlam_dpi):
            assert np.all(np.isfinite(arr))
        # post-impact foot velocities vanish (r = 0), up to the damping bias ~mu
        pin.computeJointJacobians(model, pdata, x[: robot.nq])
        pin.updateFramePlacements(model, pdata)
        jac = np.vstack([pin.getFrameJacobian(model, pdata, fid, LOCAL)[:3] for fid in robot.foot_frame_ids])
        assert np.abs(jac @ data.vdyn).max() < 1e-5


def test_torque_noise_covariance_is_the_pushed_forward_torque_noise(robot):
    """dt² (da/dtau_j) diag(σ²) (da/dtau_j)ᵀ + floor² 1 against central differences of v' in the joint torques."""
    rng = np.random.default_rng(8)
    dyn = PhaseDynamicsModel(robot, FEET[:3], 0.01, FEET[:1])
    x, u = random_state(robot, rng), rng.normal(size=robot.nj)
    data = dyn.create_data()
    dyn.calc_diff(data, x, u, PI)
    std = np.linspace(0.1, 0.3, robot.nj)
    cov = dyn.velocity_noise_covariance(data, std, 0.01)

    def vnext(uu):
        d = dyn.create_data()
        dyn.calc(d, x, uu, PI)
        return d.xnext[robot.nq :].copy()

    jac = numdiff.jacobian(vnext, u) * std
    np.testing.assert_allclose(cov, jac @ jac.T + 1e-4 * np.eye(robot.nv), atol=1e-7 * np.abs(cov).max())


@pytest.mark.parametrize("frame", [LOCAL, LWA])
def test_contact_acceleration_noise_is_the_pushed_forward_constraint_noise(robot, frame):
    """da/dw of J a = -γ + w (data.da_dw = -(dλ/dτ)ᵀ) against central differences of an explicit KKT solve
    [[M, Jᵀ], [J, 0]] [a; -λ] = [τ - h; -γ + w] (contact-frame axes), and the covariance dt² σ² (da/dw)(da/dw)ᵀ
    + floor² 1 of velocity_noise_covariance."""
    rng = np.random.default_rng(9)
    dyn = PhaseDynamicsModel(robot, FEET[:3], 0.01, reference_frame=frame)
    x, u = random_state(robot, rng), rng.normal(size=robot.nj)
    data = dyn.create_data()
    dyn.calc_diff(data, x, u, PI)
    model, q, v = data.model, x[: robot.nq], x[robot.nq :]
    pdata = model.createData()
    mass = pin.crba(model, pdata, q)
    mass = np.triu(mass) + np.triu(mass, 1).T
    h = pin.nonLinearEffects(model, pdata, q, v)
    pin.forwardKinematics(model, pdata, q, v, np.zeros(robot.nv))
    pin.computeJointJacobians(model, pdata, q)
    pin.updateFramePlacements(model, pdata)
    fids = [robot.foot_frame_ids[robot.foot_names.index(f)] for f in FEET[:3]]
    jac = np.vstack([pin.getFrameJacobian(model, pdata, f, frame)[:3] for f in fids])
    gamma = np.concatenate([pin.getFrameClassicalAcceleration(model, pdata, f, frame).linear for f in fids])
    kkt = np.block([[mass, jac.T], [jac, np.zeros((9, 9))]])

    def accel(w):
        return np.linalg.solve(kkt, np.r_[data.tau - h, -gamma + w])[: robot.nv]

    np.testing.assert_allclose(accel(np.zeros(9)), data.a, atol=1e-6 * np.abs(data.a).max())
    fd = numdiff.jacobian(accel, np.zeros(9))
    WORST.record("da/dw", data.da_dw, fd)
    cov = dyn.velocity_noise_covariance(data, np.zeros(robot.nj), 0.01, 0.5)
    ref = (0.01 * 0.5) ** 2 * fd @ fd.T + 1e-4 * np.eye(robot.nv)
    np.testing.assert_allclose(cov, ref, atol=1e-7 * np.abs(ref).max())
    # J (da/dw) = 1: the noise moves the held feet and nothing else of the constraint
    np.testing.assert_allclose(jac @ data.da_dw, np.eye(9), atol=1e-6)
    free = PhaseDynamicsModel(robot, (), 0.01)
    fdata = free.create_data()
    free.calc_diff(fdata, x, u, PI)
    np.testing.assert_allclose(free.velocity_noise_covariance(fdata, np.zeros(robot.nj), 0.0, 0.5), 0.0)
