"""Cost of the inertial parametrizations: µs per call of pi() and jacobian(), vs Pinocchio's log-Cholesky floor.

Run: .venv/bin/python benchmarks/bench_inertia.py
"""

from __future__ import annotations

import timeit

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.inertia import (
    logdet_divergence,
    logdet_divergence_grad,
    logdet_divergence_hess,
    make_parametrization,
)


def _us_per_call(fun, number: int = 20000, repeat: int = 5) -> float:
    return 1e6 * min(timeit.repeat(fun, number=number, repeat=repeat)) / number


def main() -> None:
    theta = np.random.default_rng(0).normal(0, 0.5, 10)
    floor = _us_per_call(lambda: pin.LogCholeskyParameters(theta).calculateJacobian())
    rows = [("pin.LogCholeskyParameters(θ).calculateJacobian()", floor)]
    for name in ("exp-eigval", "log-cholesky", "plain"):
        param = make_parametrization(name)
        rows.append((f"{name}.pi", _us_per_call(lambda p=param: p.pi(theta))))
        rows.append((f"{name}.jacobian", _us_per_call(lambda p=param: p.jacobian(theta))))
        if name != "plain":
            pi = param.pi(theta)
            rows.append((f"{name}.theta (inverse)", _us_per_call(lambda p=param, x=pi: p.theta(x), number=5000)))
    pi, pi0 = make_parametrization("log-cholesky").pi(theta), make_parametrization("log-cholesky").pi(0.5 * theta)
    rows.append(("logdet_divergence", _us_per_call(lambda: logdet_divergence(pi, pi0))))
    rows.append(("logdet_divergence_grad", _us_per_call(lambda: logdet_divergence_grad(pi, pi0))))
    rows.append(("logdet_divergence_hess", _us_per_call(lambda: logdet_divergence_hess(pi))))
    width = max(len(r[0]) for r in rows)
    print(f"{'call':<{width}} | {'µs/call':>8} | {'ratio to floor':>14}")
    print(f"{'-' * width}-+-{'-' * 8}-+-{'-' * 14}")
    for label, us in rows:
        print(f"{label:<{width}} | {us:8.2f} | {us / floor:14.1f}")


if __name__ == "__main__":
    main()
