"""Per-sample cost of the contact detector's force estimate (ContactDetector.estimate_forces, once per input sample
in the node), Python reference vs compiled, both methods, side by side (not a test).

A simulated trot (MuJoCo, realistic joint losses and sensor noise) is fed sample by sample to four detectors in
alternation -- momentum observer in Python (the path before the compiled observer), momentum observer compiled,
inverse dynamics in Python and compiled -- each with the simulated actuator model set (as after a solve), so that the
rows come from the same moments; the compiled forces are checked against the Python ones. A second table times the
compiled observer step's calls one by one on the same samples, and the two-call alternative to its one call. A third
compares the per-sample force estimate + hysteresis (``update``) with the lift-off motion test (default:
``force_off_still`` 1 N, ``lift_off_speed`` 0.1 m/s; the leg kinematics only for a stance foot in the 1-4 N band) and
without it (``force_off_still`` = ``force_off``), compiled observer, and counts the samples that ran the test.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_contact.py [--seconds 4] [--scenario squat-sway]

Timings are noisy on a shared machine: compare the rows of one run (``uptime`` is printed).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from mcoe_ros.multibody.actuator import ActuatorModel
from mcoe_ros.multibody.contact import ContactConfig, ContactDetector
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.sim.mjcf import REALISTIC_LOSSES
from mcoe_ros.sim.runner import Episode, EpisodeConfig
from mcoe_ros.sim.sensors import REALISTIC_NOISE


def _samples(seconds: float, scenario: str = "trot") -> list:
    """(t, quat, gyro, acc, q, dq, tau) of a simulated scenario's measurements (default a trot)."""
    cfg = EpisodeConfig(segments=[(scenario, seconds)], losses=REALISTIC_LOSSES, noise=REALISTIC_NOISE, seed=0)
    out = []
    Episode(cfg).run(lambda truth, m, payload: out.append((m.t, m.quat, m.gyro, m.acc, m.q, m.dq, m.tau)))
    return out


