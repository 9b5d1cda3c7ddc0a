"""Keeping the identified actuator parameters physical: an excitation gate and bounds (issue 13); the same gate for the
leg mass scale (:class:`LegMassGate`) and for the estimated body's vertical first moment (:class:`VerticalMomentGate`).

The actuator parameters p = (viscous b_v, Coulomb b_c, rotor inertia I_r) per joint group
(:class:`mcoe_ros.multibody.actuator.ActuatorModel`) enter the joint torque balance through the regressor columns
dq, tanh(dq / eps) and ddq. At stand-still these columns vanish or carry only noise (dq ~ 0, the sign of tanh is that
of the velocity noise, ddq ~ 0), so a window without joint motion holds no information on p, yet any other torque
residual (payload, URDF mismatch, soft feet) can be absorbed by a large b_c times the tanh of a tiny velocity or by a
large I_r times a tiny acceleration: the parameters run away and take the payload's place. Two guards:

* **Gate.** :func:`joint_excitation` measures the window's RMS joint velocity (rad/s, measured encoder velocities,
  all knots and joints). Below ``actuator.min_excitation`` the parameters are frozen for that solve: an anchor
  ½ w ‖θ_a − θ_a,now‖² (w = :data:`FREEZE_INFORMATION`, θ_a = log p) is added to the arrival prior for the solve
  only and removed before the next shift marginalises the dropped knots, so the anchor never becomes information
  (the covariance stays honest). The knots of a still window still enter the marginalised prior with the
  information they really carry (little, at the frozen values).
* **Bounds.** After every solve θ_a is clipped to [−∞, log p_max] (``actuator.max_viscous``, ``max_coulomb``,
  ``max_rotor_inertia``), in the result and in the solver's warm start.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mcoe_ros.ocp.problem import ArrivalPrior

#: information of the freeze anchor on log p (std 1e-3 of the log, i.e. 0.1 %)
FREEZE_INFORMATION = 1e6


def joint_excitation(knots: Sequence) -> float:
    """RMS (rad/s) of the measured joint velocities ``knot.joint.dq`` over the knots and joints."""
    dq = np.array([k.joint.dq for k in knots], dtype=float)
    return float(np.sqrt(np.mean(dq * dq))) if dq.size else 0.0


def anchored(prior: ArrivalPrior, indices: np.ndarray, theta: np.ndarray, information: float) -> ArrivalPrior:
    """``prior`` plus ½ information ‖θ[indices] − theta[indices]‖² (θ the parameters; theta (ntheta,) the anchor).

    In the prior's error coordinates e_θ = θ − θ̄: H += information on the diagonal entries, g += −information
    (theta − θ̄) on them (the constant is dropped)."""
    idx = len(prior.hessian) - len(prior.theta_bar) + np.asarray(indices, dtype=int)
    hess = prior.hessian.copy()
    grad = prior.gradient.copy()
    hess[idx, idx] += information
    grad[idx] -= information * (theta[indices] - prior.theta_bar[indices])
    return ArrivalPrior(prior.x_bar.copy(), prior.theta_bar.copy(), hess, grad, prior.sensitivity)


def horizontal_excitation(knots: Sequence, smoothing: int = 10) -> float:
    """RMS (m/s²) about its mean of the measured specific force's x, y components (IMU axes, ``knot.imu.acc``) over
    the knots, after ``smoothing``-knot moving averages (20 ms on the 2 ms grid: the accelerometer's white noise
    mostly removed, a body's motion kept); 0 for fewer knots than ``smoothing``."""
    acc = np.array([k.imu.acc[:2] for k in knots], dtype=float)
    if len(acc) < smoothing:
        return 0.0
    csum = np.cumsum(np.vstack([np.zeros(2), acc]), axis=0)
    mean = (csum[smoothing:] - csum[:-smoothing]) / smoothing
    dev = mean - mean.mean(axis=0)
    return float(np.sqrt(np.mean(np.sum(dev * dev, axis=1))))


def swing_fraction(knots: Sequence) -> float:
    """Fraction of the knots with at least one foot out of contact (``knot.contacts``)."""
    return float(np.mean([not all(k.contacts) for k in knots])) if len(knots) else 0.0


def swing_speed(knots: Sequence, leg_joints: Sequence[Sequence[int]]) -> float:
    """RMS (rad/s) of the measured velocities of the joints of the legs flagged out of contact, over the knots
    (``leg_joints[i]``: joint indices, model order, of foot i's leg); 0 without any swing flag."""
    dq = [k.joint.dq[leg_joints[i]] for k in knots for i, c in enumerate(k.contacts) if not c]
    return float(np.sqrt(np.mean(np.square(dq)))) if dq else 0.0


def leg_joint_indices(robot) -> list[list[int]]:
    """Per foot (``robot.foot_frame_ids`` order) the actuated joints (model joint order) that carry it."""
    out = []
    for fid in robot.foot_frame_ids:
        joint, cols = robot.model.frames[fid].parentJoint, []
        while joint > 0:
            idx = robot.model.joints[joint].idx_v - robot.nu_base
            if idx >= 0 and robot.model.joints[joint].nv == 1:
                cols.append(idx)
            joint = robot.model.parents[joint]
        out.append(sorted(cols))
    return out


class LegMassGate:
    """Freezes the leg mass scale (theta index ``index``, log k) on windows with too few swing knots.

    With every foot on the ground the legs' weight reaches the trunk's wrench through the (unmeasured) contact forces
    almost like trunk mass does, so k and the trunk's mass trade off and any other torque or force residual moves
    them (docs/realism.md, run 3); a swinging leg's joint torques see its own inertia and weight directly. Below
    ``min_swing`` (fraction of knots with a foot in the air, :func:`swing_fraction`), or when the legs flagged in the
    air move slower than ``min_swing_speed`` (:func:`swing_speed`, rad/s: a stance foot the detector wrongly flags
    during a sway moves with the body, a real swing leg faster), the solve anchors log k at its current value like
    :class:`ActuatorGuard`'s gate (solve only, never information). Counts ``frozen`` / ``solves``.
    """

    def __init__(self, index: int, min_swing: float, min_swing_speed: float, leg_joints: Sequence[Sequence[int]]):
        self.index = np.array([index], dtype=int)
        self.min_swing = float(min_swing)
        self.min_swing_speed = float(min_swing_speed)
        self.leg_joints = [list(j) for j in leg_joints]
        self.frozen = 0
        self.solves = 0

    def solve(self, solver, knots: Sequence, run):
        """``run()`` (the tick's solve on ``solver``) with log k anchored when ``knots`` have too little swing."""
        self.solves += 1
        swing = swing_fraction(knots) >= self.min_swing
        if swing and (self.min_swing_speed <= 0.0 or swing_speed(knots, self.leg_joints) >= self.min_swing_speed):
            return run()
        self.frozen += 1
        return frozen_run(solver, self.index, run)


class VerticalMomentGate:
    """Freezes the estimated body's vertical first moment h_z (theta index ``index``: a coordinate of the 'exp-eigval'
    and 'plain' parametrizations) on windows whose horizontal specific force hardly varies
    (:func:`horizontal_excitation` below ``min_excitation`` m/s²: standing still).

    h_z enters the dynamics through the moment h × f of the specific force f = R^T (a - g): only a varying horizontal
    f (horizontal accelerations, tilting) separates it from the horizontal first moment; a constant one does not. On a
    stand nothing but noise informs it, and the reported torques' white noise drags it to the body that makes that
    noise matter least, one with a large inertia about the trunk origin (the realism suite's 3 kg stand: the payload's
    CoM 0.46 m below the truth, docs/realism.md session 14). Like :class:`ActuatorGuard`'s gate the anchor acts on
    the solve only, never as information. Counts ``frozen`` / ``solves``; ``last_excitation`` m/s².
    """

    def __init__(self, index: int, min_excitation: float):
        self.index = np.array([index], dtype=int)
        self.min_excitation = float(min_excitation)
        self.frozen = 0
        self.solves = 0
        self.last_excitation = float("nan")

    def solve(self, solver, knots: Sequence, run):
        """``run()`` (the tick's solve on ``solver``) with h_z anchored when ``knots`` are not excited."""
        self.solves += 1
        self.last_excitation = horizontal_excitation(knots)
        if self.last_excitation >= self.min_excitation:
            return run()
        self.frozen += 1
        return frozen_run(solver, self.index, run)


def frozen_run(solver, indices: np.ndarray, run):
    """``run()`` (a solve on ``solver``) with θ[indices] anchored at the solver's current values: for that solve only,
    never information (see the module docstring's gate)."""
    problem = solver.problem
    original = problem.prior
    problem.prior = anchored(original, indices, solver.theta, FREEZE_INFORMATION)
    try:
        return run()
    finally:
        problem.prior = original


class ActuatorGuard:
    """Runs a solve with the gate and bounds of the module docstring.

    ``indices``: positions of log p in theta; ``upper``: (n,) upper bounds of p (same order);
    ``min_excitation``: rad/s (0 disables the gate). Counts ``frozen`` / ``solves`` / ``clipped``.
    """

    def __init__(self, indices: np.ndarray, upper: np.ndarray, min_excitation: float):
        self.indices = np.asarray(indices, dtype=int)
        self.log_upper = np.log(np.asarray(upper, dtype=float))
        self.min_excitation = float(min_excitation)
        self.frozen = 0
        self.solves = 0
        self.clipped = 0
        self.last_excitation = float("nan")
        self.last_frozen = False

    def solve(self, solver, knots: Sequence, iterations: int):
        """``solver.solve(max_iter=iterations)`` with the actuator parameters frozen when ``knots`` are not excited,
        then bounded; returns the (possibly clipped) result."""
        self.solves += 1
        self.last_excitation = joint_excitation(knots)
        self.last_frozen = self.last_excitation < self.min_excitation
        if self.last_frozen:
            self.frozen += 1
            result = frozen_run(solver, self.indices, lambda: solver.solve(max_iter=iterations))
        else:
            result = solver.solve(max_iter=iterations)
        return self.bound(solver, result)

    def bound(self, solver, result):
        """The result with log p clipped to its upper bounds (the solver's warm start clipped as well)."""
        theta_a = result.theta[self.indices]
        if np.all(theta_a <= self.log_upper) or not np.all(np.isfinite(result.theta)):
            return result
        self.clipped += 1
        theta = result.theta.copy()
        theta[self.indices] = np.minimum(theta_a, self.log_upper)
        solver.set_guess(result.xs, result.ws, theta)
        result.theta = theta
        result.pi = solver.problem.param.pi(theta)
        return result
