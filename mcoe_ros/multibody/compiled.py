"""Compiled hot path (C++ extension ``mcoe_ros._mcoe``) behind the Python reference's interfaces.

The Python classes (:class:`~mcoe_ros.multibody.interval.MultibodyIntervalModel`,
:class:`~mcoe_ros.ocp.problem.EstimationProblem`, :class:`~mcoe_ros.ocp.solver.MCOESolver`) are the readable
reference; this module mirrors them in C++ for the estimator's case (multibody state, process noise on the
velocities, multiple-shooting rollout) and is tested against them on the same problems (test/test_compiled.py).

- :func:`compiled_interval_model` (cached per Python model by :class:`CompiledModels`): a C++ interval model built
  from the same inputs as a :class:`MultibodyIntervalModel` (phase, measurements, actuator model, IMU biases).
- :func:`compiled_parametrization`: the C++ theta -> pi map of a :class:`StackedParametrization`.
- :class:`CompiledSolver`: the solver with the API the estimator uses from :class:`MCOESolver` (set_guess,
  solve -> :class:`SolverResult`, shift, marginal_prior, problem.prior, xs/ws/theta) plus
  :meth:`CompiledSolver.terminal_covariance` and a thread-safe :meth:`CompiledSolver.request_stop`. The solve
  releases the GIL. Built from a Python :class:`EstimationProblem` (which is only read: models, prior, inputs).

:func:`unsupported` names what the compiled path does not cover (the Baumgarte position gain, LOCAL_WORLD_ALIGNED
contact frames, restitution, other measurement kinds, full process noise, non-multiple rollouts, the leg mass scale);
callers fall back to the Python reference then.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.inertia import ExpEigenvalue, LogCholesky, OffsetParametrization, PlainPi
from mcoe_ros.multibody.interval import MultibodyIntervalModel
from mcoe_ros.multibody.measurements import (
    BaseHeight,
    ContactVelocity,
    ImuAngularVelocity,
    ImuOrientation,
    ImuSpecificForce,
    JointPosition,
    JointVelocity,
)
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.multibody.soft_dynamics import SoftPhaseDynamicsModel
from mcoe_ros.ocp.problem import ArrivalPrior, EstimationProblem, EuclideanParameters, PositiveParameters
from mcoe_ros.ocp.solver import IterationLog, SolverOptions, SolverResult

try:  # the extension is optional: built by setup.py / .ci/setup-env
    from mcoe_ros import _mcoe
except ImportError as _err:  # pragma: no cover - depends on the build
    _mcoe = None
    IMPORT_ERROR: str | None = str(_err)
else:
    IMPORT_ERROR = None


def available() -> bool:
    """True if the compiled extension is importable."""
    return _mcoe is not None


def knot_threads(requested: int = 0, offline: bool = False) -> int:
    """Threads of the compiled solver's knot loops: ``requested`` if > 0, else (auto) 2 on a machine with at least 4
    usable cores (the solve's second core without taking the sensor thread's or the neighbours'), else 1: on the
    2-core test machine under load a second thread made the tick 1.2-1.4x slower, with a free core 0.6-0.8x
    (docs/performance.md, run 9). ``offline`` (a bag replayed as fast as it goes: no sensor callbacks wait for a
    core): 2 from 2 usable cores. The results do not depend on it."""
    if requested > 0:
        return int(requested)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return 2 if cores >= (2 if offline else 4) else 1


def _require() -> None:
    if _mcoe is None:
        raise ImportError(f"the compiled extension mcoe_ros._mcoe is not built ({IMPORT_ERROR})")


#: measurement classes -> C++ kind names (order of the checks: subclasses first)
_KINDS = (
    (ContactVelocity, "contact_velocity"),
    (BaseHeight, "base_height"),
    (ImuAngularVelocity, "gyro"),
    (ImuSpecificForce, "specific_force"),
    (ImuOrientation, "orientation"),
    (JointPosition, "joint_position"),
    (JointVelocity, "joint_velocity"),
)


def _kind(meas) -> str | None:
    for cls, name in _KINDS:
        if type(meas) is cls:
            return name
    return None


def unsupported(model: MultibodyIntervalModel) -> str | None:
    """Why ``model`` has no compiled counterpart (None if it has one)."""
    dyn = model.dynamics
    if isinstance(dyn, SoftPhaseDynamicsModel):
        return "soft-contact dynamics (Python reference only)"
    if dyn.layout.leg_mass:
        return "leg mass scale (payload.leg_mass, Python reference only)"
    if dyn.kp != 0.0:
        return "Baumgarte position gain"
    if dyn.reference_frame != pin.ReferenceFrame.LOCAL:
        return "contact frame other than LOCAL"
    if dyn.restitution != 0.0:
        return "impulse restitution"
    if dyn.robot.model.joints[1].nv != 6:
        return "fixed-base robot"
    for meas in model.measurements:
        if _kind(meas) is None:
            return f"measurement {type(meas).__name__}"
    return None


class CompiledModels:
    """C++ interval models per Python interval model (by identity, the Python models are cached per phase) of one
    robot; the robot's nominal pin.Model is passed once as its exact text archive."""

    def __init__(self, robot: RobotModel):
        _require()
        self.robot = robot
        self.cpp_robot = _mcoe.Robot(robot.model.saveToString())
        self._models: dict[int, tuple[MultibodyIntervalModel, object]] = {}

    def __call__(self, model: MultibodyIntervalModel):
        entry = self._models.get(id(model))
        if entry is None or entry[0] is not model:
            entry = (model, self._build(model))
            self._models[id(model)] = entry
        return entry[1]

    def _build(self, model: MultibodyIntervalModel):
        reason = unsupported(model)
        if reason:
            raise ValueError(f"no compiled interval model: {reason}")
        robot, dyn = self.robot, model.dynamics
        fid = dict(zip(robot.foot_names, robot.foot_frame_ids, strict=True))
        layout = dyn.layout
        act = dyn.actuator
        groups = act.groups if act is not None else np.zeros((0, 0))
        eps = act.eps if act is not None else 1.0
        cpp = _mcoe.IntervalModel(
            self.cpp_robot,
            [fid[f] for f in dyn.contacts],
            [fid[f] for f in dyn.impulse],
            dyn.dt,
            dyn.mu,
            dyn.accuracy,
            dyn.max_iter,
            dyn.payload_joint,
            dyn.payload_to_joint,
            dyn.nominal_pi,
            groups,
            eps,
            layout.gyro_bias,
            layout.acc_bias,
            [fid[f] for f in dyn.damped] if dyn.kd != 0.0 else [],
            dyn.kd,
            list(robot.foot_frame_ids) if dyn.rolling_feet else [],  # u's contact points, foot order
            dyn.rolling_contacts,
        )
        for meas in model.measurements:
            bias = getattr(meas, "bias", None)
            cpp.add_measurement(
                _kind(meas),
                int(getattr(meas, "frame_id", -1)),
                np.asarray(meas.W, dtype=float),
                -1 if bias is None else int(bias.start),
                getattr(meas, "quat_order", "wxyz") == "wxyz",
                bool(getattr(meas, "realised", False)),
                _point_index(meas),
            )
        if cpp.npi != model.npi or cpp.nz != model.nz or cpp.nr != model.nr or cpp.nu != model.nu:
            raise ValueError("compiled interval model disagrees with the Python model on pi / z / r / u sizes")
        return cpp


def _point_index(meas) -> int:
    """A contact velocity's rolling-foot point (its foot's index among u's points), -1 for the frame origin."""
    k = getattr(meas, "point_index", None)
    return -1 if k is None else int(k)


def compiled_interval_model(model: MultibodyIntervalModel, models: CompiledModels | None = None):
    """The C++ interval model of a Python one (a new :class:`CompiledModels` cache if none is given)."""
    return (models or CompiledModels(model.robot))(model)


def compiled_parametrization(param) -> object:
    """C++ theta -> pi map of a StackedParametrization (body manifolds with optional offset, Euclidean, positive)."""
    _require()
    out = _mcoe.Parametrization()
    for part in param.parts:
        offset = np.zeros(0)
        inner = part
        if isinstance(part, OffsetParametrization):
            inner, offset = part.inner, part.offset
        if isinstance(inner, ExpEigenvalue):
            out.add("exp-eigval", 10, offset)
        elif isinstance(inner, LogCholesky):
            out.add("log-cholesky", 10, offset)
        elif isinstance(inner, PlainPi):
            out.add("plain", 10, offset)
        elif isinstance(part, EuclideanParameters):
            out.add("euclidean", part.size, offset)
        elif isinstance(part, PositiveParameters):
            out.add("positive", part.size, offset)
        else:
            raise ValueError(f"no compiled parametrization for {type(part).__name__}")
    return out


class CompiledKnot:
    """Read-only view of knot k of a compiled problem: ``W`` (nw, nw) process-noise information (copy) and ``data``
    (the C++ interval data at the last linearisation: xnext, r, Fx, Fp, Rx, Rp, u, z)."""

    def __init__(self, solver, k: int):
        self._solver, self.k = solver, k

    @property
    def W(self) -> np.ndarray:  # noqa: N802 - the paper's symbol
        return np.array(self._solver.knot_W(self.k))

    @property
    def data(self):
        return self._solver.knot_data(self.k)

    @property
    def terminal(self) -> bool:
        return self.k == self._solver.N


class CompiledProblem:
    """The problem side of a :class:`CompiledSolver` (sizes, state manifold, parametrization, arrival prior, knot
    views)."""

    def __init__(self, solver, state, param):
        self._solver = solver
        self.state = state
        self.param = param
        self.ndx, self.nw, self.ntheta = solver.ndx, solver.nw, solver.ntheta

    @property
    def N(self) -> int:  # noqa: N802 - the paper's horizon length
        return self._solver.N

    @property
    def knots(self) -> list[CompiledKnot]:
        return [CompiledKnot(self._solver, k) for k in range(self._solver.N + 1)]

    @property
    def prior(self) -> ArrivalPrior:
        return _arrival_prior(self._solver.prior)

    @prior.setter
    def prior(self, prior: ArrivalPrior) -> None:
        self._solver.prior = (
            np.asarray(prior.x_bar, dtype=float),
            np.asarray(prior.theta_bar, dtype=float),
            np.asarray(prior.hessian, dtype=float),
            np.asarray(prior.gradient, dtype=float),
            None if prior.sensitivity is None else np.asarray(prior.sensitivity, dtype=float),
        )


def _arrival_prior(parts) -> ArrivalPrior:
    """ArrivalPrior from the C++ (x_bar, theta_bar, H, g, G) (G empty: no consider sensitivity)."""
    x_bar, theta_bar, hess, grad, sens = parts
    sens = np.array(sens) if np.size(sens) else None
    return ArrivalPrior(np.array(x_bar), np.array(theta_bar), np.array(hess), np.array(grad), sens)


def unsupported_problem(problem: EstimationProblem, options: SolverOptions) -> str | None:
    """Why a problem / options pair cannot use the compiled solver (None if it can)."""
    nv = problem.ndx // 2
    velocity_noise = not problem.full_noise and np.array_equal(problem.noise_dims, np.arange(nv, 2 * nv))
    robust = getattr(problem, "robust", None)
    return unsupported_models([k.model for k in problem.knots], options, velocity_noise, robust)


def unsupported_models(models: Sequence, options: SolverOptions, velocity_noise: bool, robust=None) -> str | None:
    """Why interval models (running and terminal) / options / a noise model (on the velocities or not) / a robust
    cost (:class:`mcoe_ros.ocp.robust.RobustCost` or None) cannot use the compiled solver (None if they can)."""
    if robust is not None:
        return "robust losses (Python reference only)"
    if options.rollout != "multiple":
        return f"rollout {options.rollout!r}"
    if not velocity_noise:
        return "process noise not on the velocities"
    seen = set()
    for model in models:
        if id(model) in seen:  # the models are shared per contact phase
            continue
        seen.add(id(model))
        if not isinstance(model, MultibodyIntervalModel):
            return "non-multibody interval model"
        reason = unsupported(model)
        if reason:
            return reason
    return None


class CompiledSolver:
    """C++ multiple-shooting OE solver with :class:`~mcoe_ros.ocp.solver.MCOESolver`'s estimator-facing API.

    ``problem``: a Python :class:`EstimationProblem` (read once: knot models, inputs u/z, prior, the diagonal of every
    interval's constant noise information ``W_base``); ``torque_noise``: torque_std (nj,) N m of a state-dependent
    velocity noise on top of each interval's constant one (covariance dt² (da/dτ) diag(torque_std²) (da/dτ)ᵀ +
    diag(w0)⁻¹, see :meth:`PhaseDynamicsModel.velocity_noise_covariance`), None for a constant W;
    ``parametric_noise``: with ``torque_noise``, that covariance's derivative in θ enters the linearisation (the
    noise cost's θ terms, :mod:`mcoe_ros.ocp.problem` "Parametric noise"; the Python problem's ``noise_derivative``);
    ``models``: a shared :class:`CompiledModels` cache; ``threads``: OpenMP threads over the knots (0: auto,
    :func:`knot_threads`); ``spare_knots``: knots a shift drops and no new knot takes, kept for the new knots of
    later shifts (a gait returns to its contact phases; -1: one window, N + 1; 0: none; each costs two interval
    data).
    """

    def __init__(
        self,
        problem: EstimationProblem,
        options: SolverOptions | None = None,
        torque_noise: np.ndarray | None = None,
        models: CompiledModels | None = None,
        threads: int = 1,
        spare_knots: int = 0,
        parametric_noise: bool = False,
    ):
        options = options or SolverOptions()
        reason = unsupported_problem(problem, options)
        if reason:
            raise ValueError(f"the compiled solver does not support this problem: {reason}")
        noise_info = np.array([np.diag(k.W_base) for k in problem.knots[:-1]]).reshape(problem.N, problem.nw)
        inputs = [(k.data.u, k.data.z) for k in problem.knots]
        models_ = [k.model for k in problem.knots]
        parts = (models_[:-1], models_[-1], inputs, problem.prior, problem.param, noise_info)
        self._build(*parts, options, torque_noise, models, threads, spare_knots, parametric_noise)

    @classmethod
    def from_models(
        cls,
        running: Sequence[MultibodyIntervalModel],
        terminal: MultibodyIntervalModel,
        inputs: Sequence[tuple[np.ndarray, np.ndarray]],
        prior: ArrivalPrior,
        param,
        noise_info: np.ndarray,
        options: SolverOptions | None = None,
        torque_noise: np.ndarray | None = None,
        models: CompiledModels | None = None,
        threads: int = 1,
        spare_knots: int = 0,
        parametric_noise: bool = False,
    ) -> CompiledSolver:
        """The solver of the problem ``EstimationProblem(running, terminal, prior, param, noise_info, velocities)``
        with knot inputs ``inputs`` (N+1 (u, z)), without building that Python problem (its per-knot data are what
        a cold start spends most of its Python time on, and the compiled solver does not use them). ``noise_info``:
        diagonal information of the velocity noise, (nv,) for every interval or (N, nv) per interval."""
        options = options or SolverOptions()
        reason = unsupported_models([*running, terminal], options, velocity_noise=True)
        if reason:
            raise ValueError(f"the compiled solver does not support this problem: {reason}")
        self = cls.__new__(cls)
        noise_info = noise_rows(noise_info, len(running), terminal.state.nv)
        parts = (running, terminal, inputs, prior, param, noise_info)
        self._build(*parts, options, torque_noise, models, threads, spare_knots, parametric_noise)
        return self

    def _build(
        self,
        running,
        terminal,
        inputs,
        prior,
        param,
        noise_info,
        options,
        torque_noise,
        models,
        threads,
        spare_knots,
        parametric_noise=False,
    ) -> None:
        _require()
        self.options = options
        self.param = param
        self.models = models or CompiledModels(terminal.robot)
        self._cpp = _mcoe.Solver(
            compiled_parametrization(self.param),
            arrival=options.arrival,
            rank_tol=options.rank_tol,
            max_iter=options.max_iter,
            max_time=-1.0 if options.max_time is None else float(options.max_time),
            tol_stop=options.tol_stop,
            tol_gap=options.tol_gap,
            refresh_noise=options.refresh_noise,
            threads=knot_threads(int(threads)),
            final_direction=options.final_direction,
        )
        self._cpp.spare_knots = int(spare_knots)
        self._cpp.consider = bool(options.consider)
        self._cpp.set_problem(
            [self.models(m) for m in running],
            self.models(terminal),
            prior.x_bar,
            prior.theta_bar,
            prior.hessian,
            prior.gradient,
            noise_info,
        )
        if prior.sensitivity is not None:
            self._cpp.prior = (prior.x_bar, prior.theta_bar, prior.hessian, prior.gradient, prior.sensitivity)
        for k, (u, z) in enumerate(inputs):
            self._cpp.set_knot(k, _vec(u), _vec(z))
        #: d(x_N, theta)/db of the last :meth:`terminal_covariance` (consider analysis), None when zero
        self.consider_sensitivity: np.ndarray | None = None
        if torque_noise is not None:
            self._cpp.set_torque_noise(np.asarray(torque_noise, dtype=float), bool(parametric_noise))
        elif parametric_noise:
            raise ValueError("parametric noise needs a torque noise")
        self.problem = CompiledProblem(self._cpp, terminal.state, self.param)

    # ------------------------------------------------------------------ estimate
    @property
    def xs(self) -> list[np.ndarray]:
        return list(self._cpp.xs)

    @property
    def ws(self) -> list[np.ndarray]:
        return list(self._cpp.ws)

    @property
    def theta(self) -> np.ndarray:
        return np.array(self._cpp.theta)

    @property
    def dx(self) -> np.ndarray:
        return np.array(self._cpp.dx)

    @property
    def dw(self) -> np.ndarray:
        return np.array(self._cpp.dw)

    @property
    def dtheta(self) -> np.ndarray:
        return np.array(self._cpp.dtheta)

    def set_guess(self, xs: Sequence[np.ndarray], ws: Sequence[np.ndarray] | None, theta: np.ndarray) -> None:
        """Initial guess: xs (N+1, nx), ws (N, nw) or None (zeros), theta (ntheta,); sizes are checked here (the C++
        side trusts them)."""
        n, nx = self._cpp.N, self.problem.state.nx
        xs = [np.asarray(x, dtype=float) for x in xs]
        ws = [] if ws is None else [np.asarray(w, dtype=float) for w in ws]
        theta = np.asarray(theta, dtype=float)
        if len(xs) != n + 1 or any(x.shape != (nx,) for x in xs):
            raise ValueError(f"need N+1 = {n + 1} states of size {nx}")
        if ws and (len(ws) != n or any(w.shape != (self.nw,) for w in ws)):
            raise ValueError(f"need N = {n} noises of size {self.nw}")
        if theta.shape != (self.problem.ntheta,):
            raise ValueError(f"theta must have {self.problem.ntheta} entries")
        self._cpp.set_guess(xs, ws, theta)

    # ------------------------------------------------------------------ solve
    def request_stop(self) -> None:
        """Thread-safe: the running (or next) solve returns before its next line search with status 'stopped'."""
        self._cpp.request_stop()

    def clear_stop(self) -> None:
        self._cpp.clear_stop()

    def solve(
        self,
        xs: Sequence[np.ndarray] | None = None,
        ws: Sequence[np.ndarray] | None = None,
        theta: np.ndarray | None = None,
        max_iter: int | None = None,
    ) -> SolverResult:
        """Solve from (xs, ws, theta) or the stored estimate (warm start); see :meth:`MCOESolver.solve`."""
        if xs is not None:
            self.set_guess(xs, ws, self.theta if theta is None else theta)
        else:
            if ws is not None or theta is not None:
                self.set_guess(self.xs, self.ws if ws is None else ws, self.theta if theta is None else theta)
        if len(self._cpp.xs) != self._cpp.N + 1:
            raise ValueError("no initial guess: pass xs")
        out = self._cpp.solve(self.options.max_iter if max_iter is None else int(max_iter))
        theta = self.theta
        hess = out["arrival_hessian"]
        return SolverResult(
            converged=out["converged"],
            iterations=out["iterations"],
            cost=out["cost"],
            gap=out["gap"],
            xs=self.xs,
            ws=self.ws,
            theta=theta,
            pi=np.array(self._cpp.pi),
            arrival_hessian=np.array(hess) if hess.size else None,
            status=out["status"],
            log=[IterationLog(*entry) for entry in out["log"]],
        )

    # ------------------------------------------------------------------ receding horizon and covariances
    def shift(
        self,
        k: int,
        running: Sequence[MultibodyIntervalModel],
        terminal: MultibodyIntervalModel,
        inputs: Sequence[tuple[np.ndarray | None, np.ndarray | None]],
        terminal_input: tuple[np.ndarray | None, np.ndarray | None],
        noise_info: np.ndarray | None = None,
    ) -> None:
        """Receding horizon as :meth:`MCOESolver.shift` (marginalised prior, rollout of the new states).
        ``noise_info``: diagonal velocity-noise information of the new intervals, (nv,) for all or (k, nv); None: the
        last kept interval's constant information."""
        if noise_info is None:
            noise_info = self._cpp.knot_noise_info(self._cpp.N - 1)
        info = noise_rows(noise_info, k, self.nw)
        self._cpp.shift(
            k,
            [self.models(m) for m in running],
            self.models(terminal),
            [_vec(u) for u, _ in inputs],
            [_vec(z) for _, z in inputs],
            _vec(terminal_input[0]),
            _vec(terminal_input[1]),
            info,
        )

    @property
    def nw(self) -> int:
        return self._cpp.nw

    @property
    def timings(self) -> dict[str, float]:
        """Wall time (s) per C++ phase since the last :meth:`reset_timings`: linearize (first linearisation of a
        solve), direction, line_search, relinearize (after accepted steps), shift, covariance; and knots_allocated
        (knots whose interval data were allocated: problem set-up only, a shift recycles the dropped knots')."""
        return dict(self._cpp.timings)

    def reset_timings(self) -> None:
        self._cpp.timings = None

    def marginal_prior(self, k: int, relinearize: bool = True) -> ArrivalPrior:
        """Prior on (x_k, theta) from marginalising knots 0..k-1 (see :meth:`MCOESolver.marginal_prior`)."""
        return _arrival_prior(self._cpp.marginal_prior(k, relinearize))

    def terminal_covariance(self) -> np.ndarray:
        """Covariance ((ndx + ntheta)^2) over (dx_N, dtheta): the GN marginal of the whole window at the last
        linearisation (the estimator's newest-state and payload covariance): the Cholesky inverse when well conditioned
        (reciprocal condition estimate > 1e-9), else the pseudo-inverse with rcond 1e-12. Also sets
        :attr:`consider_sensitivity` (see :meth:`MCOESolver.terminal_covariance`)."""
        cov = np.array(self._cpp.terminal_covariance())
        sens = np.array(self._cpp.consider_sensitivity)
        self.consider_sensitivity = sens if np.any(sens) else None
        return cov


def noise_rows(noise_info, n: int, nw: int) -> np.ndarray:
    """(n, nw) per-interval diagonal noise information from one (nw,) row for every interval or (n, nw) rows."""
    info = np.asarray(noise_info, dtype=float)
    if info.ndim == 1:
        info = np.broadcast_to(info, (n, info.size))
    if info.shape != (n, nw):
        raise ValueError(f"noise information must be ({nw},) or ({n}, {nw}), got {info.shape}")
    return np.array(info, dtype=float)


def _vec(a) -> np.ndarray:
    return np.zeros(0) if a is None else np.asarray(a, dtype=float)
