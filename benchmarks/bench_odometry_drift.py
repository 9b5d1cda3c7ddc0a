"""Per-tick cost of the estimator's session-14 bookkeeping: the touch-downs' drift (``noise.odometry_slip_time``,
:class:`mcoe_ros.estimation.drift.TouchdownDrift`) and the vertical-moment gate's excitation measure
(``payload.min_vertical_excitation``, :func:`mcoe_ros.estimation.excitation.horizontal_excitation`).

A synthetic trot on the estimator's grid (2 ms knots, diagonal foot pairs alternating every 0.1 s, every state a Go1
pose moving at 0.3 m/s) is slid by the tick's 25 knots as the estimator does; per tick: the drift update over the
window (new knots searched, the landings in the window re-evaluated) and the excitation of the window's specific
force. Median and 99th percentile in ms per window length, next to the compiled solver's tick p50 of
docs/performance.md (17 ms) for scale.

Run: .venv/bin/python benchmarks/bench_odometry_drift.py [--ticks 400]
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from mcoe_ros.estimation.drift import TouchdownDrift
from mcoe_ros.estimation.excitation import horizontal_excitation
from mcoe_ros.multibody.robot import RobotModel


@dataclass
class _Imu:
    acc: np.ndarray


@dataclass
class _Knot:
    """The GridKnot fields the two measures read."""

    t: float
    contacts: tuple
    imu: _Imu
    detector_start: bool = False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=400, help="ticks per window length")
    args = ap.parse_args()
    robot = RobotModel()
    dt, step = 0.002, 25
    q = robot.neutral()
    q[2] = 0.3
    v = np.zeros(robot.nv)
    v[0] = 0.3
    x = np.r_[q, v]
    rng = np.random.default_rng(0)
    n_total = args.ticks * step + 400
    pairs = ((True, False, False, True), (False, True, True, False))
    knots = [
        _Knot(i * dt, pairs[(i // 50) % 2], _Imu(np.r_[0.3 * rng.standard_normal(2), 9.8])) for i in range(n_total)
    ]
    print(f"pinocchio {pin.__version__}, {os.cpu_count()} cpus; load {os.getloadavg()[0]:.2f}")
    print("| window knots | drift update p50 ms | p99 ms | excitation p50 ms | p99 ms | touch-downs |")
    print("|---|---|---|---|---|---|")
    for n in (101, 201):
        drift = TouchdownDrift(robot, 0.003, lambda k: k.contacts, dt)
        xs = [x] * n
        t_drift, t_exc = [], []
        for tick in range(args.ticks):
            window = knots[tick * step : tick * step + n]
            t0 = time.perf_counter()
            drift.update(window, xs)
            t1 = time.perf_counter()
            horizontal_excitation(window)
            t2 = time.perf_counter()
            t_drift.append(t1 - t0)
            t_exc.append(t2 - t1)
        d, e = 1e3 * np.array(t_drift), 1e3 * np.array(t_exc)
        print(
            f"| {n} | {np.median(d):.3f} | {np.percentile(d, 99):.3f} | {np.median(e):.3f} | "
            f"{np.percentile(e, 99):.3f} | {drift.count} |"
        )


if __name__ == "__main__":
    main()
