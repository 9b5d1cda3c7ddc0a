"""Implicit soft-contact interval model: FD tests of every Jacobian on the manifold, the contact law's inverse, the
implicit-function-theorem step derivatives, and consistency with the rigid-contact model in the stiff limit.

Run with ``pytest -s test/test_soft_contact.py`` to print the worst FD error seen per Jacobian.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.multibody.dynamics import PhaseDynamicsModel
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.multibody.soft_contact import ImplicitSoftContactModel, SoftContactModel
from mcoe_ros.ocp import numdiff

PI = np.array([2.0, 0.1, -0.05, 0.2, 0.05, 0.001, 0.06, 0.002, 0.003, 0.07])  # 2 kg payload, c = (5, -2.5, 10) cm
STAND = np.tile([0.0, 0.8, -1.6], 4)  # hip, thigh, calf per leg (rad)
DT = 2e-3
WORST = numdiff.WorstErrors(tolerance=1e-6)


@pytest.fixture(scope="module", autouse=True)
def report_worst():
    yield
    print("\n" + WORST.report("implicit soft contact"))


@pytest.fixture(scope="module")
def robot():
    return RobotModel()


def standing_state(
    robot: RobotModel, rng: np.random.Generator, spread: float, height: float, speed: float, tilt: float = 0.05
):
    """x (nx,) near a stance: joints STAND + spread noise, roll/pitch/yaw ~ N(0, tilt²) rad, base lowered so the
    feet's mean height is ``height`` (m, negative = penetration), velocities ~ N(0, speed²)."""
    model, data = robot.model, robot.model.createData()
    q = pin.neutral(model)
    q[7:] = STAND + spread * rng.normal(size=robot.nj)
    q[3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(tilt * rng.normal(size=3))).coeffs()
    pin.framesForwardKinematics(model, data, q)
    q[2] -= np.mean([data.oMf[f].translation[2] for f in robot.foot_frame_ids]) - height
    return np.concatenate([q, speed * rng.normal(size=model.nv)])


def test_contact_inverse_and_force_derivative():
    """acceleration() inverts force() exactly; df/de against FD (in contact, near the activation edge, in the air)."""
    contact = SoftContactModel(compliance_normal=2e-3, compliance_tangential=5e-3, time_constant=0.02, smoothing=2.0)
    rng = np.random.default_rng(3)
    for _ in range(20):
        p, v_c, a_c = 0.002 * rng.normal(size=3), 0.05 * rng.normal(size=3), rng.normal(size=3)
        f = contact.force(p, v_c, a_c)
        e = contact.error(p, v_c, a_c)
        df_de = contact.force_from_error(e)[1]
        WORST.record("contact df/de", df_de, numdiff.jacobian(lambda ee: contact.force_from_error(ee)[0], e))
        if f[2] > 1e-3 * contact.eps:  # the inverse needs a representable positive normal force
            np.testing.assert_allclose(contact.acceleration(p, v_c, f), a_c, rtol=1e-9, atol=1e-9)
    # spring-damper reading of the law at a_c = 0, deep in contact (softplus ~ identity)
    f = contact.force(np.array([0.0, 0.0, -1e-4]), np.array([0.0, 0.0, -0.01]), np.zeros(3))
    assert f[2] == pytest.approx(contact.stiffness * 1e-4 + contact.damping * 0.01, rel=1e-9)
    with pytest.raises(ValueError):
        contact.acceleration(np.zeros(3), np.zeros(3), np.array([0.0, 0.0, -1.0]))


CASES = {  # name: (mean foot height m, joint spread rad, speed, tilt rad)
    "stance": (-1e-3, 0.002, 0.01, 0.002),
    "mixed": (-1e-3, 0.15, 0.05, 0.05),  # spread and tilt lift some feet out of contact
    "flight": (0.1, 0.1, 0.3, 0.05),
}


@pytest.mark.parametrize("case", list(CASES))
def test_residual_jacobians(robot, case):
    height, spread, speed, tilt = CASES[case]
    model = ImplicitSoftContactModel(robot, DT, SoftContactModel(compliance_normal=1e-2, compliance_tangential=1e-2))
    data = model.create_data()
    rng = np.random.default_rng(11)
    for _ in range(3):
        x = standing_state(robot, rng, spread, height, speed, tilt)
        xn = model.state.integrate(x, DT * speed * rng.normal(size=model.ndx))
        u = 5.0 * rng.normal(size=robot.nj)
        model.calc_diff(data, x, xn, u, PI)
        active = int((data.forces[:, 2] > 1.0).sum())
        if case == "flight":
            assert active == 0
        else:
            assert active >= (4 if case == "stance" else 1), f"{case}: {active} feet in contact"
        check_residual_jacobians(model, data, x, xn, u, case)


