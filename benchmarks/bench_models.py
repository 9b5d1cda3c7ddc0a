"""Timing of the process/measurement models next to the raw Pinocchio calls they are built on.

Usage: ``.venv/bin/python benchmarks/bench_models.py [--calls N] [--batches B]``. Prints µs per call
(best batch: robust to other load on a shared machine) and the ratio model / floor, where the floor
is the sum of the raw Pinocchio calls the model cannot avoid (so ratio - 1 is the Python + glue overhead).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.dynamics import PhaseDynamicsModel
from mcoe_ros.multibody.interval import MultibodyIntervalModel
from mcoe_ros.multibody.measurements import (
    ImuAngularVelocity,
    ImuLinearVelocity,
    ImuOrientation,
    ImuSpecificForce,
    JointPosition,
    JointVelocity,
    default_measurements,
)
from mcoe_ros.multibody.robot import RobotModel

FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")


def timeit(fn: Callable[[], object], calls: int, batches: int) -> float:
    """µs per call of the fastest batch."""
    return timeit_pair(fn, None, calls, batches)[0]


def timeit_pair(
    fn: Callable[[], object], floor: Callable[[], object] | None, calls: int, batches: int
) -> tuple[float, float]:
    """µs per call (fastest batch) of fn and of its floor, in alternating batches (same machine load)."""
    best = [np.inf, np.inf]
    for _ in range(batches):
        for i, f in enumerate((fn, floor)):
            if f is None:
                continue
            f()
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            best[i] = min(best[i], (time.perf_counter() - t0) / calls * 1e6)
    return best[0], (best[1] if floor is not None else float("nan"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=11)
    args = parser.parse_args()

    def T(fn):
        return timeit(fn, args.calls, args.batches)

    robot = RobotModel()
    model = robot.model
    rng = np.random.default_rng(0)
    q = pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq))
    v = rng.normal(size=model.nv)
    x = np.concatenate([q, v])
    u = rng.normal(size=robot.nj)
    tau = np.r_[np.zeros(6), u]
    pi = np.array([2.0, 0.1, -0.05, 0.2, 0.05, 0.001, 0.06, 0.002, 0.003, 0.07])
    a = rng.normal(size=model.nv)
    ARG0, ARG1 = pin.ArgumentPosition.ARG0, pin.ArgumentPosition.ARG1
    LOCAL = pin.ReferenceFrame.LOCAL
    fid = robot.imu_frame_id

    # ---- raw Pinocchio calls (the floor)
    d = model.createData()
    dyn4 = PhaseDynamicsModel(robot, FEET, 0.002)
    dd4 = dyn4.create_data()
    dyni = PhaseDynamicsModel(robot, FEET, 0.002, FEET[:2])
    ddi = dyni.create_data()
    raw: dict[str, Callable[[], object]] = {
        "aba": lambda: pin.aba(model, d, q, v, tau),
        "computeABADerivatives": lambda: pin.computeABADerivatives(model, d, q, v, tau),
        "computeJointTorqueRegressor": lambda: pin.computeJointTorqueRegressor(model, d, q, v, a),
        "computeMinverse": lambda: pin.computeMinverse(model, d, q),
        "computeForwardKinematicsDerivatives": lambda: pin.computeForwardKinematicsDerivatives(model, d, q, v, a),
        "integrate + 2 dIntegrate": lambda: (
            pin.integrate(model, q, v),
            pin.dIntegrate(model, q, v, ARG0),
            pin.dIntegrate(model, q, v, ARG1),
        ),
        "constraintDynamics 4c": lambda: pin.constraintDynamics(
            model, dd4.pdata, q, v, tau, dd4.cmodels, dd4.cdatas, dd4.settings
        ),
        "computeConstraintDynamicsDerivatives 4c": lambda: pin.computeConstraintDynamicsDerivatives(
            model, dd4.pdata, dd4.cmodels, dd4.cdatas, dd4.settings
        ),
        "impulseDynamics 2c": lambda: pin.impulseDynamics(
            model, ddi.pdata_imp, q, v, ddi.cmodels_imp, ddi.cdatas_imp, 0.0, ddi.settings_imp
        ),
        "computeImpulseDynamicsDerivatives 2c": lambda: pin.computeImpulseDynamicsDerivatives(
            model, ddi.pdata_imp, ddi.cmodels_imp, ddi.cdatas_imp, 0.0, ddi.settings_imp
        ),
        "getFrameVelocityDerivatives": lambda: pin.getFrameVelocityDerivatives(model, d, fid, LOCAL),
        "getFrameAccelerationDerivatives": lambda: pin.getFrameAccelerationDerivatives(model, d, fid, LOCAL),
        "getFrameJacobian + Jlog3": lambda: (pin.getFrameJacobian(model, d, fid, LOCAL), pin.Jlog3(np.eye(3))),
    }
    pin.computeForwardKinematicsDerivatives(model, d, q, v, a)
    pin.updateFramePlacements(model, d)
    raw["impulseDynamics 2c"]()
    raw["constraintDynamics 4c"]()
    print(f"{'raw Pinocchio call':44s} {'µs':>8s}")
    for key, fn in raw.items():
        print(f"{key:44s} {T(fn):8.1f}")

    def chain(*names: str) -> Callable[[], None]:
        fns = [raw[n] for n in names]

        def run() -> None:
            for f in fns:
                f()

        return run

    # ---- models vs their floor (timed in alternating batches)
    rows = []
    cases = (("free", (), ()), ("4 feet", FEET, ()), ("4 feet + 2 impulse", FEET, FEET[:2]))
    for tag, contacts, impulse in cases:
        dyn = PhaseDynamicsModel(robot, contacts, 0.002, impulse)
        dd = dyn.create_data()
        calc_floor = ["constraintDynamics 4c"] if contacts else ["aba"]
        diff_floor = (
            ["constraintDynamics 4c", "computeConstraintDynamicsDerivatives 4c"]
            if contacts
            else ["computeABADerivatives"]
        )
        diff_floor += ["computeJointTorqueRegressor", "integrate + 2 dIntegrate"]
        if impulse:
            calc_floor += ["impulseDynamics 2c"]
            diff_floor += ["impulseDynamics 2c", "computeImpulseDynamicsDerivatives 2c", "computeMinverse"]
            diff_floor += 2 * ["computeJointTorqueRegressor"]
        rows.append((f"f calc, {tag}", lambda dyn=dyn, dd=dd: dyn.calc(dd, x, u, pi), chain(*calc_floor)))
        rows.append(
            (f"f calc_diff (Fx, Fp), {tag}", lambda dyn=dyn, dd=dd: dyn.calc_diff(dd, x, u, pi), chain(*diff_floor))
        )
        interval = MultibodyIntervalModel(robot, contacts, 0.002, default_measurements(robot), impulse)
        idata = interval.create_data()
        idata.u[:] = u
        idata.z[:] = np.r_[np.zeros(27), 1.0, np.zeros(6)]
        fk = ["computeForwardKinematicsDerivatives"] * (2 if impulse else 1)
        meas_floor = ["getFrameVelocityDerivatives", "getFrameJacobian + Jlog3", "getFrameAccelerationDerivatives"]
        rows.append(
            (
                f"interval calc_diff default meas, {tag}",
                lambda m=interval, d=idata: m.calc_diff(d, x, pi),
                chain(*diff_floor, *fk, *meas_floor),
            )
        )
        rows.append((f"interval calc default meas, {tag}", lambda m=interval, d=idata: m.calc(d, x, pi), None))

    # measurement models alone, on an interval data whose kinematics/dynamics are already computed
    meas_floors = {
        ImuAngularVelocity: "getFrameVelocityDerivatives",
        ImuLinearVelocity: "getFrameVelocityDerivatives",
        ImuOrientation: "getFrameJacobian + Jlog3",
        ImuSpecificForce: "getFrameAccelerationDerivatives",
    }
    for meas in (
        JointPosition(robot),
        JointVelocity(robot),
        ImuAngularVelocity(robot),
        ImuOrientation(robot),
        ImuSpecificForce(robot),
        ImuLinearVelocity(robot),
    ):
        interval = MultibodyIntervalModel(robot, FEET, 0.002, [meas])
        idata = interval.create_data()
        idata.u[:] = u
        idata.z[:] = np.r_[1.0, np.zeros(meas.nz - 1)]
        interval.calc_diff(idata, x, pi)
        md, c, z = idata.meas[0], idata.collector, idata.z
        name = type(meas).__name__
        floor = raw.get(meas_floors.get(type(meas), ""))
        rows.append((f"{name} calc", lambda meas=meas, md=md, c=c, z=z: meas.calc(md, c, x, z), None))
        rows.append((f"{name} calc_diff", lambda meas=meas, md=md, c=c, z=z: meas.calc_diff(md, c, x, z), floor))

    print(f"\n{'model':48s} {'µs':>8s} {'floor µs':>9s} {'ratio':>6s}")
    for name, fn, floor_fn in rows:
        val, floor = timeit_pair(fn, floor_fn, args.calls, args.batches)
        ratio = val / floor if np.isfinite(floor) else float("nan")
        floor_s = f"{floor:9.1f}" if np.isfinite(floor) else f"{'-':>9s}"
        ratio_s = f"{ratio:6.2f}" if np.isfinite(ratio) else f"{'-':>6s}"
        print(f"{name:48s} {val:8.1f} {floor_s} {ratio_s}")
    print("\n(measurement rows: kinematics already computed by the interval model; their floor is the frame getter)")


if __name__ == "__main__":
    main()
