"""``mcoe_sim``: simulate the Go1 in MuJoCo and write a rosbag2 (see :mod:`mcoe_ros.sim.recorder` for topics).

Example::

    mcoe_sim --scenario squat-sway:6,trot:4 --payload-mass 7.2 --payload-com 0.02 0 0.05 \\
        --payload-inertia 0.06 0.09 0.11 0.005 0.003 0.002 --noise 1 --seed 0 --out go1_bag

``--payload-inertia`` takes 3 values (principal, axes = trunk axes) or 6 (Ixx Iyy Izz Ixy Ixz Iyz), about
the payload CoM in the trunk frame; ``--payload-sphere R`` uses a solid sphere of radius R instead.
Default payload inertia: a solid 0.3 x 0.2 x 0.1 m box of the given mass.

Imperfections of a real robot (all off by default; ``--realistic`` turns on the Go1-like profile of issue 13:
:data:`~mcoe_ros.sim.sensors.REALISTIC_NOISE` sensors, :data:`~mcoe_ros.sim.mjcf.REALISTIC_LOSSES` actuator
losses and :data:`~mcoe_ros.sim.mjcf.SOFT_FEET` contact; individual flags given after it override it):
sensor noise scale, bias std and random walk, torque quantisation, the IMU's orientation from its own attitude filter
(``--attitude-filter-gain``; 0: the true orientation + noise); joint damping / Coulomb friction / rotor
inertia per joint type (not in the reported torque), torque-constant scale and offset; URDF mass mismatch
(``--mass-mismatch 0.1 --mismatch-direction lighter``; every link, or the trunk only with ``--mismatch-links
trunk``); soft round feet (``--foot-condim 6``), ground softness (``--contact-solref``), torsional/rolling friction,
foot sphere radius (``--foot-radius 0.001``: contact at the foot frame), slippery floor (``--floor-friction 0.3``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace

import numpy as np

from mcoe_ros.io.bag import FORMATS
from mcoe_ros.sim.mjcf import (
    MISMATCH_LINKS,
    REALISTIC_LOSSES,
    SOFT_FEET,
    ActuatorLosses,
    ContactConfig,
    MassMismatch,
    PayloadSpec,
)
from mcoe_ros.sim.recorder import DEFAULT_START_TIME, record
from mcoe_ros.sim.runner import EpisodeConfig, parse_segments, rate_divider
from mcoe_ros.sim.scenarios import SCENARIOS, make_scenario
from mcoe_ros.sim.sensors import REALISTIC_NOISE, NoiseConfig


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mcoe_sim", description=__doc__.split("\n")[0])
    p.add_argument("--scenario", default="squat-sway", help=f"name[:seconds][,name[:seconds]...] of {SCENARIOS}")
    p.add_argument("--duration", type=float, default=10.0, help="seconds for a scenario given without ':seconds'")
    p.add_argument("--payload-mass", type=float, default=7.2, help="kg (0 = no payload)")
    p.add_argument("--payload-com", type=float, nargs=3, default=[0.02, 0.0, 0.05], metavar=("X", "Y", "Z"))
    p.add_argument("--payload-inertia", type=float, nargs="+", default=None, metavar="I")
    p.add_argument("--payload-sphere", type=float, default=None, metavar="RADIUS")
    p.add_argument("--payload-absent-at-start", action="store_true", help="start without the payload")
    p.add_argument("--controller-knows", choices=("none", "mass", "full"), default="mass")
    p.add_argument(
        "--noise",
        type=float,
        default=None,
        help="scale of the sensor noise (0 = perfect; default 0, 1 with --realistic)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--format", choices=FORMATS, default="mcap")
    p.add_argument("--compression", choices=("none", "zstd"), default="none", help="mcap chunk compression")
    p.add_argument("--rate", type=float, default=500.0, help="sensor rate, Hz (divides the physics rate)")
    p.add_argument("--control-rate", type=float, default=500.0)
    p.add_argument("--timestep", type=float, default=0.001, help="physics step, s (0.0005 .. 0.001)")
    p.add_argument("--armature", type=float, default=0.0, help="rotor inertia on each leg joint, kg m^2")
    r = p.add_argument_group("realism (defaults: off; --realistic: the Go1-like profile)")
    r.add_argument("--realistic", action="store_true", help="Go1-like sensors, actuator losses and soft feet")
    r.add_argument("--gyro-bias", type=float, default=None, help="gyro bias std per axis, rad/s")
    r.add_argument("--acc-bias", type=float, default=None, help="accelerometer bias std per axis, m/s^2")
    r.add_argument("--gyro-bias-walk", type=float, default=None, help="gyro bias random walk, rad/s/sqrt(s)")
    r.add_argument("--acc-bias-walk", type=float, default=None, help="accelerometer bias random walk, m/s^2/sqrt(s)")
    r.add_argument("--tau-resolution", type=float, default=None, help="reported torque quantisation step, N m")
    r.add_argument(
        "--attitude-filter-gain",
        type=float,
        default=None,
        help="IMU orientation from the IMU's own attitude filter of this gain, 1/s (0: the true orientation + noise)",
    )
    tri = {"nargs": "+", "type": float, "default": None, "metavar": "V"}
    r.add_argument("--joint-damping", **tri, help="viscous joint friction, N m s/rad (1 value or hip thigh calf)")
    r.add_argument("--joint-friction", **tri, help="Coulomb joint friction, N m (1 value or hip thigh calf)")
    r.add_argument("--rotor-inertia", **tri, help="reflected rotor inertia, kg m^2 (1 value or hip thigh calf)")
    r.add_argument("--torque-scale", type=float, default=None, help="applied / reported motor torque (kt error)")
    r.add_argument("--torque-offset", type=float, default=None, help="offset of the reported torque, N m")
    r.add_argument("--mass-mismatch", type=float, default=0.0, help="max relative link mass/inertia deviation")
    r.add_argument("--mismatch-direction", choices=("random", "lighter", "heavier"), default="random")
    r.add_argument(
        "--mismatch-links",
        choices=MISMATCH_LINKS,
        default="all",
        help="links the mass mismatch perturbs: all (trunk + legs) or trunk (legs keep the URDF)",
    )
    r.add_argument("--trunk-com-offset", type=float, default=0.0, help="max trunk CoM deviation per axis, m")
    r.add_argument("--floor-friction", type=float, default=None, help="sliding friction (low = slip)")
    r.add_argument("--torsional-friction", type=float, default=None, help="m (with --foot-condim 6)")
    r.add_argument("--rolling-friction", type=float, default=None, help="m (with --foot-condim 6)")
    r.add_argument("--foot-condim", type=int, default=None, help="3 point foot, 6 soft round foot")
    r.add_argument("--contact-solref", type=float, nargs=2, default=None, metavar=("TIMECONST", "DAMPRATIO"))
    r.add_argument(
        "--foot-radius",
        type=float,
        default=None,
        help="foot collision sphere radius, m (default the URDF's 0.02; ~0.001 = contact at the foot frame)",
    )
    r.add_argument(
        "--noslip-iterations",
        type=int,
        default=None,
        help="MuJoCo no-slip solver iterations (0 = off): a floor that grips, no soft-friction creep of held feet",
    )
    p.add_argument("--start-time", type=float, default=DEFAULT_START_TIME, help="Unix time of the first sample, s")
    p.add_argument("--out", required=True, help="output bag directory (must not exist)")
    return p


def payload_from_args(args: argparse.Namespace) -> PayloadSpec:
    mass, com = float(args.payload_mass), np.asarray(args.payload_com, dtype=float)
    if args.payload_sphere is not None:
        if args.payload_inertia is not None:
            raise ValueError("give either --payload-inertia or --payload-sphere, not both")
        if args.payload_sphere <= 0:
            raise ValueError("--payload-sphere radius must be > 0")
        return PayloadSpec.sphere(mass, com, args.payload_sphere)
    if args.payload_inertia is None:
        return PayloadSpec.box(mass, com, (0.3, 0.2, 0.1))
    vals = [float(v) for v in args.payload_inertia]
    if len(vals) == 3:
        inertia = np.diag(vals)
    elif len(vals) == 6:
        ixx, iyy, izz, ixy, ixz, iyz = vals
        inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    else:
        raise ValueError(f"--payload-inertia takes 3 or 6 values, got {len(vals)}")
    return PayloadSpec(mass, com, inertia)


def config_from_args(args: argparse.Namespace) -> EpisodeConfig:
    segments = parse_segments(args.scenario, args.duration)
    for name, dur in segments:
        make_scenario(name, dur, np.zeros((4, 3)))  # validates the name
    if not 0.0005 - 1e-12 <= args.timestep <= 0.001 + 1e-12:
        raise ValueError(f"--timestep must be within 0.0005 .. 0.001 s, got {args.timestep}")
    if args.rate <= 0 or args.control_rate <= 0:
        raise ValueError("--rate and --control-rate must be > 0")
    if args.armature < 0:
        raise ValueError("--armature must be >= 0")
    noise, losses, contact = realism_from_args(args)
    return EpisodeConfig(
        segments=segments,
        payload=payload_from_args(args),
        payload_at_start=not args.payload_absent_at_start,
        knows=args.controller_knows,
        rate=args.rate,
        control_rate=args.control_rate,
        timestep=args.timestep,
        armature=args.armature,
        noise=noise,
        losses=losses,
        mismatch=MassMismatch(
            args.mass_mismatch, args.mismatch_direction, args.trunk_com_offset, args.seed, args.mismatch_links
        ),
        contact=contact,
        seed=args.seed,
    )


def _override(base, args: argparse.Namespace, mapping: dict[str, str]):
    """``base`` dataclass with the fields of ``mapping`` {arg name: field} replaced by the arguments given."""
    changes = {f: getattr(args, a) for a, f in mapping.items() if getattr(args, a) is not None}
    for key in ("viscous", "coulomb", "rotor_inertia"):
        if key in changes:
            if len(changes[key]) not in (1, 3):
                raise ValueError(f"--{key.replace('_', '-')} takes 1 or 3 values (hip thigh calf)")
            changes[key] = tuple(changes[key]) if len(changes[key]) == 3 else changes[key][0]
    if "solref" in changes:
        changes["solref"] = tuple(changes["solref"])
    return replace(base, **changes)


def realism_from_args(args: argparse.Namespace) -> tuple[NoiseConfig, ActuatorLosses, ContactConfig]:
    """(sensor noise, actuator losses, contact) from --noise, --realistic and the individual realism flags."""
    scale = args.noise if args.noise is not None else (1.0 if args.realistic else 0.0)
    if scale < 0:
        raise ValueError(f"--noise must be >= 0, got {scale}")
    noise = _override(
        (REALISTIC_NOISE if args.realistic else NoiseConfig()).scaled(scale),
        args,
        {
            "gyro_bias": "gyro_bias_std",
            "acc_bias": "acc_bias_std",
            "gyro_bias_walk": "gyro_bias_walk",
            "acc_bias_walk": "acc_bias_walk",
            "tau_resolution": "tau_resolution",
            "attitude_filter_gain": "attitude_filter_gain",
        },
    )
    if any(v < 0 for v in noise.as_dict().values()):
        raise ValueError("sensor noise, bias and resolution values must be >= 0")
    losses = _override(
        REALISTIC_LOSSES if args.realistic else ActuatorLosses(),
        args,
        {
            "joint_damping": "viscous",
            "joint_friction": "coulomb",
            "rotor_inertia": "rotor_inertia",
            "torque_scale": "torque_scale",
            "torque_offset": "torque_offset",
        },
    )
    contact = _override(
        SOFT_FEET if args.realistic else ContactConfig(),
        args,
        {
            "floor_friction": "floor_friction",
            "torsional_friction": "torsional_friction",
            "rolling_friction": "rolling_friction",
            "foot_condim": "foot_condim",
            "contact_solref": "solref",
            "foot_radius": "foot_radius",
            "noslip_iterations": "noslip_iterations",
        },
    )
    return noise, losses, contact


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = config_from_args(args)

        rate_divider(1.0 / cfg.timestep, cfg.rate, "sensor rate")
        rate_divider(1.0 / cfg.timestep, cfg.control_rate, "control rate")
        if os.path.exists(args.out):
            raise ValueError(f"output '{args.out}' exists already (not overwriting)")
        if args.compression != "none" and args.format != "mcap":
            raise ValueError("--compression is only supported with --format mcap")
    except ValueError as exc:
        print(f"mcoe_sim: error: {exc}", file=sys.stderr)
        return 2
    wall0 = time.perf_counter()
    stats, meta = record(
        cfg, args.out, args.format, args.compression, start_time=args.start_time, scenario_text=args.scenario
    )
    wall = time.perf_counter() - wall0
    size = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    print(
        f"mcoe_sim: wrote {args.out} ({args.format}, {size / 1e6:.2f} MB): {stats.n_samples} samples, "
        f"{cfg.duration:g} s in {wall:.1f} s ({cfg.duration / wall:.1f}x real time), "
        f"base height {stats.min_height:.3f}..{stats.max_height:.3f} m{', FELL' if stats.fell else ''}"
    )
    return 1 if stats.fell else 0


if __name__ == "__main__":
    sys.exit(main())
