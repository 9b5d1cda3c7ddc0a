"""Do a recording's torques and motion agree with rigid point contacts? Stance forces two ways along the truth.

For every sample of a simulator bag (``mcoe_sim``; ground-truth base pose and twist, encoders, reported torques and
the simulator's contact flags) the inverse dynamics of the true model (URDF + the true payload) along the true motion,
b = M(q) a + h(q, v) (a: central differences of the true velocities, 2 ms), gives the stance feet's ground forces
(world axes, N) two ways:

* **motion**: the base rows, R b[:3] = sum of the stance forces (what the whole robot's acceleration needs);
* **torques**: each stance leg's joint rows, J_leg(c)^T f = b_leg - tau_leg, at the contact point c = the foot frame
  lowered by ``--contact-depth`` (the simulator's foot sphere touches the floor its radius below the frame).

If the data and the rigid point-contact model agree, the two vertical sums agree; their mean difference over the run
is the force excess a torque-based estimator would read as mass (excess / g, kg). A third view is the estimator's own
rigid contact dynamics (:class:`~mcoe_ros.multibody.dynamics.PhaseDynamicsModel`, contacts at the foot frames, the
landing of ``--landing-damping`` / ``--landing-time``) at the true state with the same torques: its base's vertical
acceleration minus the true one, as a mass (m Δa / g). Tables by the number of stance feet and by the age of the
newest stance foot (the touch-down transients). Results and the estimator's own mass errors on the same bags:
docs/localisation.md, session 28.

With ``--true-losses`` the torques are the joint's: the reported torque times the simulated torque constant minus the
simulated actuator losses (viscous, Coulomb, rotor inertia; ``sim_metadata.json``), what an estimator that knew
them would use; with ``--identified-losses SUMMARY.json`` (``mcoe_replay BAG --json``) the estimator's identified
ones instead: the force excess its actuator model leaves.

Usage: ``python benchmarks/contact_force_consistency.py BAG [BAG ...] [--true-losses]``; a BAG is a ``mcoe_sim``
output directory (``benchmarks/trot_localisation.py --keep DIR`` and ``realism_suite.py --keep DIR`` keep them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess

import numpy as np
import pinocchio as pin

from mcoe_ros.estimation.config import DynamicsConfig
from mcoe_ros.io.bag import iter_messages
from mcoe_ros.multibody.actuator import JOINT_TYPES, ActuatorModel
from mcoe_ros.multibody.dynamics import PhaseDynamicsModel
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.testing.datasets import load_bag

GRAVITY = 9.81
#: bins of the newest stance foot's age (s) since its touch-down
AGE_BINS = [(0.0, 0.01), (0.01, 0.02), (0.02, 0.05), (0.05, 0.1), (0.1, 0.2), (0.2, np.inf)]


def true_motion(path: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(base pose rows [p (3), quat xyzw (4)], base twist rows [v (3), w (3)] in the base frame) of the bag's
    ground-truth odometry, its first n messages (one per sample)."""
    pose, twist = [], []
    for _, _, msg in iter_messages(path, ["ground_truth/odom"]):
        p, o = msg.pose.pose.position, msg.pose.pose.orientation
        v, w = msg.twist.twist.linear, msg.twist.twist.angular
        pose.append([p.x, p.y, p.z, o.x, o.y, o.z, o.w])
        twist.append([v.x, v.y, v.z, w.x, w.y, w.z])
        if len(pose) == n:
            break
    return np.array(pose), np.array(twist)


def joint_losses(
    path: str, robot: RobotModel, dq: np.ndarray, ddq: np.ndarray, identified: str = ""
) -> tuple[np.ndarray, float]:
    """(actuator losses' torque (n, 12) N m by the estimator's law, :class:`~mcoe_ros.multibody.actuator.ActuatorModel`
    per joint type: viscous dq + smoothed Coulomb + rotor inertia ddq; torque scale) with the simulated parameters (the
    bag's ``sim_metadata.json``; the simulator's dry friction is a constraint, any value within ±c at rest) or, with
    ``identified`` (an ``mcoe_replay --json`` summary), the estimator's identified ones (torque scale 1)."""
    if identified:
        with open(identified, encoding="utf-8") as f:
            act = json.load(f)["actuator"]
        kinds = ("viscous", "coulomb", "rotor_inertia")
        params = [act[f"{kind}_{joint}"][0] for kind in kinds for joint in JOINT_TYPES]
        scale = 1.0
    else:
        with open(os.path.join(path, "sim_metadata.json"), encoding="utf-8") as f:
            meta = json.load(f)
        losses = meta["actuator_losses"]
        rotor = np.asarray(losses["rotor_inertia_kgm2"], float) + float(meta.get("armature_kgm2", 0.0))
        params = [*losses["viscous_Nms_per_rad"], *losses["coulomb_Nm"], *rotor]
        scale = float(losses["torque_scale"])
    model = ActuatorModel(robot)  # groups hip, thigh, calf: parameters (viscous, Coulomb, rotor inertia) x 3
    p = np.asarray(params, float)
    return np.array([model.loss(v, p) for v in dq]) + model.rotor_inertia(p) * ddq, scale


