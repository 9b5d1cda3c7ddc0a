"""Benchmark and sanity numbers of the MuJoCo Go1 simulator: speed (x real time) and physics checks per scenario.

Run: ``.venv/bin/python benchmarks/bench_sim.py`` (about a minute). Prints one line per scenario.
"""

from __future__ import annotations

import time

import numpy as np

from mcoe_ros.sim.mjcf import PayloadSpec
from mcoe_ros.sim.runner import Episode, EpisodeConfig

PAYLOAD = PayloadSpec(7.2, [0.02, 0.0, 0.05], [[0.06, 0.005, 0.003], [0.005, 0.09, 0.002], [0.003, 0.002, 0.11]])


def run(segments: list[tuple[str, float]], knows: str = "mass") -> None:
    ep = Episode(EpisodeConfig(segments=segments, payload=PAYLOAD, knows=knows))
    fz, heights, flight = [], [], []

    def on_sample(truth, meas, payload):
        fz.append(ep.sim.total_vertical_contact_force())
        heights.append(truth.base_pos[2])
        flight.append(not truth.contacts.any())

    t0 = time.perf_counter()
    stats = ep.run(on_sample)
    wall = time.perf_counter() - t0
    weight = (ep.sim.robot_mass + ep.sim.payload.mass) * 9.81
    fz_err = (np.mean(fz) - weight) / weight
    name = ",".join(f"{n}:{d:g}" for n, d in segments)
    print(
        f"{name:28s} knows={knows:5s} x_realtime={ep.cfg.duration / wall:5.1f} height=[{min(heights):.3f}, "
        f"{max(heights):.3f}] m mean_Fz_err={100 * fz_err:+.3f}% flight={np.mean(flight):.2f} fell={stats.fell}"
    )


if __name__ == "__main__":
    run([("stand", 3.0)])
    run([("stand", 3.0)], knows="none")
    run([("squat-sway", 6.0)])
    run([("trot", 4.0)])
    run([("trot", 4.0)], knows="none")
    run([("trot-forward", 5.0)])
    run([("walk", 6.0)])
    run([("pronk", 4.0)])
    run([("pickup", 3.0), ("trot", 3.0), ("drop", 2.0)])
