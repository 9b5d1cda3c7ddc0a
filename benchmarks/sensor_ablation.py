"""Sensor ablation of the realism suite's ``squat-sway_5kg-off_sensors`` case (issue 13): which sensor imperfection
biases the OE's payload, and along which axis.

Each row simulates the suite's sway (4 s, 5 kg off-centre payload, point feet, no actuator losses: the ``sensors``
profile of ``benchmarks/realism_suite.py``) with ONE field of :class:`mcoe_ros.sim.sensors.NoiseConfig` at its
:data:`~mcoe_ros.sim.sensors.REALISTIC_NOISE` value (times ``--scale``) and every other field 0, plus the rows
``clean`` (all 0), ``all-but-torque`` (all but ``tau_std`` and ``tau_resolution``) and ``all`` (= the suite's
``sensors`` profile). The random streams do not depend on the levels (``SensorModel`` always draws), so every row
of one seed sees the same noise and bias realisations. The OE runs with the default configuration and with the
overrides of ``--variant`` (default: ``actuator.enabled=false``); printed per row: mass error %, the CoM error
components in the payload frame (mm), and the payload's rotational inertia about the payload-frame origin (diagonal,
kg m^2, estimate / truth), which shows whether the estimate is a 'heavier' body, and the errors-in-variables check
:func:`torque_noise_cost` at the estimate relative to the truth (< 1: the estimate makes the residuals less
sensitive to the reported torque's noise)::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sensor_ablation.py --keep DIR [--seeds 7 1] [--rows ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import replace

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.inertia import pi_about_com
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.sim.cli import build_parser, config_from_args
from mcoe_ros.sim.recorder import record
from mcoe_ros.sim.sensors import REALISTIC_NOISE
from mcoe_ros.testing.datasets import load_bag
from mcoe_ros.testing.reporting import parse_overrides
from mcoe_ros.testing.scripts import load_benchmark

rs = load_benchmark("robust_ablation").rs  # the suite's case definitions, truth and OE runner

CASE = rs.Case("squat-sway", "5kg-off", "sensors", 4.0)
#: NoiseConfig fields ablated one at a time (foot_force_std is not used by the default estimator: no row;
#: attitude_filter_gain: the IMU's orientation from its attitude filter instead of the truth)
FIELDS = (
    "q_std",
    "q_resolution",
    "dq_std",
    "tau_std",
    "tau_resolution",
    "orientation_std",
    "gyro_std",
    "acc_std",
    "gyro_bias_std",
    "acc_bias_std",
    "gyro_bias_walk",
    "acc_bias_walk",
    "attitude_filter_gain",
)
#: the attitude filter's other settings: on whenever its gain is (``NoiseConfig.scaled`` keeps them)
FILTER_SETTINGS = ("attitude_filter_integral", "attitude_filter_preroll")
TORQUE_FIELDS = ("tau_std", "tau_resolution")
ROWS = ("clean", *FIELDS, "all-but-torque", "all")


def row_fields(row: str) -> tuple[str, ...]:
    """The NoiseConfig fields at their realistic value in a row (a field, fields joined by '+', or a named row)."""
    if row == "clean":
        return ()
    if row == "all":
        return FIELDS + ("foot_force_std", *FILTER_SETTINGS)
    if row == "all-but-torque":
        return tuple(f for f in FIELDS + ("foot_force_std", *FILTER_SETTINGS) if f not in TORQUE_FIELDS)
    fields = tuple(row.split("+"))  # "tau_std+acc_std": several fields together
    if not set(fields) <= set(FIELDS):
        raise ValueError(f"unknown row {row!r}, expected one of {ROWS} or fields joined by '+'")
    return fields


def make_bag(row: str, seed: int, scale: float, root: str) -> str:
    """Simulate (or reuse) the row's bag under ``root``."""
    path = os.path.join(root, f"{CASE.name}_{row}_x{scale:g}_s{seed}")
    if os.path.exists(os.path.join(path, "sim_metadata.json")):
        return path
    argv = ["--scenario", f"{CASE.scenario}:{CASE.seconds:g}", *rs.PAYLOADS[CASE.payload], *rs.PROFILES[CASE.profile]]
    cfg = config_from_args(build_parser().parse_args([*argv, "--seed", str(seed), "--out", path]))
    unscaled = {"attitude_filter_gain", *FILTER_SETTINGS}  # the filter's settings are not noise levels
    levels = {f: getattr(REALISTIC_NOISE, f) * (1.0 if f in unscaled else scale) for f in row_fields(row)}
    cfg = replace(cfg, noise=replace(REALISTIC_NOISE.scaled(0.0), **levels))
    stats, _ = record(cfg, path, scenario_text=f"{CASE.scenario}:{CASE.seconds:g}")
    if stats.fell:
        raise RuntimeError(f"{path}: the robot fell")
    return path


def inertia_about_origin(pi: np.ndarray) -> np.ndarray:
    """Diagonal (3,) of the rotational inertia about the payload-frame origin of pi (10,), kg m^2."""
    m, c, ic = pi_about_com(pi)
    return np.diag(ic + m * (c @ c * np.eye(3) - np.outer(c, c)))