def stance_forces(
    path: str, contact_depth: float, losses: bool, identified: str = "", landing: tuple[float, float] = (0.0, 0.0)
) -> dict:
    """Per sample: number of stance feet, the newest stance foot's age (s), the vertical stance-force sum from the
    motion and from the torques (N); and the robot's true total mass (kg). ``losses``: the joint torque is the
    reported one scaled by the simulated torque constant, minus the simulated actuator losses (``identified``: minus the
    estimator's identified ones, see :func:`joint_losses`). Also the rigid contact model's error: the estimator's
    contact dynamics (:class:`~mcoe_ros.multibody.dynamics.PhaseDynamicsModel`, contacts at the foot frames, the stance
    feet of the simulator's flags, those younger than ``landing[1]`` s landing at the rate ``landing[0]`` 1/s) at the
    true state with these torques and the true payload: its base's vertical acceleration minus the true one (m/s²)."""
    series, pi_true = load_bag(path)
    bare = RobotModel()  # the contact models take the payload as their parameter argument
    phase_models: dict[tuple, tuple] = {}
    robot = RobotModel()
    robot.set_payload(pi_true)
    model, data = robot.model, robot.model.createData()
    pose, twist = true_motion(path, len(series))
    n = min(len(series), len(pose))
    if n < 5:
        raise SystemExit(f"{path}: fewer than 5 samples with ground truth")
    q = np.hstack([pose[:n], series.q[:n]])
    v = np.hstack([twist[:n], series.dq[:n]])
    a = np.zeros_like(v)
    a[1:-1] = (v[2:] - v[:-2]) / (2.0 * series.dt)
    contacts = series.contacts[:n]
    tau = np.array(series.tau[:n], dtype=float)
    if losses or identified:
        loss, scale = joint_losses(path, bare, v[:, 6:], a[:, 6:], identified)
        tau = scale * tau - loss
    lever = pin.skew(np.array([0.0, 0.0, -contact_depth]))
    touchdown = np.full(4, -np.inf)
    rows = []
    for k in range(n):
        for i in range(4):
            if contacts[k, i] and (k == 0 or not contacts[k - 1, i]):
                touchdown[i] = k * series.dt
        if k < 2 or k > n - 3:
            continue
        b = pin.rnea(model, data, q[k], v[k], a[k])
        pin.computeJointJacobians(model, data, q[k])
        pin.updateFramePlacements(model, data)
        stance = [i for i in range(4) if contacts[k, i]]
        motion_z = (data.oMi[1].rotation @ b[:3])[2]
        torque_z = 0.0
        for i in stance:
            jac = pin.getFrameJacobian(model, data, robot.foot_frame_ids[i], pin.LOCAL_WORLD_ALIGNED)
            jac_c = jac[:3] - lever @ jac[3:]
            cols = slice(robot.nu_base + 3 * i, robot.nu_base + 3 * i + 3)
            torque_z += np.linalg.solve(jac_c[:, cols].T, b[cols] - tau[k, 3 * i : 3 * i + 3])[2]
        age = min((k * series.dt - touchdown[i] for i in stance), default=np.inf)
        model_z = np.nan
        if stance:
            feet = tuple(bare.foot_names[i] for i in stance)
            damped = tuple(bare.foot_names[i] for i in stance if k * series.dt - touchdown[i] < landing[1])
            if (feet, damped) not in phase_models:
                pm = PhaseDynamicsModel(bare, feet, series.dt, kd=landing[0], damped=damped)
                phase_models[feet, damped] = (pm, pm.create_data())
            pm, pd = phase_models[feet, damped]
            pm.calc(pd, np.concatenate([q[k], v[k]]), tau[k], pi_true)
            rot = data.oMi[1].rotation
            omega_cross_v = np.cross(v[k, 3:6], v[k, :3])
            model_z = (rot @ (pd.a[:3] + omega_cross_v))[2] - (rot @ (a[k, :3] + omega_cross_v))[2]
        rows.append((len(stance), age, motion_z, torque_z, model_z))
    mass = float(sum(inertia.mass for inertia in model.inertias))
    return {"rows": np.array(rows), "mass": mass, "payload": float(pi_true[0])}


