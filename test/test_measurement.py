"""Measurement models and MultibodyIntervalModel: FD of every Rx, Rp on the manifold, conventions, contract.

Run with ``pytest -s test/test_measurement.py`` to print the worst FD error seen per measurement Jacobian.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.multibody.actuator import ActuatorModel, ParameterLayout
from mcoe_ros.multibody.interval import IntervalModelCache, MultibodyIntervalData, MultibodyIntervalModel
from mcoe_ros.multibody.measurements import (
    BaseHeight,
    ContactVelocity,
    ImuAngularVelocity,
    ImuLinearVelocity,
    ImuOrientation,
    ImuSpecificForce,
    JointPosition,
    JointVelocity,
    default_measurements,
    sqrt_information,
)
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.ocp import numdiff
from mcoe_ros.ocp.interval import IntervalModel

FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")
PI = np.array([2.0, 0.1, -0.05, 0.2, 0.05, 0.001, 0.06, 0.002, 0.003, 0.07])
PI_CHECK = PI  #: the parameter vector check_interval_fd evaluates at
WORST = numdiff.WorstErrors(tolerance=1e-5)


@pytest.fixture(scope="module", autouse=True)
def report_worst():
    yield
    print("\n" + WORST.report("measurements, interval model"))


@pytest.fixture(scope="module")
def robot():
    return RobotModel()


def all_measurements(robot: RobotModel) -> list:
    return [
        JointPosition(robot, std=0.01),
        JointVelocity(robot, std=0.1),
        ImuAngularVelocity(robot, cov=np.diag([1e-4, 2e-4, 3e-4]) + 1e-5),
        ImuOrientation(robot, std=(0.01, 0.02, 0.5)),
        ImuSpecificForce(robot, std=0.1),
        ImuLinearVelocity(robot, std=0.05),
    ]


def random_state(robot: RobotModel, rng: np.random.Generator) -> np.ndarray:
    model = robot.model
    q = pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq))
    q[:3] = 0.1 * rng.normal(size=3)
    return np.concatenate([q, rng.normal(size=model.nv)])


def random_z(node: MultibodyIntervalModel, rng: np.random.Generator) -> np.ndarray:
    z = rng.normal(size=node.nz)
    for meas, zs in zip(node.measurements, node.z_slices, strict=True):
        if isinstance(meas, ImuOrientation):
            z[zs] /= np.linalg.norm(z[zs])
    return z


def check_interval_fd(model: MultibodyIntervalModel, x: np.ndarray, u: np.ndarray, z: np.ndarray, tag: str) -> None:
    state = model.state
    data, fd_data = model.create_data(), model.create_data()
    for d in (data, fd_data):
        d.u[:], d.z[:] = u, z
    pi = PI_CHECK
    model.calc_diff(data, x, pi)
    model.calc(fd_data, x, pi)
    np.testing.assert_allclose(fd_data.r, data.r, atol=1e-12)
    np.testing.assert_allclose(fd_data.xnext, data.xnext, atol=1e-12)

    def evaluate(xx, pp):
        model.calc(fd_data, xx, pp)
        return fd_data.xnext.copy(), fd_data.r.copy()

    fx, rx = numdiff.jacobian(lambda xx: evaluate(xx, pi), x, state=state, output_states=[state, None])
    fp, rp = numdiff.jacobian(lambda pp: evaluate(x, pp), pi, output_states=[state, None])
    WORST.record(f"interval {tag} Fx", data.Fx, fx)
    WORST.record(f"interval {tag} Fp", data.Fp, fp)
    for meas, rs in zip(model.measurements, model.r_slices, strict=True):
        name = type(meas).__name__
        WORST.record(f"{name} Rx", data.Rx[rs], rx[rs])
        WORST.record(f"{name} Rp", data.Rp[rs], rp[rs])
        if not meas.depends_on_pi:
            assert not np.any(data.Rp[rs])


@pytest.mark.parametrize("contacts, impulse", [((), ()), (FEET[:2], ()), (FEET, FEET[2:])])
def test_fd_with_biases_and_actuator_parameters(robot, contacts, impulse):
    """pi = [payload, actuator (9), gyro bias, accelerometer bias, leg mass scale]: every Rp column (the leg scale's
    through the acceleration and the post-impact foot velocity), the bias columns exactly -W."""
    rng = np.random.default_rng(300 + len(contacts) + 10 * len(impulse))
    act = ActuatorModel(robot)
    layout = ParameterLayout(n_actuator=act.n_params, gyro_bias=True, acc_bias=True, leg_mass=True)
    meas = [
        JointPosition(robot, std=0.01),
        ImuAngularVelocity(robot, std=0.02, bias=layout.gyro),
        ImuOrientation(robot, std=0.05),
        ImuSpecificForce(robot, std=0.1, bias=layout.acc),
        ContactVelocity(robot, robot.foot_frame_ids[-1], std=0.01),
    ]
    model = MultibodyIntervalModel(robot, contacts, 0.01, meas, impulse, actuator=act, layout=layout)
    assert (
        model.npi == 26 and layout.gyro == slice(19, 22) and layout.acc == slice(22, 25) and layout.leg == slice(25, 26)
    )
    pi = np.r_[PI, 0.8, 1.2, 1.5, 0.15, 0.2, 0.25, 0.008, 0.01, 0.012, 0.01, -0.02, 0.005, 0.05, -0.03, 0.1, 1.07]
    x = random_state(robot, rng)
    x[robot.nq + 6 :] *= 0.05
    global PI_CHECK
    PI_CHECK = pi
    try:
        check_interval_fd(model, x, rng.normal(size=robot.nj), random_z(model, rng), "biased " + str(len(contacts)))
    finally:
        PI_CHECK = PI
    data = model.create_data()
    model.calc_diff(data, x, pi)
    gyro_rows, acc_rows = model.r_slices[1], model.r_slices[3]
    np.testing.assert_allclose(data.Rp[gyro_rows, layout.gyro], -meas[1].W)
    np.testing.assert_allclose(data.Rp[acc_rows, layout.acc], -meas[3].W)


@pytest.mark.parametrize(
    "contacts, impulse",
    [((), ()), (FEET[:1], ()), (FEET[:2], ()), (FEET[:3], ()), (FEET, ()), (FEET, FEET[2:]), (FEET[:1], FEET[:1])],
)
def test_fd_measurements_in_all_phases(robot, contacts, impulse):
    rng = np.random.default_rng(100 + len(contacts) + 10 * len(impulse))
    model = MultibodyIntervalModel(robot, contacts, 0.01, all_measurements(robot), impulse)
    for _ in range(2):
        x = random_state(robot, rng)
        check_interval_fd(model, x, rng.normal(size=robot.nj), random_z(model, rng), f"{len(contacts)}c{len(impulse)}i")


def test_interval_contract_shapes(robot):
    meas = default_measurements(robot)
    node = MultibodyIntervalModel(robot, FEET, 0.002, meas)
    assert isinstance(node, IntervalModel)
    assert (node.npi, node.nu, node.nz, node.nr) == (10, 12, 12 + 12 + 3 + 4 + 3, 12 + 12 + 3 + 3 + 3)
    data = node.create_data()
    assert isinstance(data, MultibodyIntervalData)
    assert data.Fx.shape == (36, 36) and data.Fp.shape == (36, 10)
    assert data.Rx.shape == (node.nr, 36) and data.Rp.shape == (node.nr, 10)
    assert data.xnext.shape == (37,) and data.z.shape == (node.nz,) and data.u.shape == (12,)


def test_interval_model_cache_is_lazy_and_canonical(robot):
    models = IntervalModelCache(robot, 0.002, default_measurements(robot), foot_velocity_std=0.02)
    assert len(models) == 0
    a = models[("FR_foot", "FL_foot"), ()]
    b = models[("FL_foot", "FR_foot"), (), ()]
    c = models[["FL_foot", "FR_foot"], ["FR_foot"]]
    d = models[FEET, (), ("RR_foot", "FL_foot")]
    assert a is b and c is not a and len(models) == 3
    assert a.contacts == ("FL_foot", "FR_foot") and c.impulse == ("FR_foot",)
    assert d.nr == a.nr + 6 and [type(m).__name__ for m in d.measurements[-2:]] == ["ContactVelocity"] * 2
    with pytest.raises(ValueError):
        models[("XX_foot",), ()]
    with pytest.raises(ValueError, match="foot_velocity_std"):
        IntervalModelCache(robot, 0.002, default_measurements(robot))[FEET, (), FEET]


@pytest.mark.parametrize("contacts, impulse", [((), ()), (FEET, ()), (FEET, FEET[2:])])
def test_base_height_fd(robot, contacts, impulse):
    """BaseHeight (noise.stance_foot_height): h = the base origin's world z; Rx against finite differences on the
    manifold: the base's local translation only (R_WB[2]), no rotation, joint or velocity column."""
    rng = np.random.default_rng(500 + len(contacts) + 10 * len(impulse))
    meas = [JointPosition(robot, std=0.01), BaseHeight(robot, robot.foot_frame_ids[2], std=0.005)]
    model = MultibodyIntervalModel(robot, contacts, 0.01, meas, impulse)
    for _ in range(2):
        x = random_state(robot, rng)
        check_interval_fd(model, x, rng.normal(size=robot.nj), random_z(model, rng), f"base height {len(contacts)}")
    data = model.create_data()
    data.z[:] = 0.0
    model.calc_diff(data, x, PI)
    assert data.r[-1] == pytest.approx(-x[2] / 0.005, abs=1e-12)
    assert np.any(data.Rx[-1, :3]) and not np.any(data.Rx[-1, 3:])
    cache = IntervalModelCache(robot, 0.002, default_measurements(robot), foot_velocity_std=0.02, foot_height_std=0.01)
    m = cache[FEET, (), ("RR_foot", "FL_foot")]
    assert [type(mm).__name__ for mm in m.measurements[-4:]] == ["ContactVelocity", "BaseHeight"] * 2
    assert [mm.frame_id for mm in m.measurements[-4:]] == [robot.foot_frame_ids[0]] * 2 + [robot.foot_frame_ids[3]] * 2
    assert m.nr == cache[FEET, ()].nr + 8


