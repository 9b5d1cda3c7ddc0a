"""Cost per update of RlsLogdet and RlsL2 (one body, 10 parameters, 6-D wrench output), with Newton iteration counts.

Run: .venv/bin/python benchmarks/bench_rls.py
"""

from __future__ import annotations

import time

import numpy as np

from mcoe_ros.multibody.body_wrench import body_wrench_regressor
from mcoe_ros.multibody.inertia import pi_from_com
from mcoe_ros.payload.rls import RlsL2, RlsLogdet

N_STEPS = 5000
TRUE = pi_from_com(2.0, np.array([0.05, -0.02, 0.1]), np.diag([0.02, 0.03, 0.04]))
PRIOR = pi_from_com(1.0, np.zeros(3), np.diag([0.01, 0.01, 0.01]))


def _data(seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(N_STEPS):
        gamma = body_wrench_regressor(rng.normal(size=3), 3 * rng.normal(size=3), 3 * rng.normal(size=3) + [0, 0, 9.81])
        out.append((gamma, gamma @ TRUE + 0.01 * rng.normal(size=6)))
    return out


def _run(estimator, data) -> tuple[np.ndarray, np.ndarray]:
    times, iters = np.empty(len(data)), np.empty(len(data), dtype=int)
    for k, (gamma, y) in enumerate(data):
        start = time.perf_counter()
        estimator.update(gamma, y)
        times[k] = time.perf_counter() - start
        iters[k] = estimator.iterations
    return 1e6 * times, iters


def main() -> None:
    data = _data()
    cases = [
        ("RlsLogdet (mu=1)", RlsLogdet(PRIOR, alpha=1.0)),
        ("RlsLogdet (mu=0.99)", RlsLogdet(PRIOR, alpha=1.0, mu=0.99)),
        ("RlsLogdet (max_iter=1)", RlsLogdet(PRIOR, alpha=1.0, max_iter=1)),
        ("RlsL2", RlsL2(PRIOR, alpha=1.0)),
    ]
    max_it = 6
    header = f"{'estimator':<24} | {'mean µs':>8} | {'median':>7} | {'p99':>7} | " + " | ".join(
        f"it={i}" if i < max_it else f"it>={i}" for i in range(max_it + 1)
    )
    print(f"{N_STEPS} updates, n = 10, m = 6 (Newton steps applied per update; RlsL2 is closed form)")
    print(header)
    print("-" * len(header))
    for label, est in cases:
        us, iters = _run(est, data)
        hist = np.bincount(np.minimum(iters, max_it), minlength=max_it + 1)
        cells = " | ".join(f"{h:>5}" if i < max_it else f"{h:>6}" for i, h in enumerate(hist))
        print(f"{label:<24} | {us.mean():8.1f} | {np.median(us):7.1f} | {np.percentile(us, 99):7.1f} | {cells}")


if __name__ == "__main__":
    main()
