"""Receding-horizon estimator: samples -> sliding window -> estimation problem -> solver -> :class:`Estimate`.

The one core code path used by the ROS node and by the bag replay (no ROS import).

Per tick (every ``estimator.tick_period`` of *sensor* time once the window is full, so replays are
deterministic): the window's grid nodes become node models (contact phase from the dynamics-based contact
detector; a foot that lands starts a reset node with an impulse), the problem is shifted by the number of
new nodes with the dropped nodes marginalised into the arrival prior over (x_0, theta) — so information on
the payload accumulates over time, not only within the window — the new nodes are initialised by a
nonlinear rollout, and the solver runs a fixed iteration budget (optionally a wall-time budget).
A solve that fails (non-finite, cost blow-up, non-physical payload) is discarded: the last good estimate is
held and reported as such, and the next tick restarts the window with the last good payload as prior.

Covariances: the Gauss-Newton marginal of the whole window onto (x_N, theta) (forward information
recursion of :meth:`MCOESolver.marginal_prior` plus the newest node's measurements, at the solve's last
linearisation point) gives the pose/twist covariance of the newest state and the payload covariance. The
pose block is rotated to odom axes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import pinocchio as pin

from mcoe_ros.contact import ContactConfig, ContactDetector
from mcoe_ros.estimate import Estimate
from mcoe_ros.inertia import is_physically_consistent, make_parametrization, pi_from_com
from mcoe_ros.measurement import (
    ContactVelocity,
    ImuAngularVelocity,
    ImuOrientation,
    ImuSpecificForce,
    JointPosition,
    JointVelocity,
)
from mcoe_ros.model import RobotModel, RobotSpec
from mcoe_ros.multibody_node import MultibodyNodeModel
from mcoe_ros.payload_rls import OnlinePayloadRls
from mcoe_ros.problem import ArrivalPrior, EstimationProblem
from mcoe_ros.samples import InvalidSample, SampleStats, validate_imu, validate_joint
from mcoe_ros.solver import MCOESolver, SolverOptions
from mcoe_ros.window import SlidingWindow

MAX_PAYLOAD_MASS = 200.0  #: kg; a solve claiming more is treated as diverged


def robot_from_params(params: dict) -> RobotModel:
    return RobotModel(
        RobotSpec(
            urdf_path=params["robot.urdf_path"],
            base_frame=params["robot.base_frame"],
            imu_frame=params["robot.imu_frame"],
            foot_frames=tuple(params["robot.foot_frames"]),
            payload_frame=params["robot.payload_frame"],
            armature=params["robot.armature"],
            hw_joint_names=tuple(params["robot.hw_joint_names"]),
        )
    )


@dataclass
class TickInput:
    """What one solve needs from the window: its grid nodes (oldest first) and bookkeeping."""

    nodes: list  #: GridNode list, N+1 nodes
    n_created: int  #: window.n_created at the snapshot
    restarted: bool  #: the grid restarted since the previous tick


class PhaseModels(dict):
    """Node models per (stance feet, impulse feet, velocity-measured feet), created on first use.

    Every model has the shared sensor measurements plus a zero-velocity pseudo-measurement for each stance
    foot that is not landing in that node (:class:`mcoe_ros.measurement.ContactVelocity`). A node where feet
    land applies the impulse map to the whole new stance set, so feet already down stay still through the
    impact.
    """

    def __init__(
        self, robot: RobotModel, dt: float, measurements: list, foot_velocity_std: float, impulse: bool = True
    ):
        super().__init__()
        self.robot, self.dt, self.measurements, self.impulse = robot, dt, measurements, impulse
        self.foot_meas = {
            name: ContactVelocity(robot, fid, std=foot_velocity_std)
            for name, fid in zip(robot.foot_names, robot.foot_frame_ids, strict=True)
        }

    def for_contacts(self, contacts, prev_contacts) -> MultibodyNodeModel:
        feet = self.robot.foot_names
        stance = tuple(f for f, c in zip(feet, contacts, strict=True) if c)
        landing = (
            ()
            if prev_contacts is None
            else tuple(f for f, c, p in zip(feet, contacts, prev_contacts, strict=True) if c and not p)
        )
        measured = tuple(f for f in stance if f not in landing)
        return self[stance, stance if landing and self.impulse else (), measured]

    def __missing__(self, key) -> MultibodyNodeModel:
        stance, impulse, measured = key
        meas = self.measurements + [self.foot_meas[f] for f in measured]
        model = MultibodyNodeModel(self.robot, stance, self.dt, meas, impulse)
        self[key] = model
        return model


class Estimator:
    """Sliding-window MCOE estimator of base state and payload inertia (see module docstring).

    Feed samples with :meth:`add_joints` / :meth:`add_imu` (times in seconds on one clock, joint arrays
    in model order), then call :meth:`poll` to run the ticks that are due.
    """

    def __init__(self, params: dict):
        self.params = params
        self.robot = robot_from_params(params)
        robot = self.robot
        self.dt = float(params["estimator.dt"])
        self.n_intervals = max(2, int(round(params["estimator.window"] / self.dt)))
        self.tick_nodes = max(1, int(round(params["estimator.tick_period"] / self.dt)))
        self.payload_mode = params["estimator.payload_estimator"]
        self.stats = SampleStats()
        self.epoch: float | None = None  #: seconds subtracted from input times (float precision)
        detector = ContactDetector(
            robot,
            ContactConfig(
                force_on=params["contact.force_on"],
                force_off=params["contact.force_off"],
                min_duration=params["contact.min_duration"],
                use_foot_force=params["input.use_foot_force"],
                foot_force_threshold=params["contact.foot_force_threshold"],
            ),
        )
        self.window = SlidingWindow(detector, self.dt, self.n_intervals + 1, params["estimator.max_gap"], self.stats)
        self.measurements = [
            JointPosition(robot, std=params["noise.joint_position"]),
            JointVelocity(robot, std=params["noise.joint_velocity"]),
            ImuAngularVelocity(robot, std=params["noise.gyro"]),
            ImuOrientation(robot, std=params["noise.orientation"]),
            ImuSpecificForce(robot, std=params["noise.accelerometer"]),
        ]
        self.models = PhaseModels(
            robot, self.dt, self.measurements, params["noise.foot_velocity"], params["estimator.impulse_on_touchdown"]
        )
        nv = robot.nv
        self.noise_info = np.r_[
            np.full(nv, params["noise.process_position"] ** -2.0), np.full(nv, params["noise.process_velocity"] ** -2.0)
        ]
        self.arrival_info = np.r_[
            np.full(nv, params["noise.arrival_position"] ** -2.0), np.full(nv, params["noise.arrival_velocity"] ** -2.0)
        ]
        self.param = make_parametrization(params["payload.parametrization"])
        prior_pi = pi_from_com(
            params["payload.prior_mass"],
            np.array(params["payload.prior_com"]),
            np.diag(params["payload.prior_inertia"]),
        )
        self.prior_theta = self.param.theta(prior_pi)
        self.prior_theta_info = np.diag(np.asarray(params["payload.prior_sigma"], dtype=float) ** -2.0)
        self.options = SolverOptions(
            rollout=params["solver.rollout"],
            arrival=params["solver.arrival"],
            max_iter=int(params["solver.max_iterations"]),
            max_time=params["solver.time_budget"] or None,
            tol_stop=1e-9,
            tol_gap=1e-8,
        )
        self.cold_iterations = int(params["solver.max_iterations_cold"])
        self._kin_data = robot.create_data()
        self.solver: MCOESolver | None = None
        self.last_good: Estimate | None = None
        self.theta = self.prior_theta.copy()
        self.theta_info = self.prior_theta_info.copy()
        self.last_tick_n = -(10**12)
        self.last_time = 0.0
        self.rls = None
        if "rls" in self.payload_mode:
            self.rls = OnlinePayloadRls(
                robot,
                self.dt,
                window=params["payload.rls_window"],
                alpha=params["payload.rls_alpha"],
                mu=params["payload.rls_forgetting"],
            )
        self.solve_times: list[float] = []
        self.iterations: list[int] = []
        self.n_ticks = self.n_held = 0
        self.last_status = "waiting for data"
        self._nodes_at_last_solve = 0
        self._restarted = False
        self._generation = 0  #: incremented by reset_payload

    # ------------------------------------------------------------------ inputs
    def _local(self, t: float) -> float:
        if self.epoch is None:
            self.epoch = float(np.floor(t))
        return t - self.epoch

    def add_joints(self, t: float, q, dq, tau, foot_force=None) -> bool:
        """Joint sample (model order). False if rejected (counted in stats)."""
        try:
            sample = validate_joint(self._local(t), q, dq, tau, self.robot.nj)
        except InvalidSample as err:
            self.count_invalid(err)
            return False
        return self.window.push_joint(sample, foot_force)

    def add_imu(self, t: float, quat_wxyz, gyro, acc) -> bool:
        """IMU sample: orientation quaternion (w, x, y, z), gyro rad/s, specific force m/s^2 (IMU frame)."""
        try:
            sample, repaired = validate_imu(self._local(t), quat_wxyz, gyro, acc)
        except InvalidSample as err:
            self.count_invalid(err)
            return False
        if repaired:
            self.stats.repaired["unnormalised_quaternion"] += 1
        return self.window.push_imu(sample)

    def count_invalid(self, err: InvalidSample) -> None:
        self.stats.rejected[err.reason] += 1
        self.stats.last_error = str(err)

    def reset_payload(self) -> None:
        """Forget the payload estimate: back to the configured prior (the problem is rebuilt).

        Safe to call from another thread while :meth:`solve` runs: that solve's result is discarded.
        """
        self._generation += 1
        self.last_good = None
        self.theta = self.prior_theta.copy()
        self.theta_info = self.prior_theta_info.copy()
        self.solver = None
        if self.rls is not None:
            self.rls.reset()

    # ------------------------------------------------------------------ ticks
    def advance(self) -> None:
        """Create the grid nodes the buffered samples now cover (cheap; call after adding samples).

        The RLS payload estimator (modes rls, oe+rls) consumes every new grid node here, at input rate.
        """
        restarts, created = self.window.restarts, self.window.n_created
        self.window.advance()
        if self.window.restarts != restarts:
            self._restarted = True  # grid restarted (gap): the next solve rebuilds the problem
        new = min(self.window.n_created - created, len(self.window.nodes))
        if self.rls is not None:
            for i in range(new, 0, -1):
                self.rls.update(self.window.nodes[-i])

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
        if newest - self.last_tick_n < self.tick_nodes:
            return None
        self.last_tick_n = newest
        restarted, self._restarted = self._restarted, False
        return TickInput(list(self.window.nodes), newest, restarted)

    def poll(self) -> list[Estimate]:
        """Advance the grid and run the tick that is due, if any (the synchronous path of the replay)."""
        self.advance()
        tick = self.due()
        if tick is None:
            return []
        est = self.solve(tick)
        return [] if est is None else [est]

    @staticmethod
    def _node_inputs(node, model) -> tuple[np.ndarray, np.ndarray]:
        """(u, z) of a grid node for its model: z = [q_j, v_j, gyro, quat wxyz, acc, 0 (stance foot velocities)]."""
        imu = node.imu
        z = np.zeros(model.nz)
        i = 0
        for part in (node.joint.q, node.joint.dq, imu.gyro, imu.quat, imu.acc):
            z[i : i + len(part)] = part
            i += len(part)
        return node.joint.tau, z

    def _phase_models(self, nodes, prev_contacts):
        """Running models (N) and the terminal model for grid nodes; a foot that lands starts a reset node."""
        running = []
        for node in nodes[:-1]:
            running.append(self.models.for_contacts(node.contacts, prev_contacts))
            prev_contacts = node.contacts
        return running, self.models.for_contacts(nodes[-1].contacts, None)

    def _initial_state(self, node, position: np.ndarray) -> np.ndarray:
        """x from one grid node's sensors: IMU orientation, encoders, base at ``position``, zero base velocity."""
        robot = self.robot
        q = robot.neutral()
        w, x, y, z = node.imu.quat
        r_world_imu = pin.Quaternion(w, x, y, z).toRotationMatrix()
        imu_in_joint = robot.model.frames[robot.imu_frame_id].placement.rotation
        r_world_base = r_world_imu @ imu_in_joint.T
        q[:3] = position
        q[3:7] = pin.Quaternion(r_world_base).coeffs()
        q[7:] = node.joint.q
        v = np.zeros(robot.nv)
        v[3:6] = imu_in_joint @ node.imu.gyro
        v[6:] = node.joint.dq
        return np.concatenate([q, v])

    def _fresh_problem(self, nodes) -> None:
        """New problem over the window from sensor-based guesses and the current payload belief."""
        position = np.zeros(3) if self.last_good is None else self.last_good.position.copy()
        if self.last_good is None:
            position[2] = self._standing_height(nodes[0])
        xs = [self._initial_state(n, position) for n in nodes]
        running, terminal = self._phase_models(nodes, None)
        ndx = 2 * self.robot.nv
        prior = ArrivalPrior.independent(xs[0], self.arrival_info, ndx, self.theta, self.theta_info)
        problem = EstimationProblem(running, terminal, prior, [self.param], self.noise_info)
        for k, node in enumerate(nodes):
            problem.set_node(k, *self._node_inputs(node, problem.nodes[k].model))
        self.solver = MCOESolver(problem, replace(self.options))
        guess = self.theta if self.rls_pi is None else self.param.theta(self.rls_pi)  # RLS warm start (oe+rls)
        self.solver.set_guess(xs, None, guess)

    def _standing_height(self, node) -> float:
        """Base height that puts the lowest foot on z = 0."""
        x = self._initial_state(node, np.zeros(3))
        data = self._kin_data  # solve-thread scratch (the window's detector data belongs to the sample thread)
        pin.framesForwardKinematics(self.robot.model, data, x[: self.robot.nq])
        return -min(data.oMf[f].translation[2] for f in self.robot.foot_frame_ids)

    def _shift_problem(self, nodes, k: int) -> None:
        new = nodes[-(k + 1) :]
        running, terminal = self._phase_models(new, self._prev_contacts_before(nodes, k))
        inputs = [self._node_inputs(n, m) for n, m in zip(new[:-1], running, strict=True)]
        self.solver.shift(k, running, terminal, inputs, self._node_inputs(new[-1], terminal), self.noise_info)

    @staticmethod
    def _prev_contacts_before(nodes, k: int):
        return nodes[-(k + 2)].contacts if len(nodes) >= k + 2 else None

    def solve(self, tick: TickInput) -> Estimate | None:
        """Run one tick: update the problem with the snapshot's nodes, solve, and build the estimate."""
        nodes = tick.nodes
        generation = self._generation
        new_nodes = tick.n_created - self._nodes_at_last_solve
        self._nodes_at_last_solve = tick.n_created
        if tick.restarted:
            self.solver = None
        t_wall = time.perf_counter()
        try:
            cold = self.solver is None or new_nodes > self.n_intervals
            if cold:
                self._fresh_problem(nodes)
                self.solver.options.max_iter = self.cold_iterations
            else:
                self._shift_problem(nodes, new_nodes)
                self.solver.options.max_iter = self.options.max_iter
            solver = self.solver  # this tick's solver (reset_payload may drop self.solver meanwhile)
            result = solver.solve()
            failure = self._check(result)
        except (np.linalg.LinAlgError, FloatingPointError) as err:
            result, failure = None, f"solver error: {err}"
        elapsed = time.perf_counter() - t_wall
        self.solve_times.append(elapsed)
        self.n_ticks += 1
        self.last_time = nodes[-1].t + (self.epoch or 0.0)
        if failure:
            self.n_held += 1
            self.last_status = f"holding last good estimate ({failure})"
            self.solver = None
            if self.last_good is None:
                return None
            held = Estimate(**{**self.last_good.__dict__, "status": self.last_status, "source": "hold"})
            return self._with_rls_payload(held) if self.rls_pi is not None else held
        if generation != self._generation:  # the payload was reset during this solve
            self.solver = None
            return None
        self.iterations.append(result.iterations)
        est = self._estimate(solver, result, nodes[-1], elapsed)
        self.theta = result.theta.copy()
        self.last_good = est
        self.last_status = "ok"
        missed_deadline = cold and result.status == "max_time"
        if self.rls_pi is not None and (self.payload_mode == "rls" or missed_deadline):
            return self._with_rls_payload(est)  # rls mode, or oe+rls fallback when a cold solve ran out of time
        return est

    def _with_rls_payload(self, est: Estimate) -> Estimate:
        """The estimate with the RLS payload (and its covariance) in place of the optimal estimator's."""
        pi = self.rls_pi
        return Estimate(
            **{
                **est.__dict__,
                "payload_pi": pi,
                "payload_cov": self.rls.covariance(),
                "combined_pi": self.robot.combined_pi(pi),
                "source": "rls",
            }
        )

    def _check(self, result) -> str:
        if not np.isfinite(result.cost) or not np.all(np.isfinite(result.theta)):
            return "non-finite solution"
        if not all(np.all(np.isfinite(x)) for x in result.xs):
            return "non-finite trajectory"
        if not is_physically_consistent(result.pi) or result.pi[0] > MAX_PAYLOAD_MASS:
            return "non-physical payload"
        return ""

    # ------------------------------------------------------------------ outputs
    def _estimate(self, solver: MCOESolver, result, node, elapsed: float) -> Estimate:
        robot = self.robot
        problem = solver.problem
        ndx, nv, nq = problem.ndx, robot.nv, robot.nq
        cov = self._terminal_covariance(solver)
        x = result.xs[-1]
        quat = x[3:7] / np.linalg.norm(x[3:7])
        rot = pin.Quaternion(quat[3], quat[0], quat[1], quat[2]).toRotationMatrix()
        jac = np.zeros((6, 6))
        jac[:3, :3] = rot
        jac[3:, 3:] = rot
        pose_cov = jac @ cov[:6, :6] @ jac.T
        twist_cov = cov[nv : nv + 6, nv : nv + 6]
        theta_cov = cov[ndx:, ndx:]
        dpi = self.param.jacobian(result.theta)
        payload_cov = dpi @ theta_cov @ dpi.T
        self.theta_info = np.linalg.pinv(theta_cov, rcond=1e-12, hermitian=True)
        return Estimate(
            t=node.t + (self.epoch or 0.0),
            position=x[:3].copy(),
            quat_xyzw=quat.copy(),
            linear_velocity=x[nq : nq + 3].copy(),
            angular_velocity=x[nq + 3 : nq + 6].copy(),
            pose_cov=pose_cov,
            twist_cov=twist_cov,
            payload_pi=result.pi.copy(),
            payload_cov=payload_cov,
            combined_pi=robot.combined_pi(result.pi),
            theta=result.theta.copy(),
            theta_cov=theta_cov,
            contacts=tuple(node.contacts),
            source="oe",
            status="ok",
            solve={
                "iterations": result.iterations,
                "cost": result.cost,
                "converged": result.converged,
                "solve_time": elapsed,
                "status": result.status,
            },
        )

    @staticmethod
    def _terminal_covariance(solver: MCOESolver) -> np.ndarray:
        """Covariance over (dx_N, dtheta) from the GN marginal of the whole window (see module docstring)."""
        problem = solver.problem
        n = problem.N
        prior = solver.marginal_prior(n, relinearize=False)  # the solve's last linearisation (no extra cost)
        _, _, hess = prior.linearize(problem.state, solver.xs[n], solver.theta)
        nd = problem.nodes[n]
        jr = np.hstack([nd.data.Rx, nd.Rth])
        hess = hess + jr.T @ jr
        return np.linalg.pinv(0.5 * (hess + hess.T), rcond=1e-12, hermitian=True)

    def diagnostics(self) -> tuple[int, str, dict]:
        """(level 0 OK / 1 WARN / 2 ERROR, message, key values) for /diagnostics."""
        times = np.array(self.solve_times[-200:]) if self.solve_times else np.zeros(1)
        values = {
            "ticks": self.n_ticks,
            "held_ticks": self.n_held,
            "solve_time_p50_ms": f"{1e3 * np.percentile(times, 50):.2f}",
            "solve_time_p99_ms": f"{1e3 * np.percentile(times, 99):.2f}",
            "iterations_last": self.iterations[-1] if self.iterations else 0,
            "cost_last": f"{self.last_good.solve['cost']:.6g}" if self.last_good else "n/a",
            "window_fill": f"{len(self.window.nodes)}/{self.window.n_nodes}",
            "samples_accepted": int(sum(self.stats.accepted.values())),
            "samples_rejected": self.stats.n_rejected,
            "samples_repaired": self.stats.n_repaired,
            "window_restarts": self.window.restarts,
            "rls_mass_kg": f"{self.rls_pi[0]:.3f}" if self.rls_pi is not None else "n/a",
            "contact_phase": "".join(
                "1" if c else "0" for c in (self.window.nodes[-1].contacts if self.window.nodes else ())
            ),
            "last_error": self.stats.last_error,
        }
        for reason, count in sorted(self.stats.rejected.items()):
            values[f"rejected_{reason}"] = count
        level = 0
        message = self.last_status
        if self.last_status != "ok":
            level = 1
        if self.stats.n_rejected:
            level = max(level, 1)
        return level, message, values