def torque_noise_cost(robot: RobotModel, q_joints: np.ndarray, pi_payload: np.ndarray, step: int = 10) -> float:
    """Expected cost of white reported-torque noise (default config weights, 0.1 N m) along a four-foot stance:
    sum over the samples ``q_joints`` (n, 12) (every ``step``-th, times ``step``) of tr(W A Σ_τ Aᵀ), with A = da/dτ of
    the rigid-contact forward dynamics at the payload ``pi_payload`` (10,), for the velocity process residual
    (dt A; W = process_velocity⁻² on the base, process_joint_velocity⁻² on the joints) plus the accelerometer
    (IMU-frame linear acceleration rows of A; W = accelerometer⁻²). A least-squares OE that takes the torque as
    exact is pulled towards parameters that lower it (errors in variables)."""
    from mcoe_ros.estimation.config import NoiseConfig

    noise, sigma, dt = NoiseConfig(), REALISTIC_NOISE.tau_std, 0.002
    w_v = np.r_[np.full(6, noise.process_velocity**-2), np.full(robot.nj, noise.process_joint_velocity**-2)]
    model = robot.model.copy()
    model.inertias[robot.payload_joint] = robot.combined_inertia(pi_payload)
    data = model.createData()
    sel = np.vstack([np.zeros((6, robot.nj)), np.eye(robot.nj)])
    total = 0.0
    for qj in q_joints[::step]:
        q = np.r_[0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 1.0, qj]  # M and the projector do not depend on the base pose
        mass = pin.crba(model, data, q)
        mass = np.triu(mass) + np.triu(mass, 1).T
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        jac = np.vstack(
            [pin.getFrameJacobian(model, data, f, pin.LOCAL_WORLD_ALIGNED)[:3] for f in robot.foot_frame_ids]
        )
        mi = np.linalg.inv(mass)
        a_tau = (mi - mi @ jac.T @ np.linalg.solve(jac @ mi @ jac.T, jac @ mi)) @ sel
        j_imu = pin.getFrameJacobian(model, data, robot.imu_frame_id, pin.LOCAL)[:3]
        total += dt**2 * np.sum(w_v[:, None] * a_tau**2) + np.sum((j_imu @ a_tau) ** 2) / noise.accelerometer**2
    return step * sigma**2 * total


def evaluate(path: str, overrides: dict) -> dict:
    """OE on the bag: mass error %, CoM error (3,) mm, inertia about the origin (3,) estimate and truth."""
    series, _ = load_bag(path)
    pi_true, odom, t0 = rs.read_truth(path)
    res, _ = rs.run_oe(series, t0, pi_true, odom, overrides, with_ekf=False)
    pi_est = rs.LAST_HISTORY[-1].payload_pi
    _, c_est, _ = pi_about_com(pi_est)
    _, c_true, _ = pi_about_com(pi_true)
    robot = RobotModel()
    return {
        "eiv": torque_noise_cost(robot, series.q, pi_est) / torque_noise_cost(robot, series.q, pi_true),
        "mass_pct": res.mass_pct,
        "dcom_mm": 1e3 * (c_est - c_true),
        "inertia": inertia_about_origin(pi_est),
        "inertia_true": inertia_about_origin(pi_true),
    }


def cell(r: dict) -> str:
    d = r["dcom_mm"]
    return (
        f"{r['mass_pct']:.2f} % | ({d[0]:+.0f}, {d[1]:+.0f}, {d[2]:+.0f}) = {np.linalg.norm(d):.0f} | "
        + "/".join(f"{v:.2f}" for v in r["inertia"])
        + f" | {r['eiv']:.2f}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", default="", help="write/reuse the simulated bags in this directory")
    ap.add_argument("--seeds", type=int, nargs="+", default=[rs.SEED])
    ap.add_argument("--rows", nargs="+", default=list(ROWS), help=f"subset of {ROWS} (or fields joined by '+')")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the realistic level of the ablated fields")
    ap.add_argument(
        "--variant",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="OE overrides of the second column (repeatable; default actuator.enabled=false)",
    )
    args = ap.parse_args()
    variant = parse_overrides(args.variant or ["actuator.enabled=false"])
    vname = " ".join(args.variant or ["actuator.enabled=false"])
    head = (
        "| seed | row | OE mass | OE CoM error x, y, z = norm, mm | OE I@origin kg m² | OE E_τ est/true | "
        f"{vname}: mass | CoM error mm | I@origin | E_τ est/true |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or tmp
        os.makedirs(root, exist_ok=True)
        for seed in args.seeds:
            for row in args.rows:
                path = make_bag(row, seed, args.scale, root)
                base, var = evaluate(path, {}), evaluate(path, variant)
                truth = "/".join(f"{v:.2f}" for v in base["inertia_true"])
                lines.append(f"| {seed} | {row} | {cell(base)} | {cell(var)} |")
                print(lines[-1], flush=True)
    print(f"\n(true payload inertia about the origin: {truth} kg m², scale {args.scale:g})\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
