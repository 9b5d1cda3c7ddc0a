"""Crocoddyl FDDP iteration time on a Go1 horizon comparable to the estimator's window (the compiled reference of
benchmarks/bench_compiled.py): 4 point contacts (ContactModel3D), dt 2 ms, N intervals, 1 thread, state and control
regularisation costs, Euler integration.

Runs in its own virtualenv (Crocoddyl 3.2.1 from PyPI segfaults on 4-contact problems with pin 4.1.0; it works with
pin 4.0.0), set up with:

    python3 -m venv .venv-croc
    .venv-croc/bin/pip install pin==4.0.0 libpinocchio==4.0.0 crocoddyl==3.2.1 example-robot-data==5.0.0

(pip reports example-robot-data 6.0.0 and crocoddyl 3.2.1 as conflicting; 5.0.0 resolves with them.)

Run: .venv-croc/bin/python benchmarks/bench_crocoddyl.py [--n 100] [--repeats 20] [--threads 1]
Prints one JSON line: {"N", "iteration_s" (min over repeats of calcDiff + backward pass + one forward pass),
"iteration_median_s", "calc_diff_s", "backward_s", "forward_s", "loop_iteration_s" (one more
iteration inside FDDP's own solve loop: (t(3 iterations) - t(1 iteration)) / 2), "versions"}.
"""

from __future__ import annotations

import argparse
import json
import time

import crocoddyl
import example_robot_data
import numpy as np
import pinocchio as pin

FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")


def go1_problem(n: int, dt: float = 2e-3, threads: int = 1) -> tuple[crocoddyl.ShootingProblem, np.ndarray]:
    robot = example_robot_data.load("go1")
    model = robot.model
    q0 = model.referenceConfigurations["standing"].copy() if "standing" in model.referenceConfigurations else None
    if q0 is None:
        q0 = pin.neutral(model)
        q0[2] = 0.3
    x0 = np.concatenate([q0, np.zeros(model.nv)])
    state = crocoddyl.StateMultibody(model)
    actuation = crocoddyl.ActuationModelFloatingBase(state)
    nu = actuation.nu
    data = model.createData()
    pin.framesForwardKinematics(model, data, q0)

    def running_model(terminal: bool):
        contacts = crocoddyl.ContactModelMultiple(state, nu)
        for name in FEET:
            fid = model.getFrameId(name)
            contact = crocoddyl.ContactModel3D(
                state, fid, data.oMf[fid].translation.copy(), pin.LOCAL_WORLD_ALIGNED, nu, np.array([0.0, 50.0])
            )
            contacts.addContact(name, contact)
        costs = crocoddyl.CostModelSum(state, nu)
        xreg = crocoddyl.ResidualModelState(state, x0, nu)
        costs.addCost("state", crocoddyl.CostModelResidual(state, xreg), 1e1)
        if not terminal:
            ureg = crocoddyl.ResidualModelControl(state, nu)
            costs.addCost("control", crocoddyl.CostModelResidual(state, ureg), 1e-3)
        dam = crocoddyl.DifferentialActionModelContactFwdDynamics(state, actuation, contacts, costs, 0.0, True)
        return crocoddyl.IntegratedActionModelEuler(dam, 0.0 if terminal else dt)

    running = running_model(False)
    problem = crocoddyl.ShootingProblem(x0, [running] * n, running_model(True))
    problem.nthreads = threads
    return problem, x0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1, help="ShootingProblem.nthreads (calc / calcDiff over the knots)")
    args = ap.parse_args()
    problem, x0 = go1_problem(args.n, threads=args.threads)
    solver = crocoddyl.SolverFDDP(problem)
    rng = np.random.default_rng(0)
    xs = [x0 + np.r_[np.zeros(7), 1e-3 * rng.standard_normal(x0.size - 7)] for _ in range(args.n + 1)]
    us = list(problem.quasiStatic(xs[:-1]))
    solver.setCandidate(xs, us, False)
    its, cds, bws, fws = [], [], [], []
    for _ in range(args.repeats):
        solver.setCandidate(xs, us, False)
        t0 = time.perf_counter()
        problem.calc(solver.xs, solver.us)
        problem.calcDiff(solver.xs, solver.us)
        t1 = time.perf_counter()
        solver.backwardPass()
        t2 = time.perf_counter()
        solver.tryStep(1.0)
        t3 = time.perf_counter()
        cds.append(t1 - t0)
        bws.append(t2 - t1)
        fws.append(t3 - t2)
        its.append(t3 - t0)
    # one more iteration inside FDDP's own loop: solves with budgets 1 and 3 from the same start (th_stop ~0: no
    # convergence stop), (t3 - t1) / 2 (bench_compiled.py's loop_iteration does the same with the MCOE solver)
    solver.th_stop = 1e-300  # must be > 0
    loop = {}
    for k in (1, 3):
        loop[k] = np.inf
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            solver.solve(xs, us, k, False)
            loop[k] = min(loop[k], time.perf_counter() - t0)
        if solver.iter != k:  # the loop counter: k when the budget ran out, less on a convergence stop
            raise SystemExit(f"FDDP stopped after {solver.iter} of {k} iterations")
    print(
        json.dumps(
            {
                "N": args.n,
                "threads": problem.nthreads,
                "iteration_s": min(its),
                "iteration_median_s": float(np.median(its)),
                "calc_diff_s": min(cds),
                "backward_s": min(bws),
                "forward_s": min(fws),
                "loop_iteration_s": (loop[3] - loop[1]) / 2,
                "loop_last_step": float(solver.stepLength),
                "versions": {"crocoddyl": crocoddyl.__version__, "pinocchio": pin.__version__},
            }
        )
    )


if __name__ == "__main__":
    main()
