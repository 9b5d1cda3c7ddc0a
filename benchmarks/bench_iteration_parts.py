"""Where one compiled solver iteration's time goes (issue 16), on the N = 100 window of bench_compiled.py, 1 thread.

The iteration is bench_compiled's: calc_diff, compute_direction(1e-9), try_step(1.0), repeated at the same point.
Printed, in ms (minimum over ``--repeats`` of each part):

- each part timed from Python inside the iteration, and alone (repeated on its own, as bench_compiled's phases);
- the solver's sections timed in C++ inside the iteration (``Solver.section_timing``: linearise / direction / trial
  and their parts);
- the proximal iterations of constraintDynamics per stance knot, in the linearisation and in the trial (Pinocchio
  resets the proximal multiplier to zero at every call: a point's count does not depend on the data's history).

Run: PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_iteration_parts.py [--repeats 20] [--n 100]
"""

from __future__ import annotations

import argparse
import subprocess
import time

import numpy as np
from bench_linearisation_calls import window_solver  # benchmarks/ is the script's directory


def _best_sequence(parts: list, repeats: int, cls=None) -> tuple[list, dict]:
    """Minimum seconds of each part of the sequence and of its total; with the solver class cls, also the minimum
    per C++ section (Solver.section_timing)."""
    best = [np.inf] * (len(parts) + 1)
    best_sections: dict = {}
    sections = cls is not None
    for _ in range(repeats):
        if sections:
            cls.section_timing(True)
        ts = [time.perf_counter()]
        for fn in parts:
            fn()
            ts.append(time.perf_counter())
        if sections:
            cls.section_timing(False)
            for site, t in cls.pinocchio_floor_sites().items():
                best_sections[site] = min(best_sections.get(site, np.inf), t)
        for i in range(len(parts)):
            best[i] = min(best[i], ts[i + 1] - ts[i])
        best[-1] = min(best[-1], ts[-1] - ts[0])
    return best, best_sections


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--n", type=int, default=100)
    args = ap.parse_args()
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    cpp = window_solver(args.n)
    parts = [cpp.calc_diff, lambda: cpp.compute_direction(1e-9), lambda: cpp.try_step(1.0)]
    names = ["linearisation", "direction", "trial"]
    inside, _ = _best_sequence(parts, args.repeats)
    alone = [_best_sequence([fn], args.repeats)[0][0] for fn in parts]
    print(f"\nN = {args.n}, 1 thread, ms (min over {args.repeats})\n")
    print("| part | inside the iteration | alone (warm) | excess |")
    print("|---|---|---|---|")
    for name, a, b in zip(names, inside, alone, strict=False):
        print(f"| {name} | {1e3 * a:.2f} | {1e3 * b:.2f} | {1e3 * (a - b):.2f} |")
    print(
        f"| **iteration** | **{1e3 * inside[-1]:.2f}** | {1e3 * sum(alone):.2f} (sum) | "
        f"{1e3 * (inside[-1] - sum(alone)):.2f} |"
    )
    if not hasattr(type(cpp), "section_timing"):  # an extension built before the section timers
        return
    _, sections = _best_sequence(parts, args.repeats, cls=type(cpp))
    print("\nC++ sections inside the iteration (min per section; parts include their sub-sections)\n")
    print("| section | ms |")
    print("|---|---|")
    for site in sorted(sections):
        print(f"| {site} | {1e3 * sections[site]:.3f} |")
    # proximal iterations of constraintDynamics: the linearisation (calc_diff) and the trial (try_step)
    cpp.calc_diff()
    cpp.try_step(1.0)
    lin = np.array([cpp.knot_data(k).prox_iterations for k in range(cpp.N + 1)])
    trial = np.array([cpp.knot_trial(k).prox_iterations for k in range(cpp.N + 1)])
    stance = lin > 0
    print(
        f"\nproximal iterations per stance knot ({int(stance.sum())} of {cpp.N + 1} knots): linearisation mean "
        f"{lin[stance].mean():.2f} max {lin.max()}, trial mean {trial[stance].mean():.2f} max {trial.max()}"
    )


if __name__ == "__main__":
    main()
