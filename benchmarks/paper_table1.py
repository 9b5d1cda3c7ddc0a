"""MCOE paper Table I analogue: single-shooting vs feasibility-driven vs multiple-shooting rollouts from random initial
guesses on an arm (Kinova), a quadrotor (Hector) and a quadruped (Go1, 4 feet in contact).

Windows: :func:`mcoe_ros.testing.paper.make_window` (estimator's own models, exp-eigval payload, measurement noise of
1x the model standard deviations, noisy arrival prior), one window per system (seed 0).
Random initial guesses (seed 1000 + i), the same for the three rollouts:
- states: x_k ⊕ δ_k, δ_k ~ N(0, diag(s_q on the configuration tangent, s_v on the velocity)), two spreads:
  'small' (s_q, s_v) = (0.01, 0.1) and 'large' (0.05, 0.5) (rad or m, rad/s or m/s); noises w_k = 0 (single
  shooting replaces x_1..x_N by the rollout of x_0, as its definition requires);
- payload: mass x exp(N(0, 0.3²)), CoM + N(0, (0.05 m)²) per axis, principal second moments x exp(N(0, 0.3²))
  each (always physically consistent), principal axes rotated by Exp(N(0, 0.3² I)).
Parameter prior: weak, N(θ_0, I) centred on the random initial guess (std 1 in every exp-eigval coordinate: log
mass, first moment kg m, rotation rad, log second moments). The paper drops the parameter prior only for Fig. 3;
without it the unobservable rotational-inertia directions of the quadrotor drift to exp(90) and the factorisation
fails, which would measure identifiability rather than the rollouts.
Solver: MCOESolver(rollout=...), max_iter 200, tol_stop 1e-9, tol_gap 1e-8; a run that does not converge within
200 iterations (or stops on the regularisation limit) is a failure (x in the paper).
Metrics (converged runs): iterations, final cost, error = ℓ∞ norm of the state error over the window (tangent
space), payload mass error. p-value: one-way ANOVA (scipy.stats.f_oneway) over the rollouts that have >= 2
converged runs, Bonferroni-corrected for the number of tests in the table.

Run: .venv/bin/python benchmarks/paper_table1.py [--quick] [--guesses N]
  --quick: 4 guesses per spread and half-length windows (Kinova 50, quadrotor 50, Go1 25 nodes). Full: 100 guesses, full
  windows (Kinova 100 x 10 ms, quadrotor 100 x 10 ms, Go1 50 x 2 ms). Writes docs/table1[_quick][_<N>guesses].md
  (the suffix when --guesses is given).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pinocchio as pin
from scipy.stats import f_oneway

from mcoe_ros.multibody.inertia import pi_about_com, pi_from_com
from mcoe_ros.ocp.problem import ArrivalPrior
from mcoe_ros.ocp.solver import MCOESolver, SolverOptions
from mcoe_ros.testing.paper import DEFAULT_N, make_window, mass_error_pct, traj_error
from mcoe_ros.testing.reporting import command_line, md_table, versions, write_doc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")

SYSTEMS = ("kinova", "quadrotor", "go1")
ROLLOUTS = ("single", "feasible", "multiple")
MAX_ITER = 200
THETA_PRIOR_INFO = 1.0  #: information of the weak parameter prior (std 1 in every manifold coordinate)


STATE_SCALES = {"small": (0.01, 0.1), "large": (0.05, 0.5)}  #: std on the configuration tangent / velocity


def random_guess(window, rng: np.random.Generator, spread: str = "small") -> tuple[list, np.ndarray]:
    st = window.problem.state
    nv = st.nv
    sq, sv = STATE_SCALES[spread]
    scale = np.r_[np.full(nv, sq), np.full(nv, sv)]
    xs = [st.integrate(x, scale * rng.standard_normal(st.ndx)) for x in window.xs_true]
    mass, com, inertia = pi_about_com(window.pi_true)
    evals, evecs = np.linalg.eigh(inertia)
    rot = evecs @ pin.exp3(0.3 * rng.standard_normal(3))
    second = (0.5 * evals.sum() - evals) * np.exp(0.3 * rng.standard_normal(3))  # principal second moments
    pi0 = pi_from_com(
        mass * np.exp(0.3 * rng.standard_normal()),
        com + 0.05 * rng.standard_normal(3),
        rot @ np.diag(second.sum() - second) @ rot.T,
    )
    return xs, window.problem.param.theta(pi0)


def weak_theta_prior(problem, theta0: np.ndarray) -> ArrivalPrior:
    """The window's arrival prior on x_0 plus a weak parameter prior N(theta0, I) centred on the initial guess."""
    old = problem.prior
    ndx = problem.ndx
    hess = old.hessian.copy()
    hess[ndx:, ndx:] = THETA_PRIOR_INFO * np.eye(problem.ntheta)
    return ArrivalPrior(old.x_bar.copy(), np.array(theta0, dtype=float), hess)


