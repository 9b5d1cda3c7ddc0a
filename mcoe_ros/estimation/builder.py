"""Window knots -> estimation problem: interval models per contact phase, inputs, initial guesses, shifts.

A knot's interval model is chosen by its contact set: stance feet are rigid point contacts, a foot that lands
(in contact now, not at the previous knot) starts a reset interval with the impulse map applied to the whole new
stance set (so feet already down stay still through the impact), and every stance foot that is not landing gets a
zero-velocity pseudo-measurement (leg odometry). Inputs: u = joint torques, z = [q_j, v_j, gyro, quat wxyz, acc,
0 (stance foot velocities)] (the layout of :func:`mcoe_ros.multibody.measurements.default_measurements`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pinocchio as pin

from mcoe_ros.estimation.config import EstimatorConfig
from mcoe_ros.estimation.window import GridKnot
from mcoe_ros.multibody.imu import base_motion, imu_mount
from mcoe_ros.multibody.interval import IntervalModelCache, MultibodyIntervalModel
from mcoe_ros.multibody.measurements import (
    ImuAngularVelocity,
    ImuOrientation,
    ImuSpecificForce,
    JointPosition,
    JointVelocity,
)
from mcoe_ros.multibody.robot import RobotModel
from mcoe_ros.ocp.problem import ArrivalPrior, EstimationProblem


class ProblemBuilder:
    """Builds and shifts the window's estimation problem (see module docstring)."""

    def __init__(self, robot: RobotModel, config: EstimatorConfig, parametrization):
        self.robot = robot
        noise = config.noise
        self.impulse = config.grid.impulse_on_touchdown
        self.param = parametrization
        measurements = [
            JointPosition(robot, std=noise.joint_position),
            JointVelocity(robot, std=noise.joint_velocity),
            ImuAngularVelocity(robot, std=noise.gyro),
            ImuOrientation(robot, std=noise.orientation),
            ImuSpecificForce(robot, std=noise.accelerometer),
        ]
        self.models = IntervalModelCache(robot, config.grid.dt, measurements, foot_velocity_std=noise.foot_velocity)
        nv = robot.nv
        #: process-noise coordinates (None: all), information W (diagonal) and initial arrival information
        if noise.process_model == "velocity":
            self.noise_dims = np.arange(nv, 2 * nv)
            self.noise_info = np.full(nv, noise.process_velocity**-2.0)
        else:
            self.noise_dims = None
            self.noise_info = np.r_[
                np.full(nv, noise.process_position**-2.0), np.full(nv, noise.process_velocity**-2.0)
            ]
        self.arrival_info = np.r_[np.full(nv, noise.arrival_position**-2.0), np.full(nv, noise.arrival_velocity**-2.0)]
        self._kin_data = robot.create_data()  # solve-thread scratch
        self._mount = imu_mount(robot)

    # ---------------------------------------------------------------- models and inputs
    def interval_model(self, contacts: Sequence[bool], prev_contacts: Sequence[bool] | None) -> MultibodyIntervalModel:
        """Model of a knot with contact flags ``contacts`` after a knot with ``prev_contacts`` (None: no impulse)."""
        feet = self.robot.foot_names
        stance = tuple(f for f, c in zip(feet, contacts, strict=True) if c)
        landing = (
            ()
            if prev_contacts is None
            else tuple(f for f, c, p in zip(feet, contacts, prev_contacts, strict=True) if c and not p)
        )
        measured = tuple(f for f in stance if f not in landing)
        return self.models[stance, stance if landing and self.impulse else (), measured]

    def phase_models(
        self, knots: Sequence[GridKnot], prev_contacts: Sequence[bool] | None
    ) -> tuple[list[MultibodyIntervalModel], MultibodyIntervalModel]:
        """Running models (one per interval) and the terminal model of a run of knots."""
        running = []
        for knot in knots[:-1]:
            running.append(self.interval_model(knot.contacts, prev_contacts))
            prev_contacts = knot.contacts
        return running, self.interval_model(knots[-1].contacts, None)

    @staticmethod
    def knot_inputs(knot: GridKnot, model: MultibodyIntervalModel) -> tuple[np.ndarray, np.ndarray]:
        """(u, z) of a grid knot for its model (see module docstring)."""
        imu = knot.imu
        z = np.zeros(model.nz)
        i = 0
        for part in (knot.joint.q, knot.joint.dq, imu.gyro, imu.quat, imu.acc):
            z[i : i + len(part)] = part
            i += len(part)
        return knot.joint.tau, z

    # ---------------------------------------------------------------- initial guesses
    def initial_state(self, knot: GridKnot, position: np.ndarray) -> np.ndarray:
        """x from one knot's sensors: IMU orientation, encoders, base at ``position``, zero base velocity."""
        robot = self.robot
        base = base_motion(self._mount, knot.imu.quat, knot.imu.gyro)
        q = robot.neutral()
        q[:3] = position
        q[3:7] = base.quat_xyzw
        q[7:] = knot.joint.q
        v = np.zeros(robot.nv)
        v[3:6] = base.omega
        v[6:] = knot.joint.dq
        return np.concatenate([q, v])

    def standing_height(self, knot: GridKnot) -> float:
        """Base height that puts the lowest foot on z = 0."""
        x = self.initial_state(knot, np.zeros(3))
        data = self._kin_data
        pin.framesForwardKinematics(self.robot.model, data, x[: self.robot.nq])
        return -min(data.oMf[f].translation[2] for f in self.robot.foot_frame_ids)

    # ---------------------------------------------------------------- problems
    def fresh_problem(
        self, knots: Sequence[GridKnot], position: np.ndarray, theta: np.ndarray, theta_info: np.ndarray
    ) -> tuple[EstimationProblem, list[np.ndarray]]:
        """New problem over the window (base at ``position``, payload prior (theta, information)) and its state
        guesses from the sensors."""
        xs = [self.initial_state(k, position) for k in knots]
        running, terminal = self.phase_models(knots, None)
        ndx = 2 * self.robot.nv
        prior = ArrivalPrior.independent(xs[0], self.arrival_info, ndx, theta, theta_info)
        problem = EstimationProblem(running, terminal, prior, [self.param], self.noise_info, self.noise_dims)
        for k, knot in enumerate(knots):
            problem.set_knot(k, *self.knot_inputs(knot, problem.knots[k].model))
        return problem, xs

    def shift_arguments(self, knots: Sequence[GridKnot], k: int) -> tuple:
        """(running, terminal, inputs, terminal_input) for :meth:`mcoe_ros.ocp.solver.MCOESolver.shift` by the k
        newest knots of ``knots`` (the window after the new knots arrived)."""
        new = knots[-(k + 1) :]
        prev = knots[-(k + 2)].contacts if len(knots) >= k + 2 else None
        running, terminal = self.phase_models(new, prev)
        inputs = [self.knot_inputs(n, m) for n, m in zip(new[:-1], running, strict=True)]
        return running, terminal, inputs, self.knot_inputs(new[-1], terminal)
