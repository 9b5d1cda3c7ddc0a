"""Measurement models and MultibodyNodeModel: FD of every Rx, Rp on the manifold, conventions, contract.

Run with ``pytest -s test/test_measurement.py`` to print the worst FD error seen per measurement Jacobian.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.measurement import (
    ImuAngularVelocity,
    ImuLinearVelocity,
    ImuOrientation,
    ImuSpecificForce,
    JointPosition,
    JointVelocity,
    default_measurements,
    sqrt_information,
)
from mcoe_ros.model import RobotModel
from mcoe_ros.multibody_node import MultibodyNodeData, MultibodyNodeModel, make_node_models
from mcoe_ros.node import NodeModel

FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")
EPS = 1e-6
TOL = 1e-5
PI = np.array([2.0, 0.1, -0.05, 0.2, 0.05, 0.001, 0.06, 0.002, 0.003, 0.07])
WORST: dict[str, float] = {}


@pytest.fixture(scope="module", autouse=True)
def report_worst():
    yield
    print("\nworst FD relative error (measurements, node):")
    for key, val in sorted(WORST.items()):
        print(f"  {key:34s} {val:.2e}")


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


def random_z(node: MultibodyNodeModel, rng: np.random.Generator) -> np.ndarray:
    z = rng.normal(size=node.nz)
    for meas, zs in zip(node.measurements, node.z_slices, strict=True):
        if isinstance(meas, ImuOrientation):
            z[zs] /= np.linalg.norm(z[zs])
    return z


def rel_err(analytic: np.ndarray, fd: np.ndarray) -> float:
    return float(np.abs(analytic - fd).max() / max(1.0, np.abs(fd).max()))


def record(key: str, err: float) -> None:
    WORST[key] = max(WORST.get(key, 0.0), err)
    assert err <= TOL, f"{key}: FD relative error {err:.2e}"


def check_node_fd(node: MultibodyNodeModel, x: np.ndarray, u: np.ndarray, z: np.ndarray, tag: str) -> None:
    state = node.state
    data, fd_data = node.create_data(), node.create_data()
    for d in (data, fd_data):
        d.u[:], d.z[:] = u, z
    node.calc_diff(data, x, PI)
    r0 = data.r.copy()
    node.calc(fd_data, x, PI)
    np.testing.assert_allclose(fd_data.r, r0, atol=1e-12)
    np.testing.assert_allclose(fd_data.xnext, data.xnext, atol=1e-12)

    def evaluate(xx, pp):
        node.calc(fd_data, xx, pp)
        return fd_data.xnext.copy(), fd_data.r.copy()

    fx = np.zeros((state.ndx, state.ndx))
    fp = np.zeros((state.ndx, 10))
    rx = np.zeros((node.nr, state.ndx))
    rp = np.zeros((node.nr, 10))
    for i in range(state.ndx):
        e = np.zeros(state.ndx)
        e[i] = EPS
        (xp, rpl), (xm, rmi) = evaluate(state.integrate(x, e), PI), evaluate(state.integrate(x, -e), PI)
        fx[:, i] = (state.difference(data.xnext, xp) - state.difference(data.xnext, xm)) / (2 * EPS)
        rx[:, i] = (rpl - rmi) / (2 * EPS)
    for i in range(10):
        e = np.zeros(10)
        e[i] = EPS
        (xp, rpl), (xm, rmi) = evaluate(x, PI + e), evaluate(x, PI - e)
        fp[:, i] = (state.difference(data.xnext, xp) - state.difference(data.xnext, xm)) / (2 * EPS)
        rp[:, i] = (rpl - rmi) / (2 * EPS)
    record(f"node {tag} Fx", rel_err(data.Fx, fx))
    record(f"node {tag} Fp", rel_err(data.Fp, fp))
    for meas, rs in zip(node.measurements, node.r_slices, strict=True):
        name = type(meas).__name__
        record(f"{name} Rx", rel_err(data.Rx[rs], rx[rs]))
        record(f"{name} Rp", rel_err(data.Rp[rs], rp[rs]))
        if not meas.uses_acceleration:
            assert not np.any(data.Rp[rs])


@pytest.mark.parametrize(
    "contacts, impulse",
    [((), ()), (FEET[:1], ()), (FEET[:2], ()), (FEET[:3], ()), (FEET, ()), (FEET, FEET[2:]), (FEET[:1], FEET[:1])],
)
def test_fd_measurements_in_all_phases(robot, contacts, impulse):
    rng = np.random.default_rng(100 + len(contacts) + 10 * len(impulse))
    node = MultibodyNodeModel(robot, contacts, 0.01, all_measurements(robot), impulse)
    for _ in range(2):
        x = random_state(robot, rng)
        check_node_fd(node, x, rng.normal(size=robot.nj), random_z(node, rng), f"{len(contacts)}c{len(impulse)}i")


def test_node_contract_shapes(robot):
    meas = default_measurements(robot)
    node = MultibodyNodeModel(robot, FEET, 0.002, meas)
    assert isinstance(node, NodeModel)
    assert (node.npi, node.nu, node.nz, node.nr) == (10, 12, 12 + 12 + 3 + 4 + 3, 12 + 12 + 3 + 3 + 3)
    data = node.create_data()
    assert isinstance(data, MultibodyNodeData)
    assert data.Fx.shape == (36, 36) and data.Fp.shape == (36, 10)
    assert data.Rx.shape == (node.nr, 36) and data.Rp.shape == (node.nr, 10)
    assert data.xnext.shape == (37,) and data.z.shape == (node.nz,) and data.u.shape == (12,)


def test_make_node_models_is_lazy_and_canonical(robot):
    models = make_node_models(robot, 0.002, default_measurements(robot))
    assert len(models) == 0
    a = models[("FR_foot", "FL_foot"), ()]
    b = models[("FL_foot", "FR_foot"), ()]
    c = models.get_model(["FL_foot", "FR_foot"], ["FR_foot"])
    assert a is b and c is not a and len(models) == 2
    assert a.contacts == ("FL_foot", "FR_foot") and c.impulse == ("FR_foot",)
    with pytest.raises(ValueError):
        models[("XX_foot",), ()]


def predicted(node: MultibodyNodeModel, x: np.ndarray, u: np.ndarray, pi: np.ndarray) -> np.ndarray:
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
    node = MultibodyNodeModel(robot, (), 0.01, [JointPosition(robot), JointVelocity(robot), ImuAngularVelocity(robot)])
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
    node = MultibodyNodeModel(robot, (), 0.01, [meas])
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
    free = MultibodyNodeModel(robot, (), 0.01, [ImuSpecificForce(robot)])
    np.testing.assert_allclose(predicted(free, x, np.zeros(12), PI), 0.0, atol=1e-9)
    # gravity-compensating torques with 4 feet -> a = 0
    data = model.createData()
    g = pin.computeGeneralizedGravity(model, data, q)
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    jac = np.vstack([pin.getFrameJacobian(model, data, fid, pin.LOCAL)[:3] for fid in robot.foot_frame_ids])
    lam = np.linalg.lstsq(jac[:, :6].T, g[:6], rcond=None)[0]
    u = g[6:] - jac[:, 6:].T @ lam
    stand = MultibodyNodeModel(robot, FEET, 0.01, [ImuSpecificForce(robot)])
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


def test_node_payload_and_shared_model_untouched(robot):
    """The node uses pi (not robot.payload_pi) and never writes robot.model."""
    rng = np.random.default_rng(4)
    x, u = random_state(robot, rng), rng.normal(size=12)
    node = MultibodyNodeModel(robot, FEET[:2], 0.01, [ImuSpecificForce(robot)])
    before = robot.model.inertias[robot.payload_joint].copy()
    h0 = predicted(node, x, u, np.zeros(10))
    h1 = predicted(node, x, u, PI)
    assert np.abs(h1 - h0).max() > 1e-3
    assert robot.model.inertias[robot.payload_joint] == before
