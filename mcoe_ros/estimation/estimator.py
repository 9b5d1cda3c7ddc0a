"""Receding-horizon estimator: samples -> sliding window -> estimation problem -> solver -> :class:`Estimate`.

The one core code path used by the ROS node and by the bag replay (no ROS import).

Per tick (every ``grid.tick_period`` of *sensor* time once the window is full, so replays are deterministic):
the window's grid knots become interval models (:mod:`mcoe_ros.estimation.builder`: contact phase from the
dynamics-based contact detector; a foot that lands starts a reset interval with an impulse), the problem is shifted
by the number of new knots with the dropped knots marginalised into the arrival prior over (x_0, theta) — so
information on the payload accumulates over time, not only within the window — the new knots are initialised by a
nonlinear rollout, and the solver runs a fixed iteration budget (optionally a wall-time budget).
A solve that fails (non-finite, cost blow-up, non-physical payload) is discarded: the last good estimate is
held and reported as such, and the next tick restarts the window with the last good payload as prior and the cold
iteration budget (after a finite but implausible solve, a cost outlier or payload step, on its solver shifted by the
whole window: its knot data recycled instead of allocated), its base guessed from the last good solve's trajectory
where that covers the window and from the odometry after it.

Covariances: the Gauss-Newton marginal of the whole window onto (x_N, theta) (forward information
recursion of :meth:`MCOESolver.marginal_prior` plus the newest knot's measurements, at the solve's last
linearisation point) gives the pose/twist covariance of the newest state and the payload covariance. The
pose block is rotated to odom axes and its x, y part taken relative to the odometry origin (the arrival anchor that
fixes the unobservable horizontal translation removed). They are then scaled (``robust.covariance_scaling``); with
the IMU biases not estimated (``imu_bias.consider``), the biases' prior uncertainty is added by consider analysis (the
solver's sensitivity of the estimate to constant biases, carried through the marginalised past); the touch-downs'
horizontal drift since the origin and the stance feet's rolling are added to x, y (``noise.odometry_slip_time``,
``robot.foot_radius``, :mod:`mcoe_ros.estimation.drift`), and with the base height at every knot one such row's
variance to z (``noise.stance_foot_height``², :attr:`Estimator.ground_variance`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import pinocchio as pin

from mcoe_ros.estimation.accelerometer_bias import VerticalAccelerometerBias
from mcoe_ros.estimation.builder import EstimationParameters, ProblemBuilder
from mcoe_ros.estimation.calibration import ConsistencyScale
from mcoe_ros.estimation.config import EstimatorConfig, ImuBiasConfig
from mcoe_ros.estimation.diagnostics import OK, WARN, Diagnostics
from mcoe_ros.estimation.drift import TouchdownDrift, relative_to_origin
from mcoe_ros.estimation.estimate import Estimate
from mcoe_ros.estimation.excitation import ActuatorGuard, LegMassGate, VerticalMomentGate, leg_joint_indices
from mcoe_ros.estimation.gyro_bias import GyroBiasTracker, StanceYaw
from mcoe_ros.estimation.leg_odometry import LegKinematicsEkf
from mcoe_ros.estimation.propagation import Odometry, Propagator, Rebase
from mcoe_ros.estimation.samples import (
    InvalidSample,
    PlausibilityLimits,
    SampleStats,
    turned_about_vertical,
    validate_imu,
    validate_joint,
)
from mcoe_ros.estimation.window import GridKnot, SlidingWindow
from mcoe_ros.multibody import compiled
from mcoe_ros.multibody.contact import ContactDetector
from mcoe_ros.multibody.inertia import is_physically_consistent
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.ocp.solver import MCOESolver, SolverOptions
from mcoe_ros.payload.online import OnlinePayloadRls

MAX_PAYLOAD_MASS = 200.0  #: kg; a solve claiming more is treated as diverged
#: a late tick (more than a window after the previous solve: no knot in common) re-uses the solver: it is shifted by a
#: whole window (the knots' data recycled where the contact phase matches, no allocation), the arrival prior and the
#: states are a warm rebuild's (odometry, payload belief), and it runs the warm budget (solver.max_iterations), so the
#: next tick is not late again (docs/tworate.md, session 5)
#: solve sanity (against the recent good solves): a cost above COST_OUTLIER times their median, with the window's
#: reduced chi-square above CHI2_OUTLIER (whitened residuals of RMS 10 sigma: a diverged solve), is an outlier. The
#: chi-square floor replaced an absolute cost floor (1e4), which held the first solve of the sample bag's trot (cost
#: 1.0e4, reduced chi-square 5.3, within the trot's range 0.3-13, but 100x the standing phase's median); the payload
#: mass may move by at most max(MASS_STEP_MIN, MASS_STEP_SIGMAS sigma_m) per tick, sigma_m the previous estimate's
#: mass std, doubled for every consecutive held tick (so a real payload change is followed within a few ticks while
#: a single absurd solve is held, not published).
COST_OUTLIER = 100.0
CHI2_OUTLIER = 100.0
MASS_STEP_MIN = 1.0  #: kg
MASS_STEP_SIGMAS = 4.0


#: s: the published estimate's tilt follows an error of the gyro's bias with a lag of ~1.5 s (the window's
#: orientation weight against the gyro's; docs/realism.md session 26), so the consider analysis takes the
#: attitude tracker's std low-passed over this time, not its newest value (which the estimate has not caught up with)
TRACKED_BIAS_MEMORY = 2.0


@dataclass
class TickInput:
    """What one solve needs from the window: its grid knots (oldest first) and bookkeeping."""

    knots: list[GridKnot]  #: N+1 knots
    n_created: int  #: window.n_created at the snapshot
    restarted: bool  #: the grid restarted since the previous tick


@dataclass
class Counters:
    """Cumulative tick counters (read by summaries and diagnostics)."""

    ticks: int = 0
    held: int = 0
    skipped: int = 0  #: due ticks never solved because a newer window was solved instead
    rebuilt: int = 0  #: problems built anew after the first (held ticks, restarts, payload resets)
    late: int = 0  #: late ticks (more than a window after the previous solve): the solver shifted by a whole window
    deadline_misses: int = 0  #: solves stopped by solver.time_budget
    warmup: int = (
        0  #: ticks of a cold start that iterated without publishing (see SolverConfig.cold_iterations_per_tick)
    )
    iterations: list = None  #: iterations of every successful solve
    solve_times: list = None  #: wall time of every tick, s

    def __post_init__(self):
        self.iterations = [] if self.iterations is None else self.iterations
        self.solve_times = [] if self.solve_times is None else self.solve_times


class Estimator:
    """Sliding-window MCOE estimator of base state and payload inertia (see module docstring).

    Feed samples with :meth:`add_joints` / :meth:`add_imu` (times in seconds on one clock, joint arrays in model
    order), then call :meth:`poll` to run the ticks that are due (or :meth:`advance`, :meth:`due` and
    :meth:`solve` from two threads). ``detector`` replaces the dynamics-based contact detector (same interface as
    :class:`mcoe_ros.multibody.contact.ContactDetector`), e.g. for ablations with ground-truth contacts.
    """

    def __init__(self, config: EstimatorConfig | None = None, detector: ContactDetector | None = None):
        self.config = config = config or EstimatorConfig()
        self.robot = robot = RobotModel(config.robot)
        grid = config.grid
        self.dt = grid.dt
        self.n_intervals = grid.n_intervals
        self.tick_knots = grid.tick_knots
        self.payload_mode = config.payload.estimator
        self.stats = SampleStats()  #: validation counters (the window counts its buffers' own)
        model, nb = robot.model, robot.nu_base
        self.limits = PlausibilityLimits.from_model(
            model.lowerPositionLimit[robot.nq - robot.nj :],
            model.upperPositionLimit[robot.nq - robot.nj :],
            model.velocityLimit[nb:],
            model.effortLimit[nb:],
        )
        self.stop_event = threading.Event()  #: set by request_stop: a running solve ends at its next iteration
        self._recent_costs: deque[float] = deque(maxlen=20)  #: costs of the recent good solves
        self._held_in_row = 0
        #: the solver of a finite solve held by the sanity checks: the next tick shifts it by the whole window (its
        #: knot data recycled, as after a late tick) instead of allocating a new one; the problem, its guess and the
        #: cold iteration budget are a new problem's (the warm budget was tried: docs/performance.md run 10)
        self._recycle: MCOESolver | None = None
        self.last_position: np.ndarray | None = None  #: base position of the last good estimate (kept on reset)
        #: the last good solve's base trajectory (knot times (local), world positions, world velocities; kept on
        #: reset): the guess of a problem built anew over knots it covers (see :meth:`_base_guess`)
        self._solved_base: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._solved_quat: np.ndarray | None = None  #: (N+1, 4) x, y, z, w base orientations of that solve
        self.epoch: float | None = None  #: seconds subtracted from input times (float precision)
        detector = detector or ContactDetector(
            robot, config.contact, compiled=False if config.solver.backend == "python" else None
        )
        self.window = SlidingWindow(detector, self.dt, self.n_intervals + 1, grid.max_gap)
        self.parameters = EstimationParameters(robot, config)
        self.param = self.parameters.parametrization
        self.builder = ProblemBuilder(robot, config, self.parameters)
        pay = config.payload
        self.prior_theta = self.parameters.prior_theta
        #: excitation gate and bounds of the actuator parameters (None without the actuator model)
        self.actuator_guard = None
        if self.parameters.actuator is not None:
            act, n_groups = config.actuator, self.parameters.actuator.n_groups
            upper = np.repeat([act.max_viscous, act.max_coulomb, act.max_rotor_inertia], n_groups)
            indices = np.arange(self.parameters.layout.actuator.start, self.parameters.layout.actuator.stop)
            self.actuator_guard = ActuatorGuard(indices, upper, act.min_excitation)
        #: swing gate of the leg mass scale (None without it)
        legs = self.parameters.layout.leg
        self.leg_gate = None
        if legs is not None:
            lm = pay.leg_mass
            self.leg_gate = LegMassGate(legs.start, lm.min_swing, lm.min_swing_speed, leg_joint_indices(robot))
        #: standing-still gate of the estimated body's vertical first moment (None: payload.min_vertical_excitation 0)
        self.moment_gate = None
        if pay.min_vertical_excitation > 0.0:
            if pay.parametrization not in ("exp-eigval", "plain"):
                raise ValueError(
                    "payload.min_vertical_excitation: needs payload.parametrization 'exp-eigval' or 'plain' (h_z a"
                    f" coordinate), not {pay.parametrization!r}; 0 turns the gate off"
                )
            h_z = self.parameters.layout.payload.start + 3
            self.moment_gate = VerticalMomentGate(h_z, pay.min_vertical_excitation)
        self.prior_theta_info = self.parameters.prior_info
        sol = config.solver
        self.options = SolverOptions(
            rollout=sol.rollout,
            arrival=sol.arrival,
            max_iter=int(sol.max_iterations),
            max_time=sol.time_budget or None,
            tol_stop=1e-9,
            tol_gap=1e-8,
            final_direction=False,  # the convergence flag of a real-time iteration is not worth a backward pass
            consider=considers(config.imu_bias),
        )
        self.cold_iterations = int(sol.max_iterations_cold)
        self.cold_per_tick = int(sol.cold_iterations_per_tick) or None  #: None: the cold budget in one tick
        if sol.backend not in ("auto", "python", "compiled"):
            raise ValueError(f"solver.backend: unknown backend {sol.backend!r}")
        if sol.backend == "compiled" and not compiled.available():
            raise ValueError(f"solver.backend: the compiled extension is not built ({compiled.IMPORT_ERROR})")
        self._compiled_models: compiled.CompiledModels | None = None
        self.solver: MCOESolver | None = None
        self.last_good: Estimate | None = None
        #: payload belief (theta and its information) that seeds the next problem built from scratch
        self.theta = self.prior_theta.copy()
        self.theta_info = self.prior_theta_info.copy()
        if self.parameters.actuator is not None:
            # the contact detector explains the joint torques with the actuator model's prior until a solve identifies
            # it (before: the reported torque taken for the joint torque, so a lossy swing leg's friction read as
            # ground force, a third of a trot's knots wrong before the first solve: docs/localisation.md session 28)
            prior_pi = self.param.pi(self.prior_theta)
            self.window.detector.set_actuator(self.parameters.actuator, prior_pi[self.parameters.layout.actuator])
        #: ∂θ̂/∂b (ntheta, 6) of the payload belief to the unestimated IMU biases (consider analysis), carried into a
        #: problem built from scratch; None: none yet (the configured prior) or consider off
        self.theta_sensitivity: np.ndarray | None = None
        self.last_tick_n = -(10**12)
        self.last_time = 0.0
        self.rls = None
        if pay.uses_rls:
            self.rls = OnlinePayloadRls(
                robot,
                self.dt,
                window=pay.rls_window,
                alpha=pay.rls_alpha,
                mu=pay.rls_forgetting,
                offset=self.parameters.body_offset,
            )
        self.counters = Counters()
        bias = config.imu_bias
        #: (9,) variances of the consider parameters (:data:`mcoe_ros.multibody.interval.IMU_CONSIDER`): gyro and
        #: accelerometer biases (an estimated bias's columns of the sensitivity are zero) and the orientation
        #: reading's offset about the IMU's x, y (tilt; its yaw is the integrated gyro, no offset), None: off
        self._bias_variance = None
        if considers(bias):
            self._bias_variance = np.r_[
                np.full(3, bias.gyro_prior_std**2),
                np.full(3, bias.accelerometer_prior_std**2),
                np.full(2, bias.orientation_offset_std**2),
                0.0,
            ]
        noise = config.noise
        #: the gyro's bias learnt from the orientation reading (imu_bias.attitude_tracking), subtracted from every gyro
        #: sample; None: off (or the biases estimated in the window)
        self.gyro_tracker = None
        if bias.attitude_tracking and not bias.enabled:
            self.gyro_tracker = GyroBiasTracker(
                bias.gyro_prior_std,
                bias.gyro_random_walk,
                noise.gyro * np.sqrt(config.grid.dt),  # white noise per sample -> density, rad/sqrt(s)
                bias.attitude_tracking_error,
                bias.attitude_tracking_interval,
                max_gap=config.grid.max_gap,
            )
        self._tracked_std = np.full(3, bias.gyro_prior_std)  #: rad/s, see add_imu
        #: the vertical gyro bias from the settled stance feet (imu_bias.stance_yaw), fused into gyro_tracker; None: off
        self.stance_yaw = None
        if self.gyro_tracker is not None and bias.stance_yaw:
            self.stance_yaw = StanceYaw(
                robot,
                bias.stance_yaw_foot_speed,
                self.gyro_tracker.gyro_noise,
                bias.attitude_tracking_interval,
                config.grid.dt,
                config.dynamics.rolling_radius,
            )
        self._stance_yaw_t = -np.inf  #: s, the newest knot given to stance_yaw
        #: the accelerometer's z bias from the settled stance feet (imu_bias.vertical_accelerometer_tracking),
        #: subtracted from every specific-force sample; None: off (or the accelerometer bias estimated in the window)
        self.accel_tracker = None
        if bias.vertical_accelerometer_tracking and not (bias.enabled and bias.accelerometer):
            self.accel_tracker = VerticalAccelerometerBias(
                robot,
                bias.accelerometer_prior_std,
                bias.accelerometer_random_walk,
                noise.accelerometer,
                noise.foot_velocity,
                config.grid.max_gap,
            )
        self._accel_tracker_t = -np.inf  #: s, the newest knot given to accel_tracker
        self._tracked_acc_std = bias.accelerometer_prior_std  #: m/s², z, see add_imu
        #: horizontal drift of the touch-downs since the odometry origin (published x, y covariance), None: off
        self.drift = None
        if noise.odometry_slip_time > 0.0:
            self.drift = TouchdownDrift(robot, noise.odometry_slip_time, self.builder.held, config.grid.dt)
            # the stance-foot velocity measures the rolling point (dynamics.rolling_radius): the rolling left out is
            # that of the sphere's radius below it (0 at the full radius; docs/localisation.md session 23)
            self.drift.foot_radius = max(robot.spec.foot_radius - config.dynamics.rolling_radius, 0.0)
        #: m², added to the published base height's variance with the base height at every knot: the solve treats
        #: those rows as independent, but their errors (the flat-ground assumption, feet sinking into the ground)
        #: are common to the window's knots, so the published height is no better than one row
        #: (noise.stance_foot_height; docs/localisation.md, session 21)
        self.ground_variance = noise.stance_foot_height**2
        #: input-rate odometry: the newest solved state propagated through every newer sample
        self.propagator = Propagator(robot, noise.accelerometer, noise.gyro, noise.foot_velocity)
        self.last_status = "waiting for data"
        self._knots_at_last_solve = 0
        self._warmup_left = 0  #: iterations of a cold start still to run on the next ticks
        self._restarted = False
        self._generation = 0  #: incremented by reset_payload
        rob = config.robust
        #: covariance calibration by the payload estimates' consistency (robust.covariance_scaling 'consistency')
        self.consistency = ConsistencyScale(rob.consistency_lag, rob.covariance_scale_floor)

    # ------------------------------------------------------------------ inputs
    def _local(self, t: float) -> float:
        if self.epoch is None:
            self.epoch = float(np.floor(t))
        return t - self.epoch

    def add_joints(self, t: float, q, dq, tau, foot_force=None) -> bool:
        """Joint sample (model order). False if rejected (counted in stats)."""
        try:
            sample = validate_joint(self._local(t), q, dq, tau, self.robot.nj, self.limits)
            if foot_force is not None and not np.all(np.isfinite(foot_force)):
                raise InvalidSample("non_finite", "foot_force contains NaN or Inf")
        except InvalidSample as err:
            self.count_invalid(err)
            return False
        return self.window.push_joint(sample, foot_force)

    def add_imu(self, t: float, quat_wxyz, gyro, acc) -> bool:
        """IMU sample: orientation quaternion (w, x, y, z), gyro rad/s, specific force m/s^2 (IMU frame)."""
        try:
            sample, repaired = validate_imu(self._local(t), quat_wxyz, gyro, acc, self.limits)
        except InvalidSample as err:
            self.count_invalid(err)
            return False
        if repaired:
            self.stats.repaired["unnormalised_quaternion"] += 1
        tracker = self.gyro_tracker
        if tracker is not None:
            w, x, y, z = sample.quat
            t_last = tracker.last_t
            rot = pin.Quaternion(w, x, y, z).toRotationMatrix()
            tracker.add(sample.t, rot, sample.gyro)
            quat, offset = sample.quat, 0.0
            if self.stance_yaw is not None:  # the reading's yaw drifts at the vertical bias: the tracker's instead
                offset = tracker.heading_offset(rot)
                quat = turned_about_vertical(quat, offset)
            sample = replace(
                sample, quat=quat, gyro=sample.gyro - tracker.bias, gyro_bias=tracker.bias.copy(), yaw_offset=offset
            )
            # the consider analysis's gyro std: the tracker's, low-passed over the estimate's memory of the gyro
            self._tracked_std = _remembered(self._tracked_std, np.sqrt(tracker.variance), sample.t, t_last)
        acc_tracker = self.accel_tracker
        if acc_tracker is not None:
            t_last = self.window.imu.items[-1].t if self.window.imu.items else None
            bias = acc_tracker.bias
            sample = replace(sample, acc=sample.acc - bias, acc_bias=bias)
            self._tracked_acc_std = _remembered(self._tracked_acc_std, np.sqrt(acc_tracker.variance), sample.t, t_last)
        return self.window.push_imu(sample)

    def count_invalid(self, err: InvalidSample) -> None:
        self.stats.reject(err.reason, err.detail)

    def request_stop(self) -> None:
        """Make a running (and every later) solve end at its next iteration, its result discarded (shutdown)."""
        self.stop_event.set()
        solver = self.solver
        if isinstance(solver, compiled.CompiledSolver):  # the Python solver reads stop_event itself
            solver.request_stop()

    def reset_payload(self) -> None:
        """Forget the payload estimate: back to the configured prior (the problem is rebuilt from the last good base
        trajectory and position, :meth:`_base_guess`: the pose is kept).

        Safe to call from another thread while :meth:`solve` runs: that solve's result is discarded.
        """
        self._generation += 1
        self.last_good = None
        self.theta = self.prior_theta.copy()
        self.theta_info = self.prior_theta_info.copy()
        self.theta_sensitivity = None
        self.solver = None
        self._recycle = None
        self._recent_costs.clear()
        self._held_in_row = 0
        self.consistency.reset()
        if self.rls is not None:
            self.rls.reset()

    # ------------------------------------------------------------------ ticks
    def advance(self) -> None:
        """Create the grid knots the buffered samples now cover (cheap; call after adding samples).

        The RLS payload estimator (modes rls, oe+rls) consumes every new grid knot here, at input rate (as created:
        a contact change that the window backdates to a knot already consumed is not replayed into it).
        """
        restarts, created = self.window.restarts, self.window.n_created
        self.window.advance()
        if self.window.restarts != restarts:
            self._restarted = True  # grid restarted (gap): the next solve rebuilds the problem
        new = min(self.window.n_created - created, len(self.window.knots))
        if self.rls is not None:
            for i in range(new, 0, -1):
                self.rls.update(self.window.knots[-i])
        if self.stance_yaw is not None:
            self._stance_yaw_t = self._feed_final(self._add_stance_yaw, self._stance_yaw_t)
        if self.accel_tracker is not None:
            self._accel_tracker_t = self._feed_final(self.accel_tracker.add, self._accel_tracker_t)

    def _feed_final(self, add: Callable[[GridKnot], None], newest: float) -> float:
        """Call ``add`` on the knots after time ``newest`` whose contact flags are final, in order; returns the time of
        the last one given (``newest`` if none)."""
        final, knots = self.window.final_t, self.window.knots
        start = len(knots)
        while start > 0 and knots[start - 1].t > newest:
            start -= 1
        for i in range(start, len(knots)):
            knot = knots[i]
            if knot.t > final:
                break
            add(knot)
            newest = knot.t
        return newest

    def _add_stance_yaw(self, knot: GridKnot) -> None:
        """Give :attr:`stance_yaw` one final knot; fuse the interval it may close into the gyro tracker."""
        tracker = self.gyro_tracker
        out = self.stance_yaw.add(knot, tracker.bias)
        if out is not None:
            tracker.fuse_rate(*out)

    def propagate(self) -> Odometry | None:
        """Step the input-rate odometry through the IMU samples accepted since the last call (each with the newest
        joint sample and the newest grid knot's contact flags) and return the newest output (None before the first
        solve, after a sensor gap, or without a new sample). Cheap: call after every input message, before
        :meth:`advance` (whose contact detection is the expensive part of the sample path: the output does not wait
        for it, and uses the contact flags of the knot before). A sensor gap that restarts the window does not stop
        it (a dropped message or two on a loaded machine): only a silence of more than
        :data:`mcoe_ros.estimation.propagation.MAX_STEP` does, until the next solve."""
        imu, joints = self.window.imu.items, self.window.joints.items
        if not imu or not joints:
            return None
        prop = self.propagator
        last = prop.last_t
        new = []
        for sample in reversed(imu):
            if sample.t <= last:
                break
            new.append(sample)
        if not new:
            return None
        knots = self.window.knots
        contacts = knots[-1].contacts if knots else (False,) * len(self.robot.foot_frame_ids)
        for sample in reversed(new):
            prop.push(sample.t, sample, joints[-1], contacts)
        return prop.output(self.epoch or 0.0)

    def begin_rebase(self, est: Estimate, tick: TickInput) -> Rebase | None:
        """Start re-anchoring the odometry at a solve's newest node (None if the estimate must not be used: a held
        estimate, or a solve stopped by its deadline before any step). Call under the sample lock; then
        :meth:`Rebase.run` outside it and :meth:`finish_rebase` under it again."""
        if est.source == "hold" or est.solve.get("iterations", 0) < 1:
            return None
        knot = tick.knots[-1]
        return self.propagator.begin(est, knot.imu, knot.t)

    def finish_rebase(self, rebase: Rebase | None) -> None:
        if rebase is not None:
            self.propagator.finish(rebase)

    def rebase(self, est: Estimate, tick: TickInput) -> None:
        """Synchronous re-anchoring (replay, tests)."""
        rebase = self.begin_rebase(est, tick)
        if rebase is not None:
            rebase.run()
            self.finish_rebase(rebase)

    @property
    def rls_pi(self) -> np.ndarray | None:
        """The RLS payload estimate once it has enough data (modes rls, oe+rls), else None."""
        return self.rls.pi if self.rls is not None and self.rls.ready else None

    def due(self) -> TickInput | None:
        """The input of the tick that is due now (window full and ``tick_period`` of new data), else None.

        Taking it marks the tick as started; run it with :meth:`solve` (possibly outside the lock that
        guards the sample methods: the snapshot shares no mutable state with the window).
        """
        if not self.window.full:
            return None
        newest = self.window.n_created
        elapsed = newest - self.last_tick_n
        if elapsed < self.tick_knots:
            return None
        if self.counters.ticks:  # the newest window is solved; the ticks due in between are skipped
            self.counters.skipped += elapsed // self.tick_knots - 1
        self.last_tick_n = newest
        restarted, self._restarted = self._restarted, False
        return TickInput(self.window.snapshot(), newest, restarted)

    def poll(self) -> list[Estimate]:
        """Advance the grid and run the tick that is due, if any (the synchronous path of the replay)."""
        self.advance()
        tick = self.due()
        if tick is None:
            return []
        est = self.solve(tick)
        if est is None:
            return []
        self.rebase(est, tick)
        return [est]

    def _fresh_solver(self, knots: list[GridKnot], solver: MCOESolver | None = None) -> MCOESolver:
        """Solver on a new problem over the window from sensor-based guesses and the current payload belief.

        Base positions and velocities come from the input-rate odometry when it covers the window (a warm
        rebuild), else from the IMU + leg-kinematics filter run over the window from the last base position (kept by a
        payload reset; the standing height at the start) at rest (:meth:`_kinematic_base_guess`). ``solver``: an
        existing solver to re-use instead (a late tick): shifted by the whole window, its knots' data recycled where
        the contact phase matches, then given this problem's arrival prior and guess."""
        position = np.zeros(3) if self.last_position is None else self.last_position.copy()
        if self.last_position is None:
            position[2] = self.builder.standing_height(knots[0])
        base = self._base_guess([k.t for k in knots]) if self.last_position is not None else None
        if base is None:
            base = self._kinematic_base_guess(knots, position)
        running, terminal, inputs, prior, xs = self.builder.fresh_parts(
            knots, position, self.theta, self.theta_info, base
        )
        prior = self._with_belief_sensitivity(prior)
        noise = self.builder.interval_noise(knots, len(running))
        if solver is None:
            solver = self._new_solver(running, terminal, inputs, prior, noise)
        elif isinstance(solver, compiled.CompiledSolver):  # its marginal prior is the stored one (no evaluation)
            solver.shift(self.n_intervals, running, terminal, inputs[:-1], inputs[-1], noise)
        else:  # the Python solver: neither the marginal prior nor the rollout (replaced below)
            args = (self.n_intervals, running, terminal, inputs[:-1], inputs[-1], noise)
            solver.shift(*args, marginalize=False, xs_new=xs[1:])
        solver.problem.prior = prior
        guess = self.theta.copy()
        if self.rls_pi is not None:  # RLS warm start of the payload body (oe+rls)
            guess[:10] = self.param.parts[0].theta(self.rls_pi)
        solver.set_guess(xs, None, guess)
        return solver

    def _kinematic_base_guess(self, knots: list[GridKnot], position: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """World base (position m, velocity m/s) guesses at the knots of a window built without odometry: the IMU +
        leg-kinematics filter (:class:`~mcoe_ros.estimation.leg_odometry.LegKinematicsEkf`, this estimator's noise
        levels) run over the window's knots from ``position`` at rest, on the window's orientation reading and
        corrected gyro, with the zero-velocity update on the feet the window's own pseudo-measurements use (settled)
        and the ground height under its stance feet. Before, the base was held still at ``position`` (13 cm off by
        the end of a 1 s window of a trot forward: docs/localisation.md, session 28)."""
        noise = self.config.noise
        ekf = LegKinematicsEkf(
            self.robot,
            position,
            accel_std=noise.accelerometer,
            foot_velocity_std=noise.foot_velocity,
            ground_height_std=noise.stance_foot_height,
            ground_height=self.config.dynamics.ground_height,
        )
        out = []
        for i, knot in enumerate(knots):
            imu = knot.imu
            if i > 0:
                ekf.predict(knot.t - knots[i - 1].t, imu.quat, imu.gyro, imu.acc)
            ekf.update(imu.quat, imu.gyro, knot.joint.q, knot.joint.dq, knot.measured)
            if noise.stance_foot_height > 0.0:
                ekf.update_ground_height(imu.quat, knot.joint.q, knot.contacts)
            out.append((ekf.x[0:3].copy(), ekf.x[3:6].copy()))
        return out

    def _base_guess(self, times: list[float]) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """World base (p, v) guesses at the knot times (local, ascending) of a problem built anew: the last good solve's
        trajectory at the times it covers, the input-rate odometry (anchored at that solve's newest knot) after it;
        None if the odometry does not reach a later time (the caller then holds the last position at zero velocity).

        A tick after a held solve builds a window that begins before the last good solve's newest knot (one held
        tick of 25 knots in a window of 100): the odometry, which starts at that knot, cannot cover the window's
        start. Before, the whole guess then fell back to the last good *newest* position at zero velocity, and the
        arrival prior took it as its mean: through the jump's landing (docs/localisation.md, "A held tick and the
        restart") the base had fallen ~10 cm between the window's start and that knot, the restarted window sat
        23-26 cm low for three ticks."""
        solved = self._solved_base
        n_solved = 0
        if solved is not None:
            t_solved = solved[0]
            while n_solved < len(times) and t_solved[0] - 1e-9 <= times[n_solved] <= t_solved[-1] + 1e-9:
                n_solved += 1
        rest = times[n_solved:]
        later = self.propagator.states_at(rest) if rest else []
        if later is None:
            return None
        out = []
        for t in times[:n_solved]:
            t_solved, p, v = solved
            out.append(
                (
                    np.array([np.interp(t, t_solved, p[:, i]) for i in range(3)]),
                    np.array([np.interp(t, t_solved, v[:, i]) for i in range(3)]),
                )
            )
        return out + list(later)

    def _remember_solution(self, knots: list[GridKnot], xs: list[np.ndarray]) -> None:
        """Keep a good solve's base trajectory (world positions and velocities at its knot times) for
        :meth:`_base_guess`."""
        nq = self.robot.nq
        p = np.array([x[:3] for x in xs])
        v = np.empty_like(p)
        for i, x in enumerate(xs):
            q = x[3:7] / np.linalg.norm(x[3:7])
            v[i] = pin.Quaternion(q[3], q[0], q[1], q[2]).toRotationMatrix() @ x[nq : nq + 3]
        self._solved_base = (np.array([k.t for k in knots]), p, v)
        quat = np.array([x[3:7] for x in xs])
        self._solved_quat = quat / np.linalg.norm(quat, axis=1, keepdims=True)

    @property
    def window_trajectory(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The last solve's base poses over its window: knot times (N+1,) s on the window's clock (sensor time −
        ``epoch``), positions (N+1, 3) m and orientations (N+1, 4) x, y, z, w in the odometry frame (the newest is the
        published pose; the older ones are fixed-lag smoothed, the oldest by the whole window); None before the first
        solve (:class:`mcoe_ros.estimation.smoothed.SmoothedTrajectory` collects them)."""
        if self._solved_base is None:
            return None
        return self._solved_base[0].copy(), self._solved_base[1].copy(), self._solved_quat.copy()

    def window_poses(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """:attr:`window_trajectory` with sensor times (s, the inputs' clock) instead of the window's; None before the
        first solve (the ``solve/path`` topic)."""
        window = self.window_trajectory
        if window is None:
            return None
        return window[0] + (self.epoch or 0.0), window[1], window[2]

    def _with_belief_sensitivity(self, prior):
        """A prior built from the payload belief with the belief's IMU-bias sensitivity (consider analysis) carried over
        (:meth:`ArrivalPrior.with_mean_sensitivity`); unchanged without one."""
        if self.theta_sensitivity is None:
            return prior
        return prior.with_mean_sensitivity(self.theta_sensitivity)

    def _new_solver(self, running, terminal, inputs, prior, noise) -> MCOESolver | compiled.CompiledSolver:
        """The configured solver backend on the problem of these models, inputs (N+1 (u, z)), arrival prior and
        per-interval noise information (N of (nw,)) (see SolverConfig.backend); the compiled solver is built without
        the Python problem."""
        backend = self.config.solver.backend
        builder = self.builder
        if backend != "python":
            if compiled.available():
                velocity_noise = builder.noise_dims is not None
                reason = compiled.unsupported_models([*running, terminal], self.options, velocity_noise, builder.robust)
                if reason is None and builder.contact_noise > 0.0:
                    reason = "noise.contact_acceleration (Python solver only)"
            else:
                reason = "not built"
            if reason is None:
                if self._compiled_models is None:
                    self._compiled_models = compiled.CompiledModels(self.robot)
                solver = compiled.CompiledSolver.from_models(
                    running,
                    terminal,
                    inputs,
                    prior,
                    self.param,
                    noise,
                    replace(self.options),
                    builder.torque_noise,
                    self._compiled_models,
                    threads=self.config.solver.threads,
                    spare_knots=self.config.solver.spare_knots,
                    parametric_noise=builder.noise_derivative is not None,
                )
                if self.stop_event.is_set():
                    solver.request_stop()
                return solver
            if backend == "compiled":
                raise ValueError(f"solver.backend: the compiled solver cannot run this problem ({reason})")
        solver = MCOESolver(builder.problem(running, terminal, inputs, prior, noise), replace(self.options))
        solver.stop_event = self.stop_event
        return solver

    def solve(self, tick: TickInput) -> Estimate | None:
        """Run one tick: update the problem with the snapshot's knots, solve, and build the estimate."""
        knots = tick.knots
        generation = self._generation
        new_knots = tick.n_created - self._knots_at_last_solve
        self._knots_at_last_solve = tick.n_created
        if tick.restarted:
            self.solver = self._recycle = None
        # after a held solve: its solver, shifted by the whole window as in a late tick, cold budget (see _recycle)
        recover = self.solver is None and self._recycle is not None and self.last_good is not None
        if recover:
            self.solver = self._recycle
        self._recycle = None
        warming = self._warmup_left > 0 and self.solver is not None and not recover  # a cold start still converging
        # more than a window since the previous solve: no knot in common (its cost includes the guess's transient)
        late = self.solver is not None and (new_knots > self.n_intervals or recover)
        t_wall = time.perf_counter()
        try:
            # more than a window since the previous solve (a slow machine, a long cold start): the solver shifted by
            # the whole window, warm from the odometry and the payload belief, with the warm iteration budget
            rebuild = late and self.last_good is not None and not recover
            cold = self.solver is None or late
            if cold:
                self.counters.rebuilt += (self.solver is None or recover) and self.counters.ticks > 0
                self.counters.late += late and not recover
                self.solver = self._fresh_solver(knots, self.solver if late else None)
                cold = not rebuild
                warming = False
                self._warmup_left = self.cold_iterations if cold else 0
            else:
                running, terminal, inputs, terminal_input = self.builder.shift_arguments(knots, new_knots)
                noise = self.builder.interval_noise(knots, new_knots)
                self.solver.shift(new_knots, running, terminal, inputs, terminal_input, noise)
                if warming:  # not converged yet: the dropped knots' linearisation is not marginalised into the
                    # prior, the window keeps the prior of a problem built from scratch (warm-started)
                    prior = self.builder.arrival_prior(self.solver.xs[0], self.theta, self.theta_info)
                    self.solver.problem.prior = self._with_belief_sensitivity(prior)
                par = self.parameters
                prior = self.solver.problem.prior
                if par.bias_indices.size:  # sensor-bias random walk over the dropped knots' time
                    prior = prior.with_parameter_noise(par.bias_indices, par.bias_walk * (new_knots * self.dt))
                # height random walk over the dropped knots' time, the new arrival knot's stance feet on the ground
                # (once per knot: it leaves the window at the next shift)
                if new_knots > 0 or warming:
                    prior = self.builder.with_ground_height(
                        prior, self.builder.arrival_stance(knots), new_knots * self.dt
                    )
                self.solver.problem.prior = prior
            solver = self.solver  # this tick's solver (reset_payload may drop self.solver meanwhile)
            iterations = self.options.max_iter
            spread = self.cold_per_tick
            if cold or warming:  # the cold start's budget (spread over ticks)
                iterations = min(self._warmup_left, max(spread or self._warmup_left, iterations))

            def run(solver=solver, knots=knots, iterations=iterations):
                if self.actuator_guard is not None:
                    return self.actuator_guard.solve(solver, knots, iterations)
                return solver.solve(max_iter=iterations)

            if self.moment_gate is not None:
                run = partial(self.moment_gate.solve, solver, knots, run)
            result = self.leg_gate.solve(solver, knots, run) if self.leg_gate is not None else run()
            if result.status == "stopped" or self.stop_event.is_set():
                return None
            if cold or warming:
                done = result.converged or spread is None
                self._warmup_left = 0 if done else max(self._warmup_left - max(result.iterations, 1), 0)
            cold = cold or warming  # the cost of a cold start includes its initial transient
            failure = self._check(result)
            chi2_dof = np.nan if failure else self.reduced_chi2(solver, result)
            implausible = "" if failure else self._implausible(result, cold or late, chi2_dof)
        except (np.linalg.LinAlgError, FloatingPointError) as err:
            result, failure, implausible = None, f"solver error: {err}", ""
        elapsed = time.perf_counter() - t_wall
        self.counters.solve_times.append(elapsed)
        self.counters.ticks += 1
        self.last_time = knots[-1].t + (self.epoch or 0.0)
        if failure or implausible:
            return self._hold(failure or implausible, recyclable=not failure and generation == self._generation)
        if generation != self._generation:  # the payload was reset during this solve
            self.solver = None
            return None
        self.counters.iterations.append(result.iterations)
        if self._warmup_left > 0 and result.status != "max_time":  # converging: nothing to publish yet
            self.counters.warmup += 1
            self.last_status = "converging (cold start)"
            return None
        try:
            est = self._estimate(solver, result, knots[-1], elapsed, chi2_dof)
        except (np.linalg.LinAlgError, FloatingPointError) as err:
            return self._hold(f"covariance error: {err}")
        if not (est.is_finite() and np.all(np.isfinite(est.theta_cov))):  # e.g. a singular window marginal
            return self._hold("non-finite covariance")
        if self.config.robust.covariance_scaling == "consistency" and result.status != "max_time":
            est = self._consistency_scaled(est)
        if self._bias_variance is not None:
            est = self._with_imu_bias_uncertainty(est, solver, result.xs[-1])
        if self.drift is not None:
            sigma = self.drift.update(knots, result.xs)
            est = replace(
                est,
                pose_cov=self.drift.publish(est.pose_cov),
                solve={
                    **est.solve,
                    "odometry_drift_std": sigma,
                    "odometry_rolling_std": self.drift.rolling,
                    "touchdowns": self.drift.count,
                },
            )
        if self.ground_variance > 0.0:
            pose_cov = est.pose_cov.copy()
            pose_cov[2, 2] += self.ground_variance
            est = replace(
                est, pose_cov=pose_cov, solve={**est.solve, "ground_std": float(np.sqrt(self.ground_variance))}
            )
        missed_deadline = result.status == "max_time"
        if missed_deadline:
            # clean fallback: the state of the iterate re-anchors the odometry (if it took a step), the payload
            # output and belief hold; the solver keeps its iterate as the next tick's warm start
            self.counters.deadline_misses += 1
            self.last_status = "ok (solve stopped by solver.time_budget)"
            if self.last_good is not None:
                est = self._with_payload_of(est, self.last_good)
            self.last_good = est
            self.last_position = est.position.copy()
            self._remember_solution(knots, result.xs)
            if self.rls_pi is not None and (self.payload_mode == "rls" or cold):
                return self._with_rls_payload(est)  # rls mode, or oe+rls fallback when a cold solve ran out of time
            return est
        # the next problem built from scratch starts from this payload belief
        self.theta = result.theta.copy()
        self.theta_info = np.linalg.pinv(est.theta_cov, rcond=1e-12, hermitian=True)
        sens = solver.consider_sensitivity if self._bias_variance is not None else None
        self.theta_sensitivity = None if sens is None else sens[solver.problem.ndx :].copy()
        if self.parameters.actuator is not None:  # the contact detector explains the joint torques the same way
            self.window.detector.set_actuator(self.parameters.actuator, result.pi[self.parameters.layout.actuator])
        if self.parameters.layout.leg is not None:  # ... with the identified leg bodies
            self.window.detector.set_leg_scale(float(result.pi[self.parameters.layout.leg][0]))
        self.last_good = est
        self.last_position = est.position.copy()
        self._remember_solution(knots, result.xs)
        self.last_status = "ok"
        self._held_in_row = 0
        if not (cold or late):  # warm solves set the cost scale (a cold or late solve's includes the transient)
            self._recent_costs.append(result.cost)
        if self.rls_pi is not None and self.payload_mode == "rls":
            return self._with_rls_payload(est)
        return est

    def _hold(self, failure: str, recyclable: bool = False) -> Estimate | None:
        """Discard this tick's solve: the last good estimate, marked as held (None before the first one).
        ``recyclable``: the solve was finite (implausible against the recent ones): the next tick recycles its
        solver (see ``_recycle``)."""
        self._warmup_left = 0
        self.counters.held += 1
        self._held_in_row += 1
        self.last_status = f"holding last good estimate ({failure})"
        self._recycle = self.solver if recyclable else None
        self.solver = None
        if self.last_good is None:
            return None
        held = replace(self.last_good, status=self.last_status, source="hold", rls_payload_pi=self.rls_pi)
        return self._with_rls_payload(held) if self.rls_pi is not None else held

    def _consistency_scaled(self, est: Estimate) -> Estimate:
        """The estimate with its published payload covariance scaled by the larger of the :class:`ConsistencyScale`
        factor (fed the unscaled covariance) and the residual factor max(σ̂², floor), its pose and twist covariances by
        the residual factor; ``solve['cov_scale']`` is the payload's factor, ``solve['pose_cov_scale']`` the pose's."""
        pose = max(est.solve["chi2_dof"], self.config.robust.covariance_scale_floor)
        factor = max(self.consistency.update(est.t, est.payload_pi, est.payload_cov), pose)
        return replace(
            est,
            pose_cov=pose * est.pose_cov,
            twist_cov=pose * est.twist_cov,
            payload_cov=factor * est.payload_cov,
            solve={**est.solve, "cov_scale": factor, "pose_cov_scale": pose},
        )

    @staticmethod
    def _with_payload_of(est: Estimate, other: Estimate) -> Estimate:
        """The estimate's state with another estimate's payload (a solve stopped by its deadline)."""
        return replace(
            est,
            payload_pi=other.payload_pi,
            payload_cov=other.payload_cov,
            combined_pi=other.combined_pi,
            theta=other.theta,
            theta_cov=other.theta_cov,
            actuator=other.actuator,
            imu_bias=other.imu_bias,
            leg_mass=other.leg_mass,
            source=other.source,
            bias_cov=_with_payload_part(est.bias_cov, other.bias_cov),
        )

    def _with_rls_payload(self, est: Estimate) -> Estimate:
        """The estimate with the RLS payload (and its covariance) in place of the optimal estimator's."""
        pi = self.rls_pi
        return replace(
            est,
            payload_pi=pi,
            payload_cov=self.rls.covariance(),
            combined_pi=self.robot.combined_pi(pi),
            source="rls",
            bias_cov=_with_payload_part(est.bias_cov, None),
        )

    def _check(self, result) -> str:
        if not np.isfinite(result.cost) or not np.all(np.isfinite(result.theta)):
            return "non-finite solution"
        if not all(np.all(np.isfinite(x)) for x in result.xs):
            return "non-finite trajectory"
        if not is_physically_consistent(self.parameters.body_pi(result.pi)) or result.pi[0] > MAX_PAYLOAD_MASS:
            return "non-physical payload"
        return ""

    def _implausible(self, result, cold: bool, chi2_dof: float) -> str:
        """Solve sanity against recent history (see COST_OUTLIER, CHI2_OUTLIER, MASS_STEP_*) given the solve's
        reduced chi-square (:meth:`reduced_chi2`): '' when plausible."""
        if not cold and len(self._recent_costs) >= 5 and chi2_dof > CHI2_OUTLIER:
            scale = float(np.median(self._recent_costs))
            if result.cost > COST_OUTLIER * scale:
                return f"cost outlier {result.cost:.3g} (recent median {scale:.3g}, reduced chi-square {chi2_dof:.3g})"
        last = self.last_good
        if last is None:
            return ""
        unscaled = last.payload_cov[0, 0] / getattr(last, "solve", {}).get("cov_scale", 1.0)  # see robust.*
        mass_std = float(np.sqrt(max(unscaled, 0.0)))
        bound = max(MASS_STEP_MIN, MASS_STEP_SIGMAS * mass_std) * 2.0**self._held_in_row
        step = float(result.pi[0] - last.payload_pi[0])
        if abs(step) > bound:
            return f"implausible payload step {step:+.3g} kg (bound {bound:.3g} kg)"
        return ""

    # ------------------------------------------------------------------ outputs
    def _estimate(self, solver: MCOESolver, result, knot: GridKnot, elapsed: float, chi2_dof: float) -> Estimate:
        """The Estimate of a successful solve (pure: reads the solver, writes nothing); chi2_dof: its
        :meth:`reduced_chi2`."""
        robot = self.robot
        problem = solver.problem
        ndx, nq = problem.ndx, robot.nq
        cov = self._terminal_covariance(solver)
        rob = self.config.robust
        scale = max(chi2_dof, rob.covariance_scale_floor) if rob.covariance_scaling == "residual" else 1.0
        x = result.xs[-1]
        quat = x[3:7] / np.linalg.norm(x[3:7])
        pose_cov, twist_cov, pi_cov = self._published_blocks(cov, x, result.theta, ndx)
        pose_cov = relative_to_origin(pose_cov, self.config.noise.arrival_position)
        theta_cov = cov[ndx:, ndx:]
        layout = self.parameters.layout
        std = np.sqrt(np.clip(np.diag(pi_cov), 0.0, None))
        extra_blocks = {}
        if layout.actuator is not None:
            extra_blocks["actuator"] = (result.pi[layout.actuator].copy(), std[layout.actuator])
        if layout.gyro is not None:  # (6,) gyro, accelerometer; an unestimated accelerometer bias: 0 ± its prior std
            if layout.acc is None:
                acc = (np.zeros(3), np.full(3, self.config.imu_bias.accelerometer_prior_std))
            else:
                acc = (result.pi[layout.acc], std[layout.acc])
            bias = (np.r_[result.pi[layout.gyro], acc[0]], np.r_[std[layout.gyro], acc[1]])
            extra_blocks["imu_bias"] = bias
        if layout.leg is not None:
            m_legs = self.parameters.leg_mass
            extra_blocks["leg_mass"] = (
                (float(result.pi[layout.leg][0]) - 1.0) * m_legs,
                float(std[layout.leg][0]) * m_legs,
            )
        return Estimate(
            t=knot.t + (self.epoch or 0.0),
            position=x[:3].copy(),
            quat_xyzw=quat.copy(),
            linear_velocity=x[nq : nq + 3].copy(),
            angular_velocity=x[nq + 3 : nq + 6].copy(),
            pose_cov=scale * pose_cov,
            twist_cov=scale * twist_cov,
            payload_pi=result.pi[:10].copy(),
            payload_cov=scale * pi_cov[:10, :10],
            combined_pi=robot.combined_pi(result.pi[:10]),
            theta=result.theta.copy(),
            theta_cov=theta_cov,
            contacts=tuple(knot.contacts),
            source="oe",
            status="ok",
            solve={
                "iterations": result.iterations,
                "cost": result.cost,
                "converged": result.converged,
                "solve_time": elapsed,
                "status": result.status,
                "chi2_dof": chi2_dof,
                "cov_scale": scale,
            },
            rls_payload_pi=self.rls_pi,
            payload_frame=self.config.robot.payload_frame,
            combined_frame=robot.payload_parent_frame,
            actuator=extra_blocks.get("actuator"),
            imu_bias=extra_blocks.get("imu_bias"),
            leg_mass=extra_blocks.get("leg_mass"),
        )

    @staticmethod
    def reduced_chi2(solver: MCOESolver, result) -> float:
        """The window's reduced chi-square σ̂² = 2 J_window / Σ n_r: the solution's cost without the arrival prior's
        (whitened measurement + process cost of the window, robust if so configured) per measurement degree of
        freedom (the window has Σ n_r + N n_w + n_prior residuals and n_prior + N n_w free variables)."""
        problem = solver.problem
        prior_cost = problem.prior.cost(problem.state, result.xs[0], result.theta)
        dof = sum(len(knot.data.r) for knot in problem.knots)
        return max(2.0 * (result.cost - prior_cost), 0.0) / max(dof, 1)

    @staticmethod
    def _terminal_covariance(solver: MCOESolver) -> np.ndarray:
        """Covariance over (dx_N, dtheta) from the GN marginal of the whole window (see module docstring); also sets
        the solver's ``consider_sensitivity``."""
        return solver.terminal_covariance()

    def _published_blocks(
        self, cov: np.ndarray, x: np.ndarray, theta: np.ndarray, ndx: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(pose (6, 6) odom axes, twist (6, 6) base axes, pi (npi, npi)) blocks of a covariance over (dx_N, dtheta)
        at the newest state x (nx,) and parameters theta."""
        nv = self.robot.nv
        quat = x[3:7] / np.linalg.norm(x[3:7])
        rot = pin.Quaternion(quat[3], quat[0], quat[1], quat[2]).toRotationMatrix()
        jac = np.zeros((6, 6))
        jac[:3, :3] = rot
        jac[3:, 3:] = rot
        dpi = self.param.jacobian(theta)
        return jac @ cov[:6, :6] @ jac.T, cov[nv : nv + 6, nv : nv + 6], dpi @ cov[ndx:, ndx:] @ dpi.T

    def _with_imu_bias_uncertainty(self, est: Estimate, solver: MCOESolver, x: np.ndarray) -> Estimate:
        """The estimate with the unestimated IMU biases' uncertainty added to its pose, twist and payload covariances
        (``imu_bias.consider``, consider analysis): S Σ_b Sᵀ with S = ∂(x̂_N, θ̂)/∂b of the solve's last terminal
        covariance (the marginalised past included) and Σ_b = diag(gyro_prior_std², accelerometer_prior_std²);
        added after any scaling (the biases' share is not a residual's); ``bias_cov`` holds the added blocks."""
        sens = solver.consider_sensitivity
        if sens is None:
            return est
        variance = self._bias_variance
        if self.gyro_tracker is not None:  # the gyro's bias as far as the tracker has not learnt it
            variance = np.r_[self._tracked_std**2, variance[3:]]
        if self.accel_tracker is not None:  # the accelerometer's z bias likewise
            variance = variance.copy()
            variance[5] = self._tracked_acc_std**2
        add = (sens * variance) @ sens.T
        pose, twist, pi_cov = self._published_blocks(add, x, est.theta, solver.problem.ndx)
        npl = len(est.payload_pi)
        payload = pi_cov[:npl, :npl]
        return replace(
            est,
            pose_cov=est.pose_cov + pose,
            twist_cov=est.twist_cov + twist,
            payload_cov=est.payload_cov + payload,
            bias_cov=(pose, twist, payload),
        )

    @property
    def sample_stats(self) -> SampleStats:
        """Every sample counter of the core (validation and window buffers)."""
        return SampleStats.merged(self.stats, self.window.stats)

    def diagnostics(self) -> Diagnostics:
        """The estimator's present state as data (see :class:`mcoe_ros.estimation.diagnostics.Diagnostics`)."""
        samples = self.sample_stats
        level = OK if self.last_status in ("ok", "waiting for data") else WARN
        c = self.counters
        return Diagnostics(
            level=level,
            message=self.last_status,
            ticks=c.ticks,
            held_ticks=c.held,
            solve_times=np.array(c.solve_times[-200:]),
            iterations_last=c.iterations[-1] if c.iterations else 0,
            cost_last=self.last_good.solve["cost"] if self.last_good else None,
            window_fill=(len(self.window.knots), self.window.n_knots),
            samples=samples,
            window_restarts=self.window.restarts,
            rls_mass=float(self.rls_pi[0]) if self.rls_pi is not None else None,
            contact_phase=tuple(self.window.knots[-1].contacts) if self.window.knots else (),
            extra={
                **self._parameter_values(),
                **self._schedule_values(),
                **self._drift_values(),
                "contact_backdated_foot_knots": self.window.backdated,
            },
        )

    def _drift_values(self) -> dict[str, str | int]:
        """The touch-downs since the odometry origin, their horizontal drift σ and the stance feet's rolling σ in the
        published x, y covariance (``noise.odometry_slip_time``; none when off)."""
        if self.drift is None:
            return {}
        return {
            "odometry_touchdowns": self.drift.count,
            "odometry_drift_std_mm": f"{1e3 * self.drift.sigma:.1f}",
            "odometry_rolling_std_mm": f"{1e3 * self.drift.rolling:.1f}",
        }

    def _schedule_values(self) -> dict[str, str | int]:
        """Two-rate output and solve scheduling: solve rate (per sensor second), skipped ticks, rebuilt problems, late
        ticks, deadline misses, and the size of the odometry corrections at re-anchoring."""
        c, prop = self.counters, self.propagator
        span = (self.window.n_created * self.dt) or 1.0
        corrections = np.array(prop.corrections[-200:]) if prop.corrections else np.zeros(1)
        return {
            "solve_rate_hz": f"{c.ticks / span:.2f}",
            "skipped_ticks": c.skipped,
            "rebuilt_ticks": c.rebuilt,
            "late_ticks": c.late,
            "deadline_misses": c.deadline_misses,
            "warmup_ticks": c.warmup,
            "odom_correction_last_mm": f"{1e3 * prop.correction:.2f}",
            "odom_correction_p95_mm": f"{1e3 * np.percentile(corrections, 95):.2f}",
        }

    def _parameter_values(self) -> dict[str, str]:
        """The identified IMU biases, actuator parameters and leg mass deviation of the last good estimate (value ±
        std), or the unestimated IMU biases' share of its standard deviations (``imu_bias.consider``)."""
        est, out = self.last_good, {}
        tracker = self.gyro_tracker
        if tracker is not None:  # imu_bias.attitude_tracking: subtracted from the gyro before the window
            sd = np.sqrt(tracker.variance)
            out.update(
                {f"gyro_bias_tracked_{a}_rad_s": f"{tracker.bias[i]:.5f} ± {sd[i]:.5f}" for i, a in enumerate("xyz")}
            )
            if self.stance_yaw is not None:  # the stance feet's intervals: fused, and rejected by the gate
                out["stance_yaw_intervals"] = f"{tracker.rate_updates} fused, {tracker.rejected} rejected"
        acc_tracker = self.accel_tracker
        if acc_tracker is not None:  # imu_bias.vertical_accelerometer_tracking: subtracted from the specific force
            out["accel_bias_tracked_z_m_s2"] = f"{acc_tracker.bias[2]:.4f} ± {np.sqrt(acc_tracker.variance):.4f}"
        if est is None:
            return out
        if est.bias_cov is not None:
            pose, _, payload = est.bias_cov
            sd = np.sqrt(np.clip(np.diag(pose), 0.0, None))
            out["imu_bias_sigma_position_mm"] = " ".join(f"{1e3 * v:.2f}" for v in sd[:3])
            out["imu_bias_sigma_rotation_mrad"] = " ".join(f"{1e3 * v:.2f}" for v in sd[3:])
            out["imu_bias_sigma_payload_mass_kg"] = f"{np.sqrt(max(payload[0, 0], 0.0)):.4f}"
        if est.imu_bias is not None:
            (b, sd), axes = est.imu_bias, "xyz"
            out.update({f"gyro_bias_{a}_rad_s": f"{b[i]:.5f} ± {sd[i]:.5f}" for i, a in enumerate(axes)})
            out.update({f"accel_bias_{a}_m_s2": f"{b[3 + i]:.4f} ± {sd[3 + i]:.4f}" for i, a in enumerate(axes)})
        if est.actuator is not None:
            names = self.parameters.actuator.parameter_names()
            out.update({name: f"{v:.4g} ± {d:.2g}" for name, v, d in zip(names, *est.actuator, strict=True)})
            guard = self.actuator_guard
            out["actuator_frozen_solves"] = f"{guard.frozen} of {guard.solves}"
            out["actuator_excitation_rad_s"] = f"{guard.last_excitation:.3f}"
        if est.leg_mass is not None:
            out["leg_mass_deviation_kg"] = f"{est.leg_mass[0]:+.3f} ± {est.leg_mass[1]:.3f}"
            out["leg_mass_frozen_solves"] = f"{self.leg_gate.frozen} of {self.leg_gate.solves}"
        if self.moment_gate is not None:
            gate = self.moment_gate
            out["vertical_moment_frozen_solves"] = f"{gate.frozen} of {gate.solves}"
            out["horizontal_excitation_m_s2"] = f"{gate.last_excitation:.3f}"
        return out


def _remembered(std, target, t: float, t_last: float | None):
    """A tracked bias's std as the estimate remembers it: ``std`` moved towards the tracker's ``target`` by the
    fraction (t − t_last) / :data:`TRACKED_BIAS_MEMORY` of the way (none for the first sample)."""
    step = min(max(t - t_last, 0.0) / TRACKED_BIAS_MEMORY, 1.0) if t_last is not None else 0.0
    return std + step * (target - std)


def considers(bias: ImuBiasConfig) -> bool:
    """Whether the consider analysis has a parameter to add: ``imu_bias.consider`` with a bias not estimated or the
    orientation reading's offset (``imu_bias.orientation_offset_std`` > 0)."""
    return bias.consider and (not (bias.enabled and bias.accelerometer) or bias.orientation_offset_std > 0.0)


def _with_payload_part(bias_cov: tuple | None, payload_from: tuple | None) -> tuple | None:
    """``Estimate.bias_cov`` with its payload block taken from another's (``payload_from``; None: zeros, a payload
    that carries no bias share, e.g. RLS)."""
    if bias_cov is None:
        return None
    payload = np.zeros_like(bias_cov[2]) if payload_from is None else payload_from[2]
    return (bias_cov[0], bias_cov[1], payload)