def predicted(node: MultibodyIntervalModel, x: np.ndarray, u: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """h(x) of the Euclidean measurements (r with z = 0 and W = -I)."""
    data = node.create_data()
    data.u[:] = u
    node.calc(data, x, pi)
    return np.concatenate(
        [md.h for meas, md in zip(node.measurements, data.meas, strict=True) if not isinstance(meas, ImuOrientation)]
    )


def test_joint_and_gyro_values(robot):
    rng = np.random.default_rng(1)
    x = random_state(robot, rng)
    node = MultibodyIntervalModel(
        robot, (), 0.01, [JointPosition(robot), JointVelocity(robot), ImuAngularVelocity(robot)]
    )
    h = predicted(node, x, np.zeros(12), PI)
    np.testing.assert_allclose(h[:12], x[7:19])
    np.testing.assert_allclose(h[12:24], x[25:])
    # IMU is rigidly on the trunk (same axes in the Go1 URDF): omega_imu = R_imu^T R_base omega_base
    model, data = robot.model, robot.model.createData()
    pin.framesForwardKinematics(model, data, x[:19])
    rel = data.oMf[robot.imu_frame_id].rotation.T @ data.oMi[1].rotation
    np.testing.assert_allclose(h[24:27], rel @ x[22:25], atol=1e-12)


@pytest.mark.parametrize("order", ["wxyz", "xyzw"])
def test_orientation_quaternion_convention(robot, order):
    rng = np.random.default_rng(2)
    x = random_state(robot, rng)
    meas = ImuOrientation(robot, std=0.1, quat_order=order)
    node = MultibodyIntervalModel(robot, (), 0.01, [meas])
    data = node.create_data()
    model, pdata = robot.model, robot.model.createData()
    pin.framesForwardKinematics(model, pdata, x[:19])
    rot = pdata.oMf[robot.imu_frame_id].rotation
    coeffs = pin.Quaternion(rot).coeffs()  # x, y, z, w
    data.z[:] = np.r_[coeffs[3], coeffs[:3]] if order == "wxyz" else coeffs
    node.calc(data, x, PI)
    assert np.abs(data.r).max() < 1e-10
    # a measured rotation 0.05 rad about the IMU z axis gives r = W (0, 0, 0.05)
    meas_rot = rot @ pin.exp3(np.array([0.0, 0.0, 0.05]))
    coeffs = pin.Quaternion(meas_rot).coeffs()
    data.z[:] = np.r_[coeffs[3], coeffs[:3]] if order == "wxyz" else coeffs
    node.calc(data, x, PI)
    np.testing.assert_allclose(data.r, [0.0, 0.0, 0.5], atol=1e-10)


def test_specific_force_physics(robot):
    """Free fall (u = 0, v = 0): f = 0. Standing still on 4 feet: f = -R^T g (reads +g upward)."""
    model = robot.model
    q = pin.neutral(model)
    q[3:7] = pin.Quaternion(pin.exp3(np.array([0.1, -0.2, 0.3]))).coeffs()
    q[7:] = np.tile([0.0, 0.8, -1.6], 4)
    x = np.concatenate([q, np.zeros(model.nv)])
    free = MultibodyIntervalModel(robot, (), 0.01, [ImuSpecificForce(robot)])
    np.testing.assert_allclose(predicted(free, x, np.zeros(12), PI), 0.0, atol=1e-9)
    # gravity-compensating torques with 4 feet -> a = 0
    data = model.createData()
    g = pin.computeGeneralizedGravity(model, data, q)
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    jac = np.vstack([pin.getFrameJacobian(model, data, fid, pin.LOCAL)[:3] for fid in robot.foot_frame_ids])
    lam = np.linalg.lstsq(jac[:, :6].T, g[:6], rcond=None)[0]
    u = g[6:] - jac[:, 6:].T @ lam
    stand = MultibodyIntervalModel(robot, FEET, 0.01, [ImuSpecificForce(robot)])
    rot = data.oMf[robot.imu_frame_id].rotation
    np.testing.assert_allclose(predicted(stand, x, u, np.zeros(10)), rot.T @ [0.0, 0.0, 9.81], atol=1e-7)


def test_whitening_matches_covariance():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(3, 3))
    cov = a @ a.T + 0.1 * np.eye(3)
    w = sqrt_information(3, cov=cov)
    e = rng.normal(size=3)
    np.testing.assert_allclose(0.5 * np.sum((w @ e) ** 2), 0.5 * e @ np.linalg.solve(cov, e))
    np.testing.assert_allclose(sqrt_information(2, std=(0.5, 2.0)), np.diag([2.0, 0.5]))


def test_interval_payload_and_shared_model_untouched(robot):
    """The interval model uses pi (not robot.payload_pi) and never writes robot.model."""
    rng = np.random.default_rng(4)
    x, u = random_state(robot, rng), rng.normal(size=12)
    node = MultibodyIntervalModel(robot, FEET[:2], 0.01, [ImuSpecificForce(robot)])
    before = robot.model.inertias[robot.payload_joint].copy()
    h0 = predicted(node, x, u, np.zeros(10))
    h1 = predicted(node, x, u, PI)
    assert np.abs(h1 - h0).max() > 1e-3
    assert robot.model.inertias[robot.payload_joint] == before