def report(name: str, res: dict) -> None:
    rows = res["rows"]
    diff = rows[:, 3] - rows[:, 2]
    excess = diff.mean() / GRAVITY
    stance = ~np.isnan(rows[:, 4])
    model_err = np.where(stance, rows[:, 4], 0.0)  # no contact model without a stance foot
    model_kg = res["mass"] * model_err.mean() / GRAVITY
    print(f"\n### {name}\n")
    print(
        f"robot + payload {res['mass']:.3f} kg (payload {res['payload']:.2f} kg); mean vertical stance force: motion "
        f"{rows[:, 2].mean():.2f} N, torques {rows[:, 3].mean():.2f} N (m g = {res['mass'] * GRAVITY:.2f} N); "
        f"torques − motion {diff.mean():+.3f} N = {excess:+.4f} kg"
        + (f" = {100 * excess / res['payload']:+.2f} % of the payload" if res["payload"] > 0 else "")
    )
    print(
        f"rigid contact model at the true state: base vertical acceleration error {model_err.mean():+.4f} m/s² "
        f"= {model_kg:+.4f} kg (m Δa / g)"
        + (f" = {100 * model_kg / res['payload']:+.2f} % of the payload" if res["payload"] > 0 else "")
    )
    print("\n| stance feet | share of samples % | motion Fz N | torques Fz N | torques − motion N |")
    print("|---|---|---|---|---|")
    for ns in range(5):
        m = rows[:, 0] == ns
        if m.any():
            print(
                f"| {ns} | {100 * m.mean():.1f} | {rows[m, 2].mean():.2f} | {rows[m, 3].mean():.2f} | "
                f"{diff[m].mean():+.2f} |"
            )
    print(
        "\n| newest stance foot's age s | share of samples % | torques − motion N | its share of the mean N |"
        " rigid model's Δa_z m/s² | its share of the mean m/s² |"
    )
    print("|---|---|---|---|---|---|")
    for lo, hi in AGE_BINS:
        m = (rows[:, 1] >= lo) & (rows[:, 1] < hi)
        if m.any():
            print(
                f"| {lo:g}–{hi:g} | {100 * m.mean():.1f} | {diff[m].mean():+.2f} | {diff[m].sum() / len(diff):+.3f} | "
                f"{model_err[m].mean():+.3f} | {model_err[m].sum() / len(diff):+.4f} |"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bags", nargs="+", help="mcoe_sim output directories")
    ap.add_argument(
        "--contact-depth", type=float, default=0.02, help="contact point below the foot frame, m (foot sphere radius)"
    )
    ap.add_argument(
        "--true-losses",
        action="store_true",
        help="take the simulated actuator losses and torque constant out of the reported torques (sim_metadata.json)",
    )
    ap.add_argument(
        "--identified-losses",
        default="",
        metavar="JSON",
        help="take the estimator's identified actuator losses out instead (an `mcoe_replay --json` summary of the bag;"
        " one bag)",
    )
    defaults = DynamicsConfig()
    ap.add_argument(
        "--landing-damping",
        type=float,
        default=defaults.landing_damping,
        help="rigid model: landing rate of a foot younger than --landing-time, 1/s (0: held from touch-down)",
    )
    ap.add_argument("--landing-time", type=float, default=defaults.landing_time, help="rigid model: landing time, s")
    args = ap.parse_args()
    if args.identified_losses and len(args.bags) != 1:
        ap.error("--identified-losses goes with one bag")
    for path in args.bags:
        name = os.path.basename(os.path.normpath(path))
        if args.identified_losses:
            name += ", the estimator's identified losses taken out"
        elif args.true_losses:
            name += ", true losses taken out"
        landing = (args.landing_damping, args.landing_time)
        report(name, stance_forces(path, args.contact_depth, args.true_losses, args.identified_losses, landing))
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    print(
        f"\ncontact depth {args.contact_depth} m; rigid model landing {args.landing_damping:g} 1/s for "
        f"{args.landing_time:g} s; `uptime`: {uptime}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