def check_residual_jacobians(model, data, x, xn, u, case) -> None:
    """FD-check R0, R1, Rp, Ru at (x, x', pi = PI, u) (data holds calc_diff's result)."""
    r0, r1, rp, ru = data.R0.copy(), data.R1.copy(), data.Rp.copy(), data.Ru.copy()

    def residual(xk, xk1, pi, uu):
        model.calc(data, xk, xk1, uu, pi)
        return data.r.copy()

    fd = numdiff.jacobian(lambda xx: residual(xx, xn, PI, u), x, state=model.state)
    WORST.record(f"{case} dr/dx_k", r0, fd)
    fd = numdiff.jacobian(lambda xx: residual(x, xx, PI, u), xn, state=model.state)
    WORST.record(f"{case} dr/dx_k+1", r1, fd)
    WORST.record(f"{case} dr/dpi", rp, numdiff.jacobian(lambda pp: residual(x, xn, pp, u), PI))
    WORST.record(f"{case} dr/du", ru, numdiff.jacobian(lambda uu: residual(x, xn, PI, uu), u))


@pytest.mark.parametrize("case", ["stance", "mixed"])
def test_implicit_step_derivatives(robot, case):
    """solve_next's IFT Jacobians dx'/d(x, pi, u) = -R1⁻¹ (R0, Rp, Ru) against FD of the Newton solution."""
    height, spread, speed, tilt = CASES[case]
    model = ImplicitSoftContactModel(robot, DT, SoftContactModel(compliance_normal=1e-2, compliance_tangential=1e-2))
    data, work = model.create_data(), model.create_data()
    rng = np.random.default_rng(5)
    x = standing_state(robot, rng, spread, height, speed, tilt)
    u = 5.0 * rng.normal(size=robot.nj)
    x1 = model.solve_next(data, x, u, PI, tol=1e-13)
    model.calc(work, x, x1, u, PI)
    assert np.abs(work.r).max() < 1e-8
    assert (data.forces[:, 2] > 1.0).any()

    def step(xx, pp, uu):
        return model.solve_next(work, xx, uu, pp, guess=x1, tol=1e-13)

    st = model.state
    WORST.record(f"IFT {case} dx'/dx", data.Fx, numdiff.jacobian(lambda xx: step(xx, PI, u), x, 1e-6, st, st))
    WORST.record(f"IFT {case} dx'/dpi", data.Fp, numdiff.jacobian(lambda pp: step(x, pp, u), PI, 1e-6, None, st))
    WORST.record(f"IFT {case} dx'/du", data.Fu, numdiff.jacobian(lambda uu: step(x, PI, uu), u, 1e-6, None, st))


def test_stiff_limit_matches_rigid_contact(robot):
    """Feet on the ground at rest: the implicit step with a stiff soft contact reproduces the rigid-contact explicit
    step; the acceleration error is O(compliance) (the soft law needs a_c = -R f at the foot)."""
    q = pin.neutral(robot.model)
    q[7:] = STAND
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, q)
    heights = [data.oMf[f].translation[2] for f in robot.foot_frame_ids]
    assert np.ptp(heights) < 1e-9  # symmetric stance: all feet at one height
    q[2] -= heights[0]
    x = np.concatenate([q, np.zeros(robot.nv)])
    u = np.tile([0.0, -2.0, 6.0], 4)  # N m, partly supporting the trunk
    rigid = PhaseDynamicsModel(robot, robot.foot_names, DT, reference_frame=pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
    rdata = rigid.create_data()
    rigid.calc(rdata, x, u, PI)
    errors = []
    for compliance in (1e-4, 1e-7):
        stiff = SoftContactModel(compliance, compliance, time_constant=0.02, smoothing=0.1)
        model = ImplicitSoftContactModel(robot, DT, stiff)
        sdata = model.create_data()
        x1 = model.solve_next(sdata, x, u, PI, guess=rdata.xnext)
        assert (sdata.forces[:, 2] > 10.0).all()
        # the same total vertical force carries the robot (redundant 4-foot contact: the split may differ)
        assert sdata.forces[:, 2].sum() == pytest.approx(rdata.lam.reshape(-1, 3)[:, 2].sum(), rel=1e-3)
        a_err = np.abs(sdata.a - rdata.a).max() / np.abs(rdata.a).max()
        x_err = np.abs(model.state.difference(rdata.xnext, x1)).max()
        print(
            f"\ncompliance {compliance:.0e} 1/kg, soft vs rigid: acceleration rel. error {a_err:.2e}, state {x_err:.2e}"
        )
        errors.append(a_err)
    assert errors[1] < 1e-5, f"stiff soft vs rigid acceleration: relative error {errors[1]:.2e}"
    assert errors[1] < 1e-2 * errors[0]  # converges as the compliance goes to zero