def _parts(det: ContactDetector, parts: dict, sample: tuple, dt: float) -> None:
    """The compiled observer's per-sample calls on one sample, each timed alone (det: a compiled momentum detector
    that just stepped on it; the observer state is copied, not advanced), and the two-call alternative to observe():
    momentum(), the filter in numpy (as the Python reference's), solve()."""
    compiled, gain = det._compiled, min(det.config.observer_gain * dt, 1.0)
    p0, rhs0, r0 = det._obs_p.copy(), det._obs_rhs.copy(), det._obs_r.copy()
    c = [time.perf_counter()]
    det._set_state(*sample[:5], sample[6])
    c.append(time.perf_counter())
    det._joint_torque(det._v, sample[5])
    c.append(time.perf_counter())
    inputs = det._compiled_inputs(sample)
    c.append(time.perf_counter())
    compiled.observe(*inputs, dt, gain, p0.copy(), rhs0.copy(), r0.copy())
    c.append(time.perf_counter())
    p, rhs = compiled.momentum(*inputs)
    r = r0.copy()
    r *= 1.0 - gain
    r += gain * ((p - p0) / dt - 0.5 * (rhs + rhs0))
    compiled.solve(r)
    c.append(time.perf_counter())
    compiled.momentum(*inputs)
    c.append(time.perf_counter())
    compiled.solve(r)
    c.append(time.perf_counter())
    for name, a, b in zip(parts, c[:-1], c[1:], strict=True):
        parts[name].append((b - a) * 1e6)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="simulated trot")
    ap.add_argument("--repeat", type=int, default=3, help="passes over the samples (all timed)")
    ap.add_argument("--scenario", default="trot", help="simulated scenario (mcoe_sim name), e.g. squat-sway")
    args = ap.parse_args(argv)
    samples = _samples(args.seconds, args.scenario)
    robot = RobotModel()
    losses = REALISTIC_LOSSES
    params = np.concatenate([losses.viscous, losses.coulomb, losses.rotor_inertia])
    cases = {
        "momentum, Python (before)": ("momentum", False),
        "momentum, compiled (now)": ("momentum", True),
        "dynamics, Python": ("dynamics", False),
        "dynamics, compiled": ("dynamics", True),
    }
    before, now = list(cases)[:2]
    times = {name: [] for name in cases}
    part_names = ("set state + base motion (Python)", "friction (Python)",
                  "all inputs: state, base motion, friction, s_O (Python)",
                  "ContactForces.observe: one call (used)",
                  "alternative: momentum() + numpy filter + solve()",
                  "ContactForces.momentum alone", "ContactForces.solve alone")  # fmt: skip
    parts = {name: [] for name in part_names}
    worst = {"momentum": 0.0, "dynamics": 0.0}
    rules = {
        "estimate + update, force threshold only": ContactConfig(force_off_still=ContactConfig.force_off),
        "estimate + update, lift-off motion test (default)": ContactConfig(),
    }
    rule_times = {name: [] for name in rules}
    tested = [0]  #: samples whose update ran the motion test (default rule)
    for _ in range(args.repeat):
        dets = {}
        for name, (method, compiled) in cases.items():
            dets[name] = ContactDetector(robot, ContactConfig(method=method), compiled=compiled)
            dets[name].set_actuator(ActuatorModel(robot), params)
        lift = {name: ContactDetector(robot, cfg, compiled=True) for name, cfg in rules.items()}
        for det in lift.values():
            det.set_actuator(ActuatorModel(robot), params)
        default = list(rules)[1]
        moving = lift[default]._moving

        def counted(feet, _moving=moving):
            tested[0] += 1
            return _moving(feet)

        lift[default]._moving = counted
        prev = None
        for s in samples:
            t, quat, gyro, acc, q, dq, tau = s
            dt = None if prev is None else t - prev[0]
            ddq = None if prev is None else (dq - prev[5]) / dt
            dw = None if prev is None else (gyro - prev[2]) / dt
            out = {}
            for name, det in dets.items():
                a = time.perf_counter()
                out[name] = det.estimate_forces(quat, gyro, acc, q, dq, tau, ddq, dw, dt)
                times[name].append((time.perf_counter() - a) * 1e6)
            for method, (ref, fast) in {"momentum": (before, now), "dynamics": list(cases)[2:]}.items():
                worst[method] = max(worst[method], float(np.abs(out[fast] - out[ref]).max()))
            if dt is not None:
                _parts(dets[now], parts, (quat, gyro, acc, q, dq, tau, dw), dt)
            for name, det in sorted(lift.items(), reverse=len(rule_times[default]) % 2 == 1):  # alternate the order
                a = time.perf_counter()
                det.update(t, det.estimate_forces(quat, gyro, acc, q, dq, tau, ddq, dw, dt))
                rule_times[name].append((time.perf_counter() - a) * 1e6)
            prev = s
    print(f"uptime: {os.popen('uptime').read().strip()}")
    print(f"{len(samples)} samples of a simulated trot x {args.repeat} passes, per sample, microseconds\n")
    print("| estimate_forces | median | mean | p99 |")
    print("|---|---|---|---|")
    for name, v in times.items():
        v = np.array(v)
        print(f"| {name} | {np.median(v):.1f} | {v.mean():.1f} | {np.percentile(v, 99):.1f} |")
    med = {n: np.median(v) for n, v in times.items()}
    print(f"\nmomentum compiled / Python = {med[now] / med[before]:.2f} (medians)")
    print(f"max |compiled - Python| forces, N: momentum {worst['momentum']:.2e}, dynamics {worst['dynamics']:.2e}\n")
    print("| compiled observer step: its calls, each alone | median | mean |")
    print("|---|---|---|")
    for name, v in parts.items():
        print(f"| {name} | {np.median(v):.1f} | {np.mean(v):.1f} |")
    n = len(rule_times[next(iter(rules))])
    print(
        f"\n| compiled momentum detector, per sample ({tested[0]} of {n} ran the motion test) | median | mean | p99 |"
    )
    print("|---|---|---|---|")
    for name, v in rule_times.items():
        v = np.array(v)
        print(f"| {name} | {np.median(v):.1f} | {v.mean():.1f} | {np.percentile(v, 99):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
