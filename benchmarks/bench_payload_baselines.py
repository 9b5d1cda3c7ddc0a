"""Payload identification baselines on simulated Go1 bags: LS[100 ms], LS[10 ms] (MCOE paper Table II) and RLS-logdet.

Bags: ``mcoe_sim`` (MuJoCo) with a 7.2 kg payload (CoM (0.02, 0, 0.05) m in the trunk, 0.3 x 0.2 x 0.1 m box), perfect
sensors, 500 Hz, scenarios squat-sway and trot, written to a temporary directory (:mod:`mcoe_ros.testing.datasets`).

Observation noise: :func:`mcoe_ros.testing.datasets.add_noise` (seed fixed). Stance flags: ground truth
(``ground_truth/contacts``). Reference payload: the one MuJoCo simulates
(:func:`mcoe_ros.testing.datasets.simulated_payload_pi`).

Pipeline: :func:`mcoe_ros.payload.regression.states_from_sensors` (SG window 0.1 s or 0.01 s, polyorder 2, all channels
smoothed) -> :class:`PayloadRegressor` -> :func:`mcoe_ros.payload.batch.fit_ols` /
:func:`mcoe_ros.payload.batch.run_rls` (RLS on the 10 ms stream). The first and last SG half-window are dropped (filter
edge effects).

Run: .venv/bin/python benchmarks/bench_payload_baselines.py [--quick] [--contact-guard 0.01] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.payload.batch import fit_ols, run_rls
from mcoe_ros.payload.regression import PayloadRegressor
from mcoe_ros.testing.datasets import add_noise, load_bag, make_bag, regression_stream, simulated_payload_pi

SIGMAS = (0.0, 0.005, 0.01, 0.1)
WINDOWS = (0.1, 0.01)
POLYORDER = 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 s bags, sigma in {0, 0.01}")
    parser.add_argument(
        "--contact-guard", type=float, default=0.0, help="drop samples within this many s of a stance change"
    )
    parser.add_argument("--keep", default="", help="write/reuse bags in this directory instead of a temp dir")
    args = parser.parse_args()
    seconds = 3.0 if args.quick else 10.0
    sigmas = (0.0, 0.01) if args.quick else SIGMAS
    robot = RobotModel()
    regressor = PayloadRegressor(robot)
    pi_sim = simulated_payload_pi()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or tmp
        os.makedirs(root, exist_ok=True)
        print(f"payload baselines on mcoe_sim bags ({seconds:g} s, 500 Hz, 7.2 kg payload), SG polyorder {POLYORDER}")
        print(
            "mass error % (CoM error mm); RLS-logdet on the 10 ms stream, alpha and prior from mcoe_ros.payload.batch;"
        )
        print(f"contact guard {args.contact_guard:g} s; consistent = pseudo-inertia PD for LS[100]/LS[10]/RLS")
        header = (
            f"{'scenario':<11} {'sigma':>6} | {'LS[100ms]':>17} | {'LS[10ms]':>17} | {'RLS-logdet':>17} | consistent"
        )
        print(header)
        print("-" * len(header))
        for scenario in ("squat-sway", "trot"):
            path = os.path.join(root, f"{scenario}_{seconds:g}s")
            if not os.path.exists(path):
                make_bag(path, scenario, seconds)
            clean, pi_bag = load_bag(path)
            if not np.allclose(pi_bag, pi_sim, atol=1e-6):
                com_bag, com_sim = pi_bag[1:4] / pi_bag[0], pi_sim[1:4] / pi_sim[0]
                print(f"  note: bag ground-truth CoM {com_bag} m != simulated {com_sim} m; errors vs the simulated one")
            pi_true = pi_sim
            for sigma in sigmas:
                series = add_noise(clean, sigma, np.random.default_rng(0))
                cells, flags = [], []
                wall = time.perf_counter()
                for window in WINDOWS:
                    gammas, ys, mask = regression_stream(
                        robot, regressor, series, window, POLYORDER, args.contact_guard
                    )
                    est = fit_ols(gammas, ys, mask)
                    cells.append(est.errors(pi_true))
                    flags.append("y" if est.consistent else "n")
                est, _ = run_rls(gammas, ys, mask)
                cells.append(est.errors(pi_true))
                flags.append("y" if est.consistent else "n")
                text = " | ".join(f"{m:8.2f} ({c:6.1f})" for m, c in cells)
                print(f"{scenario:<11} {sigma:>6g} | {text} | {'/'.join(flags)}  [{time.perf_counter() - wall:.0f} s]")


if __name__ == "__main__":
    main()