def run_system(name: str, guesses: int, n: int, spread: str) -> dict:
    window = make_window(name, seed=0, n=n)
    out = {ro: [] for ro in ROLLOUTS}
    for i in range(guesses):
        xs0, theta0 = random_guess(window, np.random.default_rng(1000 + i), spread)
        window.problem.prior = weak_theta_prior(window.problem, theta0)
        for ro in ROLLOUTS:
            opts = SolverOptions(rollout=ro, max_iter=MAX_ITER, tol_stop=1e-9, tol_gap=1e-8)
            t0 = time.perf_counter()
            try:
                res = MCOESolver(window.problem, opts).solve(xs0, None, theta0)
                ok = res.converged and np.isfinite(res.cost)
                rec = (ok, res.iterations, res.cost, traj_error(window, res.xs), mass_error_pct(res.pi, window.pi_true))
            except (np.linalg.LinAlgError, FloatingPointError, ValueError):
                rec = (False, MAX_ITER, np.nan, np.nan, np.nan)
            out[ro].append((*rec, time.perf_counter() - t0))
        print(
            f"  {name} {spread} guess {i}: "
            + "  ".join(f"{ro} {'ok' if out[ro][-1][0] else 'FAIL'} {out[ro][-1][1]} it" for ro in ROLLOUTS),
            flush=True,
        )
    return out


def fmt(vals: list[float], digits: int = 3) -> str:
    if not vals:
        return "×"
    return f"{np.mean(vals):.{digits}g} ± {np.std(vals):.{digits}g}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--guesses", type=int, default=0)
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS))
    ap.add_argument("--spreads", nargs="+", default=list(STATE_SCALES), choices=list(STATE_SCALES))
    args = ap.parse_args()
    guesses = args.guesses or (4 if args.quick else 100)
    wall0 = time.perf_counter()
    results = {}
    for spread in args.spreads:
        for name in args.systems:
            n = DEFAULT_N[name] // 2 if args.quick else DEFAULT_N[name]
            t0 = time.perf_counter()
            results[name, spread] = (n, run_system(name, guesses, n, spread))
            print(f"{name} {spread}: {time.perf_counter() - t0:.0f} s", flush=True)
    metrics = (("iterations", 1), ("cost", 2), ("error", 3), ("mass error %", 4))
    n_tests = len(results) * len(metrics)
    rows = []
    for (name, spread), (n, out) in results.items():
        groups = {}
        for ro in ROLLOUTS:
            good = [r for r in out[ro] if r[0]]
            groups[ro] = good
            rows.append(
                [
                    f"{name} (N={n}) {spread}",
                    ro,
                    f"{len(good)}/{len(out[ro])}",
                    *(fmt([r[col] for r in good]) for _, col in metrics),
                    f"{np.mean([r[5] for r in out[ro]]):.2f}",
                ]
            )
        pvals = []
        for _, col in metrics:
            samples = [[r[col] for r in g] for g in groups.values() if len(g) >= 2]
            if len(samples) >= 2 and any(np.std(s) > 0 for s in samples):
                p = min(1.0, float(f_oneway(*samples).pvalue) * n_tests)
                pvals.append(f"{p:.2e}")
            else:
                pvals.append("n/a")
        rows.append([f"{name} {spread}", "p-value", "", *pvals, ""])
    header = ["system / spread", "rollout", "converged", *(m for m, _ in metrics), "wall s/run"]
    total = time.perf_counter() - wall0
    text = (
        f"<!-- generated by {command_line(ROOT)} -->\n"
        f"{guesses} random initial guesses per system (seeds 1000..{999 + guesses}), max {MAX_ITER} iterations; "
        f"mean ± std over the converged runs; p-values: one-way ANOVA, Bonferroni x{n_tests}; {versions()}; "
        f"total wall time {total:.0f} s.\n\n" + md_table(header, rows)
    )
    print(text)
    name = "table1" + ("_quick" if args.quick else "") + (f"_{guesses}guesses" if args.guesses else "") + ".md"
    print("wrote", write_doc(DOCS, name, text))


if __name__ == "__main__":
    main()
