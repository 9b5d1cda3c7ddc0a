"""Benchmark of the MCOE solver on Go1 windows (4 feet in contact, dt 2 ms, payload nθ = 10, exp-eigval).

For N = 50, 100, 200, 400 intervals (``--quick``: N = 50 only): time per solver iteration, the Pinocchio-call floor
measured in the same run (one sweep of the interval models' calc_diff over the window, min of 3), their ratio, and
scipy.optimize.least_squares (TRF, finite-difference sparse Jacobian via ``jac_sparsity``, the same residuals with
w eliminated) to the same cost. Measurements carry noise (``--noise`` std of each sensor model, so the optimum cost
is not 0) and a weak parameter prior (``--info-theta``) centred at the 70 %-off initial guess regularises the
weakly excited payload inertia of short windows. least_squares is stopped (callback) as soon as its cost is within
1e-6 (relative) of the solver's converged cost, or after ``--lsq-budget`` seconds. ``--rollouts`` adds the
Table-I style comparison of the multiple / feasible / single-shooting rollouts.

Run: .venv/bin/python benchmarks/bench_solver.py [--quick] [--rollouts] [--no-lsq]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import least_squares

from mcoe_ros.multibody.inertia import pi_about_com
from mcoe_ros.ocp.problem import ArrivalPrior
from mcoe_ros.ocp.solver import MCOESolver, SolverOptions
from mcoe_ros.testing.go1 import go1_window, perturbed
from mcoe_ros.testing.toy import lsq_residuals


def floor_time(prob, xs, pi, repeats: int = 3) -> float:
    """Seconds of one sweep of interval calc_diff calls (the Pinocchio work of one linearisation)."""
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for k, knot in enumerate(prob.knots):
            knot.model.calc_diff(knot.data, xs[k], pi)
        best = min(best, time.perf_counter() - t0)
    return best


def make_problem(n: int, noise: float, info_theta: float):
    """Go1 window with noisy measurements and a weak parameter prior centred at the (70 % off) initial guess."""
    prob, xs_true, pi_true, _ = go1_window(n, noise=noise)
    theta0 = prob.param.theta(perturbed(pi_true))
    prob.prior = ArrivalPrior.independent(xs_true[0], 1e6, prob.ndx, theta0, info_theta if info_theta > 0 else None)
    return prob, xs_true, pi_true, theta0


class _Budget(Exception):
    pass


def lsq_to_cost(prob, xs_true, theta0, target: float, budget: float) -> tuple[float, float, int, bool]:
    """scipy least_squares (TRF, FD Jacobian with jac_sparsity) until cost <= target or ``budget`` seconds.

    Returns (seconds, cost, function evaluations, target reached)."""
    fun, nvar, sparsity = lsq_residuals(prob, xs_true)
    z0 = np.concatenate([np.zeros(nvar - prob.ntheta), theta0])
    state = {"cost": np.inf, "nfev": 0}
    t0 = time.perf_counter()

    def callback(intermediate_result):
        state["cost"] = float(intermediate_result.cost)
        state["nfev"] = int(getattr(intermediate_result, "nfev", 0))
        if state["cost"] <= target:
            raise StopIteration
        if time.perf_counter() - t0 > budget:
            raise StopIteration

    res = least_squares(
        fun, z0, jac_sparsity=sparsity, method="trf", xtol=1e-12, ftol=1e-12, gtol=1e-12, callback=callback
    )
    cost = min(float(res.cost), state["cost"])
    return time.perf_counter() - t0, cost, int(res.nfev), cost <= target


def run(n: int, with_lsq: bool, noise: float, info_theta: float, budget: float) -> dict:
    prob, xs_true, pi_true, theta0 = make_problem(n, noise, info_theta)
    solver = MCOESolver(prob, SolverOptions(max_iter=50))
    t0 = time.perf_counter()
    res = solver.solve(xs_true, None, theta0)
    total = time.perf_counter() - t0
    iters = max(len(res.log), 1)
    floor = floor_time(prob, res.xs, res.pi)
    mass, com, _ = pi_about_com(res.pi)
    mass_t, com_t, _ = pi_about_com(pi_true)
    row = {
        "N": n,
        "iters": res.iterations,
        "conv": res.converged,
        "t_iter": total / iters,
        "floor": floor,
        "ratio": total / iters / floor,
        "solve": total,
        "cost": res.cost,
        "mass_err": abs(mass - mass_t) / mass_t,
        "com_err": float(np.abs(com - com_t).max()),
    }
    if with_lsq:
        target = res.cost * (1.0 + 1e-6)
        t_ls, c_ls, nfev, ok = lsq_to_cost(prob, xs_true, theta0, target, budget)
        row.update(lsq=t_ls, lsq_cost=c_ls, lsq_nfev=nfev, lsq_ok=ok)
    return row


def rollouts(n: int, noise: float, info_theta: float) -> None:
    print(f"\nRollouts (Go1, N = {n}, same problem, payload 70 % off)")
    print(f"{'rollout':>9} {'conv':>5} {'iters':>5} {'cost':>12} {'time[s]':>8}")
    for mode in ("multiple", "feasible", "single"):
        prob, xs_true, pi_true, theta0 = make_problem(n, noise, info_theta)
        t0 = time.perf_counter()
        res = MCOESolver(prob, SolverOptions(rollout=mode, max_iter=100)).solve(xs_true, None, theta0)
        dt = time.perf_counter() - t0
        print(f"{mode:>9} {res.converged!s:>5} {res.iterations:>5} {res.cost:>12.6f} {dt:>8.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 50 only")
    parser.add_argument("--rollouts", action="store_true", help="also compare the three rollouts")
    parser.add_argument("--no-lsq", action="store_true", help="skip scipy least_squares")
    parser.add_argument("--noise", type=float, default=0.5, help="measurement noise in sensor std units")
    parser.add_argument("--info-theta", type=float, default=1.0, help="θ prior information (0: no θ prior)")
    parser.add_argument("--lsq-budget", type=float, default=120.0, help="least_squares time budget per N [s]")
    args = parser.parse_args(argv)
    sizes = (50,) if args.quick else (50, 100, 200, 400)
    print(
        f"Go1 window, 4 contacts, dt 2 ms, nθ = 10 (exp-eigval), ndx = 36, noise {args.noise} std, "
        f"θ prior information {args.info_theta}; times in ms unless noted"
    )
    head = (
        f"{'N':>4} {'iters':>5} {'conv':>5} {'t/iter':>8} {'floor':>8} {'ratio':>6} {'solve[s]':>8} "
        f"{'cost':>11} {'mass err':>9} {'CoM err':>8}"
    )
    if not args.no_lsq:
        head += f" {'lsq[s]':>8} {'lsq/ours':>8} {'lsq nfev':>8} {'reached':>7} {'dcost/cost':>10}"
    print(head)
    for n in sizes:
        r = run(n, not args.no_lsq, args.noise, args.info_theta, args.lsq_budget)
        line = (
            f"{r['N']:>4} {r['iters']:>5} {r['conv']!s:>5} {1e3 * r['t_iter']:>8.1f} {1e3 * r['floor']:>8.1f} "
            f"{r['ratio']:>6.2f} {r['solve']:>8.2f} {r['cost']:>11.4f} {r['mass_err']:>9.2e} {r['com_err']:>8.1e}"
        )
        if "lsq" in r:
            rel = (r["lsq_cost"] - r["cost"]) / r["cost"]
            line += (
                f" {r['lsq']:>8.2f} {r['lsq'] / r['solve']:>8.1f} {r['lsq_nfev']:>8d} {r['lsq_ok']!s:>7} {rel:>10.1e}"
            )
        print(line, flush=True)
    if args.rollouts:
        rollouts(100, args.noise, args.info_theta)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
