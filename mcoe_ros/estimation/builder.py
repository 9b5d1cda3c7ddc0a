"""Window knots -> estimation problem: the parameter vector, interval models per contact phase, inputs, initial
guesses, shifts.

Parameters theta = [body (10, inertial manifold) | actuator (n, log scale) | gyro bias (3) | accelerometer bias (3;
not with ``imu_bias.accelerometer`` false) | leg mass (1, log scale)] (:class:`EstimationParameters`, blocks as
configured); pi = [payload (10) | the same blocks on their natural scale (the leg mass as the scale k = exp(theta)
of the URDF legs)]: with the 'combined' body the manifold maps theta to the whole trunk + payload and pi holds its
difference to the URDF trunk.

A knot's interval model is chosen by its contact set (with ``dynamics.model`` 'soft' every foot is a soft contact and
there is no impulse map; the contact set then only selects the zero-velocity pseudo-measurements): stance feet are rigid
point contacts; a foot that lands (in contact now, not at the previous knot) is landed over time by default
(``dynamics.landing_damping`` > 0: its contact damps the foot's velocity, J a = -γ - k_d J v, for its first
``dynamics.landing_time`` of stance, no impulse; the feet the contact detector starts on are not landings,
:attr:`GridKnot.landed`), or with ``dynamics.landing_damping`` 0 starts a reset interval with the impulse map applied
to the whole new stance set (so feet already down stay still through the impact); and every settled stance
foot that is not landing (:meth:`mcoe_ros.multibody.contact.ContactDetector.settled`: loaded, and past its touch-down
transient) gets a zero-velocity pseudo-measurement (leg odometry). Inputs: u = joint torques, z = [q_j, v_j, gyro,
quat wxyz, acc, 0 (stance foot velocities)] (the layout of
:func:`mcoe_ros.multibody.measurements.default_measurements`).

Process noise per interval (``process_model`` 'velocity'): diagonal on the velocities, ``noise.process_velocity``
(base linear block ``process_base_linear`` if set); the joint velocities get ``process_joint_velocity`` on every
interval, or with ``noise.touchdown_transient`` > 0 only on the intervals of a touch-down transient
(:func:`transient_knots`: from a knot where the dynamics starts holding a foot, for that long), where the rigid
contact holds a landing foot that still slides and sinks, and ``process_velocity`` elsewhere (a documented model
choice, docs/realism.md run 5); with ``noise.settled_joint_velocity`` > 0, an interval whose first knot has every
foot settled (:attr:`GridKnot.measured`: down and loaded) gets that value on the joints instead (docs/realism.md,
session 11), and so does, with ``noise.settled_time`` > 0, one whose first knot has every foot down for that long
(:meth:`GridKnot.down_for`, session 12).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pinocchio as pin

from mcoe_ros.estimation.config import EstimatorConfig, RobustConfig
from mcoe_ros.estimation.window import GridKnot
from mcoe_ros.multibody.actuator import ActuatorModel, ParameterLayout
from mcoe_ros.multibody.imu import base_motion, imu_mount
from mcoe_ros.multibody.inertia import OffsetParametrization, make_parametrization, pi_from_com
from mcoe_ros.multibody.interval import IntervalModelCache, MultibodyIntervalModel
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
from mcoe_ros.multibody.soft_contact import SoftContactModel
from mcoe_ros.ocp.problem import (
    ArrivalPrior,
    EstimationProblem,
    EuclideanParameters,
    PositiveParameters,
    StackedParametrization,
)
from mcoe_ros.ocp.robust import RobustCost, RobustLoss


class EstimationParameters:
    """The estimated parameters and their prior (see module docstring).

    Attributes: ``layout`` (:class:`ParameterLayout` of pi), ``actuator`` (:class:`ActuatorModel` or None),
    ``parametrization`` (:class:`StackedParametrization` theta -> pi), ``prior_theta`` (ntheta,),
    ``prior_info`` (ntheta, ntheta) diagonal information, ``body_offset`` (10,) (URDF trunk for 'combined', else 0),
    ``bias_indices`` / ``bias_walk`` (random-walk variance rate per index, 1/s) of the IMU biases in theta.
    """

    def __init__(self, robot: RobotModel, config: EstimatorConfig):
        pay, act, bias = config.payload, config.actuator, config.imu_bias
        self.actuator = ActuatorModel(robot, act.grouping, act.coulomb_smoothing) if act.enabled else None
        n_act = self.actuator.n_params if self.actuator else 0
        self.layout = ParameterLayout(
            n_actuator=n_act,
            gyro_bias=bias.enabled,
            acc_bias=bias.enabled and bias.accelerometer,
            leg_mass=pay.leg_mass.enabled,
        )
        #: URDF mass of the bodies the leg mass scale multiplies, kg (the published deviation is (k - 1) of it)
        self.leg_mass = robot.leg_mass
        body = make_parametrization(pay.parametrization)
        self.body_offset = robot.nominal_body_pi() if pay.body == "combined" else np.zeros(10)
        if pay.body == "combined":
            body = OffsetParametrization(body, self.body_offset)
        parts, mean, std = [body], [], []
        prior_payload = pi_from_com(pay.prior_mass, np.array(pay.prior_com), np.diag(pay.prior_inertia))
        mean.append(body.theta(prior_payload))
        std.append(np.asarray(pay.prior_sigma, dtype=float))
        if self.actuator:
            g = self.actuator.n_groups
            parts.append(PositiveParameters(n_act))
            mean.append(np.log(np.repeat([act.prior_viscous, act.prior_coulomb, act.prior_rotor_inertia], g)))
            std.append(np.full(n_act, act.log_sigma))
        self.bias_indices = np.zeros(0, dtype=int)
        self.bias_walk = np.zeros(0)
        if bias.enabled:
            parts.append(EuclideanParameters(3))
            mean.append(np.zeros(3))
            std.append(np.full(3, bias.gyro_prior_std))
            walk = [np.full(3, bias.gyro_random_walk**2)]
            if bias.accelerometer:
                parts.append(EuclideanParameters(3))
                mean.append(np.zeros(3))
                std.append(np.full(3, bias.accelerometer_prior_std))
                walk.append(np.full(3, bias.accelerometer_random_walk**2))
            stop = (self.layout.acc or self.layout.gyro).stop
            self.bias_indices = np.arange(self.layout.gyro.start, stop)
            self.bias_walk = np.concatenate(walk)
        if pay.leg_mass.enabled:
            parts.append(PositiveParameters(1))
            mean.append(np.zeros(1))
            std.append(np.array([pay.leg_mass.prior_sigma]))
        self.parametrization = StackedParametrization(parts)
        self.prior_theta = np.concatenate(mean)
        self.prior_info = np.diag(np.concatenate(std) ** -2.0)

    def body_pi(self, pi: np.ndarray) -> np.ndarray:
        """The estimated physically consistent body (10,) of a pi: payload + offset."""
        return pi[:10] + self.body_offset


def robust_cost(config: RobustConfig) -> RobustCost | None:
    """The problem's :class:`RobustCost` for ``config`` (None when the loss is quadratic): one group per stance
    foot's zero-velocity and base-height pseudo-measurement (``contact``), per IMU/encoder measurement
    (``sensors``), and the process noise of each interval (``process``)."""
    if config.loss == "quadratic" or not (config.process or config.contact or config.sensors):
        return None
    loss = RobustLoss(config.loss, config.threshold)

    def groups(model: MultibodyIntervalModel) -> list[tuple[slice, RobustLoss]]:
        out = []
        for meas, sl in zip(model.measurements, model.r_slices, strict=True):
            if config.contact if isinstance(meas, (ContactVelocity, BaseHeight)) else config.sensors:
                out.append((sl, loss))
        return out

    return RobustCost(loss if config.process else None, groups)


def soft_contact_options(config: EstimatorConfig) -> dict:
    """Interval-model options of ``config.dynamics`` ({} for the rigid model; the soft contact model and its Newton
    budget for 'soft', see :mod:`mcoe_ros.multibody.soft_dynamics`)."""
    dyn = config.dynamics
    if dyn.model == "rigid":
        return {"kd": dyn.landing_damping} if dyn.landing_damping > 0.0 else {}
    if config.actuator.enabled:
        raise ValueError("dynamics.model: the soft contact model needs actuator.enabled false")
    contact = SoftContactModel(
        dyn.soft_compliance_normal,
        dyn.soft_compliance_tangential,
        dyn.soft_time_constant,
        dyn.soft_smoothing,
        dyn.ground_height,
    )
    return {"soft_contact": contact, "max_iter": dyn.newton_max_iterations}


def transient_knots(held: Sequence[Sequence[bool]], length: int, known: Sequence[bool] | None = None) -> np.ndarray:
    """(n,) bool: knot i of a run of knots with held-foot flags ``held`` (n, nfeet) lies in a touch-down transient,
    i.e. a foot is held at some knot j in (i - length, i] and was not at knot j - 1, whose flags are a detection
    (``known`` (n,), None: all; knot 0 has no predecessor: no touch-down there; the detector's first knot after a
    (re)start is not a detection, :attr:`GridKnot.detector_start`)."""
    flags = np.asarray(held, dtype=bool).reshape(len(held), -1)
    out = np.zeros(len(flags), dtype=bool)
    if length <= 0 or len(flags) < 2:
        return out
    landing = np.any(flags[1:] & ~flags[:-1], axis=1)
    if known is not None:
        landing &= np.asarray(known, dtype=bool)[:-1]
    for j in np.flatnonzero(landing) + 1:
        out[j : j + length] = True
    return out


class ProblemBuilder:
    """Builds and shifts the window's estimation problem (see module docstring)."""

    def __init__(self, robot: RobotModel, config: EstimatorConfig, parameters: EstimationParameters):
        self.robot = robot
        noise = config.noise
        #: a landing over time (dynamics.landing_damping > 0): damped contacts for landing_time s, no impulse
        self.landing_time = config.dynamics.landing_time if config.dynamics.landing_damping > 0.0 else 0.0
        self.impulse = config.grid.impulse_on_touchdown  #: the detector's (re)start knot projects its stance feet
        self.touchdown_impulse = self.impulse and self.landing_time == 0.0
        self.rigid_contacts = config.dynamics.rigid_contacts
        self.parameters = parameters
        layout = parameters.layout
        #: m, the contact points' depth below the foot frames (dynamics.rolling_radius; rigid model only, 0 = off)
        self.rolling_radius = config.dynamics.rolling_radius if config.dynamics.model == "rigid" else 0.0
        cache_options = dict(
            foot_velocity_std=noise.foot_velocity,
            foot_height_std=noise.stance_foot_height,
            actuator=parameters.actuator,
            **(
                {"rolling_feet": True, "rolling_contacts": config.dynamics.rolling_contacts}
                if self.rolling_radius > 0.0
                else {}
            ),
            layout=layout,
            **soft_contact_options(config),
        )
        #: models by (realised, gait): the accelerometer measures the realised acceleration (``realised``, with
        #: noise.accelerometer_realised only, see :meth:`realised`); the orientation reading weighs
        #: noise.orientation_gait while a foot is in the air (``gait``), noise.orientation while every foot is down
        self._caches: dict[tuple[bool, bool], IntervalModelCache] = {}
        self._cache_options = cache_options
        self._noise, self._layout, self._dt = noise, layout, config.grid.dt
        self.realised_standing_time = noise.realised_standing_time
        self.realised_flight_time = noise.realised_flight_time
        self.accelerometer_realised = noise.accelerometer_realised
        nv = robot.nv
        #: process-noise coordinates (None: all), information W (diagonal) and initial arrival information
        self.noise_model = None
        #: derivative of the noise model's covariance in pi (None: frozen in the parameters, see
        #: NoiseConfig.joint_torque_weight)
        self.noise_derivative = None
        #: torque_std (nj,) N m of the state-dependent noise model (on top of each interval's diagonal noise), for the
        #: compiled solver
        self.torque_noise: np.ndarray | None = None
        #: intervals of a touch-down transient after the knot that starts holding a foot (0: none, see module doc)
        self.transient_length = 0
        self.settled_info: np.ndarray | None = None
        self.settled_time = noise.settled_time  #: s every foot down for an interval to count as settled (0: off)
        self.contact_noise = 0.0
        if noise.process_model == "velocity":
            self.noise_dims = np.arange(nv, 2 * nv)
            self.noise_info = np.full(nv, noise.process_velocity**-2.0)
            if noise.process_base_linear > 0.0 and robot.nu_base:
                self.noise_info[:3] = noise.process_base_linear**-2.0
            #: diagonal information on the intervals of a touch-down transient
            self.transient_info = self.noise_info.copy()
            if noise.process_joint_velocity > 0.0:
                self.transient_info[robot.nu_base :] = noise.process_joint_velocity**-2.0
            if noise.touchdown_transient > 0.0:
                # at most the window less a tick: the touch-down of every new interval's transient is still in the
                # window at the shift (a shorter window shortens the transient)
                grid = config.grid
                self.transient_length = min(
                    int(round(noise.touchdown_transient / grid.dt)), grid.n_intervals - grid.tick_knots
                )
            else:  # every interval
                self.noise_info = self.transient_info
            if noise.settled_joint_velocity > 0.0:
                #: diagonal information on an interval whose first knot has every foot settled
                self.settled_info = self.noise_info.copy()
                self.settled_info[robot.nu_base :] = noise.settled_joint_velocity**-2.0
            #: m/s², white noise on each stance foot's constraint acceleration (0: none; Python solver only)
            self.contact_noise = noise.contact_acceleration
            if noise.joint_torque > 0.0 or noise.contact_acceleration > 0.0:
                torque_std = np.full(robot.nj, noise.joint_torque)
                contact_std = noise.contact_acceleration

                def noise_model(knot) -> np.ndarray:
                    dyn = knot.model.dynamics
                    cov = dyn.velocity_noise_covariance(knot.data.dyn, torque_std, 0.0, contact_std)
                    return np.linalg.inv(cov + np.linalg.inv(knot.W_base))

                self.noise_model = noise_model
                self.torque_noise = torque_std
                if noise.joint_torque_weight == "parametric":

                    def noise_derivative(knot) -> np.ndarray:
                        dyn = knot.model.dynamics
                        return dyn.velocity_noise_covariance_derivative(knot.data.dyn, torque_std, contact_std)

                    self.noise_derivative = noise_derivative
        else:
            self.noise_dims = None
            self.noise_info = np.r_[
                np.full(nv, noise.process_position**-2.0), np.full(nv, noise.process_velocity**-2.0)
            ]
            self.transient_info = self.noise_info
        self.robust = robust_cost(config.robust)
        self.foot_height_std = noise.foot_height  #: m, 0 = no ground-height pseudo-measurement
        self.height_walk = noise.height_random_walk  #: m/sqrt(s), leg-odometry height random walk
        self.ground_height = config.dynamics.ground_height  #: m, odometry frame
        self.arrival_info = np.r_[np.full(nv, noise.arrival_position**-2.0), np.full(nv, noise.arrival_velocity**-2.0)]
        if noise.arrival_tilt > 0.0:  # the base's rotation about its own x and y (tangent 3:5): roll and pitch
            self.arrival_info[3:5] = noise.arrival_tilt**-2.0
        self._kin_data = robot.create_data()  # solve-thread scratch
        self._mount = imu_mount(robot)

    # ---------------------------------------------------------------- models and inputs
    def interval_model(
        self,
        contacts: Sequence[bool],
        prev_contacts: Sequence[bool] | None,
        settled: Sequence[bool] | None = None,
        realised: bool = False,
        stance_time: Sequence[float] | None = None,
        start: bool = False,
        landed: Sequence[bool] | None = None,
    ) -> MultibodyIntervalModel:
        """Model of a knot with contact flags ``contacts`` after a knot with ``prev_contacts`` (None: no impulse);
        only the ``settled`` stance feet (None: all) get the zero-velocity pseudo-measurement; ``realised``: its
        accelerometer measures the realised acceleration (with ``noise.accelerometer_realised`` only); with the landing
        damping, the stance feet that ``landed`` (None: all) and are down for less than ``dynamics.landing_time``
        (``stance_time`` s per foot; None: not known, none) have damped contacts (the feet the detector starts on did
        not land: the start interval's impulse projects them); ``start``: the detector's (re)start interval, whose
        stance feet get the impulse (their velocities projected to zero) whatever the landing model."""
        feet = self.robot.foot_names
        stance = tuple(f for f, c in zip(feet, contacts, strict=True) if c)
        landing = (
            ()
            if prev_contacts is None
            else tuple(f for f, c, p in zip(feet, contacts, prev_contacts, strict=True) if c and not p)
        )
        quiet = set(feet) if settled is None else {f for f, s in zip(feet, settled, strict=True) if s}
        measured = tuple(f for f in stance if f not in landing and f in quiet)
        models = self.models(realised, not all(contacts))
        damped = ()
        if self.landing_time > 0.0 and stance_time is not None:
            down = landed if landed is not None else contacts
            damped = tuple(
                f
                for f, c, s, d in zip(feet, contacts, stance_time, down, strict=True)
                if c and d and s < self.landing_time - 1e-9
            )
        impulse = self.impulse if start else self.touchdown_impulse
        return models[stance, stance if landing and impulse else (), measured, damped]

    def models(self, realised: bool, gait: bool) -> IntervalModelCache:
        """The interval models whose accelerometer measures the realised acceleration (``realised``, with
        ``noise.accelerometer_realised``; else the model's) and whose orientation reading weighs
        ``noise.orientation_gait`` (``gait``: a foot in the air; 0 = ``noise.orientation``) or ``noise.orientation``."""
        noise = self._noise
        realised = realised and self.accelerometer_realised
        std = (noise.orientation_gait or noise.orientation) if gait else noise.orientation
        key = (realised, std != noise.orientation)
        cache = self._caches.get(key)
        if cache is None:
            robot, layout = self.robot, self._layout
            measurements = [
                JointPosition(robot, std=noise.joint_position),
                JointVelocity(robot, std=noise.joint_velocity),
                ImuAngularVelocity(robot, std=noise.gyro, bias=layout.gyro),
                ImuOrientation(robot, std=std),
                ImuSpecificForce(robot, std=noise.accelerometer, bias=layout.acc, realised=realised),
            ]
            cache = self._caches[key] = IntervalModelCache(robot, self._dt, measurements, **self._cache_options)
        return cache

    def realised(self, knot: GridKnot) -> bool:
        """Whether the interval from ``knot`` has the realised-acceleration accelerometer: with
        ``noise.accelerometer_realised``, when every foot has been down for ``noise.realised_standing_time`` (0:
        always), or, with ``noise.realised_flight_time`` > 0, in a flight and for that long after it
        (:attr:`GridKnot.since_flight`). Where the process noise also carries the rigid contacts' errors (feet that
        land, sink, roll and lift in a gait) the accelerometer, bound to it, would pass them to the payload
        (docs/realism.md, sessions 15-16); after a flight's landing it keeps the base on the IMU instead of on feet
        that the rigid contacts stop at once while they still sink (docs/localisation.md, session 21)."""
        if not self.accelerometer_realised:
            return False
        if self.realised_flight_time > 0.0 and knot.since_flight < self.realised_flight_time - 1e-9:
            return True
        return self.realised_standing_time <= 0.0 or all(knot.down_for(self.realised_standing_time))

    def phase_models(
        self, knots: Sequence[GridKnot], prev_contacts: Sequence[bool] | None
    ) -> tuple[list[MultibodyIntervalModel], MultibodyIntervalModel]:
        """Running models (one per interval) and the terminal model of a run of knots. A contact detector's
        (re)start knot (:attr:`GridKnot.detector_start`) has the detector's initial no-contact flags, which say
        nothing about the feet: its interval takes the next knot's stance feet, starting with their impulse (their
        velocities projected to zero: the robot stands on them), and the next knot has no landing. (Before: a flight
        interval at the start knot and a landing impulse at the next one, whose velocity change through M(θ) biased
        the payload of slow motions: the 4 s clean sway 3.28 % / 56 mm, now 1.12 % / 28 mm; docs/realism.md run 6.)"""
        running = []
        for i, knot in enumerate(knots[:-1]):
            held = self.held(knots[i + 1] if knot.detector_start else knot)
            if knot.detector_start:  # the impulse of its stance feet
                prev_contacts = (False,) * len(held)
            own = knots[i + 1] if knot.detector_start else knot
            running.append(
                self.interval_model(
                    held,
                    prev_contacts,
                    knot.measured,
                    self.realised(knot),
                    own.stance_time,
                    knot.detector_start,
                    own.landed,
                )
            )
            prev_contacts = held
        return running, self.interval_model(self.held(knots[-1]), None, knots[-1].measured)

    def held(self, knot: GridKnot) -> tuple[bool, ...]:
        """The stance feet of a knot that the rigid dynamics holds still (``dynamics.rigid_contacts``)."""
        if self.rigid_contacts == "settled" and knot.settled is not None:
            return knot.settled
        if self.rigid_contacts == "delayed" and knot.aged is not None:
            return knot.aged
        if self.rigid_contacts == "unloading" and knot.aged is not None and knot.settled is not None:
            return tuple(c and (not a or s) for c, a, s in zip(knot.contacts, knot.aged, knot.settled, strict=True))
        return knot.contacts

    def knot_inputs(self, knot: GridKnot, model: MultibodyIntervalModel) -> tuple[np.ndarray, np.ndarray]:
        """(u, z) of a grid knot for its model (see module docstring); a :class:`BaseHeight` row's z is the base
        height at which its foot lies on the ground plane (``dynamics.ground_height``), from the knot's encoders and
        IMU orientation."""
        imu = knot.imu
        z = np.zeros(model.nz)
        i = 0
        for part in (knot.joint.q, knot.joint.dq, imu.gyro, imu.quat, imu.acc):
            z[i : i + len(part)] = part
            i += len(part)
        heights = [
            (m, zs) for m, zs in zip(model.measurements, model.z_slices, strict=True) if isinstance(m, BaseHeight)
        ]
        rolling = model.nu > self.robot.nj
        if not (heights or rolling):
            return knot.joint.tau, z
        robot, data = self.robot, self._kin_data
        q = robot.neutral()
        q[3:7] = base_motion(self._mount, imu.quat, imu.gyro).quat_xyzw
        q[robot.nq - robot.nj :] = knot.joint.q
        pin.framesForwardKinematics(robot.model, data, q)
        for meas, zs in heights:
            z[zs] = self.ground_height - data.oMf[meas.frame_id].translation[2]
        if not rolling:
            return knot.joint.tau, z
        u = np.empty(model.nu)
        u[: robot.nj] = knot.joint.tau
        for k, fid in enumerate(robot.foot_frame_ids):  # the rolling foot's contact: rolling_radius straight down
            u[robot.nj + 3 * k : robot.nj + 3 * k + 3] = data.oMf[fid].rotation[2] * -self.rolling_radius
        return u, z

    def interval_noise(self, knots: Sequence[GridKnot], k: int) -> list[np.ndarray]:
        """Diagonal process-noise information (nw,) of each of the last k intervals of a run of knots (the window,
        k <= len(knots) - 1): ``settled_info`` on an interval whose first knot has every foot settled (with
        ``noise.settled_joint_velocity``; or down for ``noise.settled_time``), else ``transient_info`` on a touch-down
        transient of the held feet (:func:`transient_knots`) and on an interval whose first knot holds every foot,
        ``noise_info`` elsewhere (a foot in the air away from a touch-down: a gait's swing and stance). An interval's
        noise depends on its own and earlier knots only: a shift's new intervals are the tail of the window's
        schedule."""
        n = len(knots)
        if not 0 <= k < n:
            raise ValueError(f"need 0 <= k < {n} intervals")
        if self.transient_length == 0:
            out = [self.noise_info] * k
        else:
            run = knots[max(0, n - 1 - k - self.transient_length) :]  # the touch-downs that reach the k intervals
            known = [not kn.detector_start for kn in run]
            held = [self.held(kn) for kn in run]
            loose = transient_knots(held, self.transient_length, known)[-k - 1 : -1]
            # every foot held (standing, a sway): loose as without the transient rule
            loose |= np.array([all(h) for h in held[-k - 1 : -1]], dtype=bool)
            out = [self.transient_info if t else self.noise_info for t in loose]
        if self.settled_info is not None:
            down = self.settled_time > 0.0
            for j, knot in enumerate(knots[n - 1 - k : n - 1]):
                if all(knot.measured) or (down and all(knot.down_for(self.settled_time))):
                    out[j] = self.settled_info
        return out

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
        self,
        knots: Sequence[GridKnot],
        position: np.ndarray,
        theta: np.ndarray,
        theta_info: np.ndarray,
        base: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> tuple[EstimationProblem, list[np.ndarray]]:
        """New problem over the window (base at ``position``, payload prior (theta, information)) and its state
        guesses from the sensors; ``base``: per knot (position m, linear velocity m/s, world axes) guesses of the
        base instead (e.g. the input-rate odometry), orientation and joints still from the sensors."""
        running, terminal, inputs, prior, xs = self.fresh_parts(knots, position, theta, theta_info, base)
        return self.problem(running, terminal, inputs, prior, self.interval_noise(knots, len(running))), xs

    def problem(
        self,
        running: Sequence[MultibodyIntervalModel],
        terminal: MultibodyIntervalModel,
        inputs: Sequence[tuple[np.ndarray, np.ndarray]],
        prior: ArrivalPrior,
        noise_info: Sequence[np.ndarray],
    ) -> EstimationProblem:
        """The Python problem of :meth:`fresh_parts`' models, inputs (N+1 (u, z)) and prior, with the intervals'
        noise information ``noise_info`` (N of (nw,), :meth:`interval_noise`)."""
        param = self.parameters.parametrization
        problem = EstimationProblem(
            running,
            terminal,
            prior,
            param,
            list(noise_info),
            self.noise_dims,
            self.noise_model,
            self.robust,
            self.noise_derivative,
        )
        for k, (u, z) in enumerate(inputs):
            problem.set_knot(k, u, z)
        return problem

    def fresh_parts(
        self,
        knots: Sequence[GridKnot],
        position: np.ndarray,
        theta: np.ndarray,
        theta_info: np.ndarray,
        base: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> tuple[list, MultibodyIntervalModel, list, ArrivalPrior, list[np.ndarray]]:
        """(running models, terminal model, inputs (N+1 (u, z)), arrival prior, state guesses) of
        :meth:`fresh_problem` without building the Python problem (whose per-knot data the compiled solver does not
        use)."""
        xs = [self.initial_state(k, position) for k in knots]
        if base is not None:
            nq = self.robot.nq
            for x, (p, v) in zip(xs, base, strict=True):
                q = x[3:7]
                rot = pin.Quaternion(q[3], q[0], q[1], q[2]).toRotationMatrix()
                x[:3], x[nq : nq + 3] = p, rot.T @ v
        running, terminal = self.phase_models(knots, None)
        prior = self.with_ground_height(self.arrival_prior(xs[0], theta, theta_info), self.arrival_stance(knots), 0.0)
        inputs = [self.knot_inputs(k, m) for k, m in zip(knots, [*running, terminal], strict=True)]
        return running, terminal, inputs, prior, xs

    def arrival_prior(self, x0: np.ndarray, theta: np.ndarray, theta_info: np.ndarray) -> ArrivalPrior:
        """The arrival prior of a problem built from scratch: x0 with the configured arrival information, the payload
        belief (theta, information), independent."""
        return ArrivalPrior.independent(x0, self.arrival_info, 2 * self.robot.nv, theta, theta_info)

    def stance_height_offset(self, q: np.ndarray, contacts: Sequence[bool]) -> float:
        """Mean height (m) of the stance feet's frames relative to the base origin, world axes, at configuration q
        (nq,) (orientation and joints of q; the base position does not enter)."""
        model, data = self.robot.model, self._kin_data
        q = q.copy()
        q[:3] = 0.0
        pin.framesForwardKinematics(model, data, q)
        feet = [f for f, c in zip(self.robot.foot_frame_ids, contacts, strict=True) if c]
        return float(np.mean([data.oMf[f].translation[2] for f in feet]))

    @staticmethod
    def arrival_stance(knots: Sequence[GridKnot]) -> tuple[bool, ...]:
        """The stance feet of a run's first knot for its ground-height term: a contact detector's (re)start knot
        says nothing about the feet (no contact until confirmed), so it takes the next knot's, as in
        :meth:`phase_models` (before: a window that began at the start had no ground term, e.g. the realism
        suite's first solve: docs/realism.md session 17)."""
        if knots[0].detector_start and len(knots) > 1:
            return knots[1].contacts
        return knots[0].contacts

    def with_ground_height(self, prior: ArrivalPrior, contacts: Sequence[bool], elapsed: float) -> ArrivalPrior:
        """``prior`` after ``elapsed`` s of height random walk and a flat-ground base-height pseudo-measurement at its
        arrival knot (``docs/localisation.md``); the prior unchanged when ``noise.foot_height`` is 0.

        1. Random walk (``noise.height_random_walk`` σ_w, m/√s): the base height of the prior's mean gets variance
           σ_w² ``elapsed`` along u, the tangent direction that moves the base origin vertically (u = R_WBᵀ e_z on the
           base's local translation; Woodbury as :meth:`ArrivalPrior.with_parameter_noise`). Leg odometry's height
           error grows with every step of soft feet (they sink into the ground and are still below their touch-down
           height when the stance ends); without it the prior's height information, which only accumulates,
           would soon outweigh every new ground measurement.
        2. Ground (``noise.foot_height`` σ, m): with stance feet in ``contacts`` (model foot order), the base height
           p_z = h_g − k, k = the mean height of the stance feet relative to the base at x̄_0 (orientation and joints,
           a fixed value here), h_g = ``dynamics.ground_height``: r(e) = (p_z(x̄_0 ⊕ e) + k − h_g)/σ, linear in e
           with J = uᵀ/σ; gradient += Jᵀ r_0, Hessian += Jᵀ J. Only the base height moves: no tilt, no joint, so
           the IMU and encoders are not bent to level the feet.
        The prior's consider sensitivity (IMU biases) is mapped as its gradient by 1. and unchanged by 2."""
        std = self.foot_height_std
        if std <= 0.0:
            return prior
        nq = self.robot.nq
        x_bar = prior.x_bar
        quat = x_bar[3:7]
        u = np.zeros(prior.hessian.shape[0])
        u[:3] = pin.Quaternion(quat[3], quat[0], quat[1], quat[2]).toRotationMatrix()[2]  # R_WB^T e_z
        hess, grad, sens = prior.hessian, prior.gradient, prior.sensitivity
        variance = self.height_walk**2 * elapsed
        if variance > 0.0:
            hu = hess @ u
            denom = 1.0 / variance + u @ hu
            hess = hess - np.outer(hu, hu) / denom
            grad = grad - hu * (u @ grad) / denom
            if sens is not None:  # the consider sensitivity is mapped as the gradient (ArrivalPrior.sensitivity)
                sens = sens - np.outer(hu, u @ sens) / denom
        if any(contacts):
            r0 = (x_bar[2] + self.stance_height_offset(x_bar[:nq], contacts) - self.ground_height) / std
            row = u / std
            hess = hess + np.outer(row, row)
            grad = grad + row * r0
        return ArrivalPrior(x_bar, prior.theta_bar, hess, grad, sens)

    def shift_arguments(self, knots: Sequence[GridKnot], k: int) -> tuple:
        """(running, terminal, inputs, terminal_input) for :meth:`mcoe_ros.ocp.solver.MCOESolver.shift` by the k
        newest knots of ``knots`` (the window after the new knots arrived)."""
        new = knots[-(k + 1) :]
        before = knots[-(k + 2)] if len(knots) >= k + 2 else None
        # the stance feet of the interval before (a detector start knot's are those of the knot after it)
        prev = None if before is None else self.held(new[0] if before.detector_start else before)
        running, terminal = self.phase_models(new, prev)
        inputs = [self.knot_inputs(n, m) for n, m in zip(new[:-1], running, strict=True)]
        return running, terminal, inputs, self.knot_inputs(new[-1], terminal)
