"""The ROS parameter surface: every estimator parameter declared once (name, description, allowed choices).

Each parameter maps a flat dotted ROS name (``estimator.dt``) onto a field of the typed configuration
(:class:`NodeConfig`: the estimator's :class:`~mcoe_ros.estimation.config.EstimatorConfig` plus the adapters'
:class:`InputConfig` and :class:`OutputConfig`); its default *is* that field's default, so defaults are written once,
in the dataclasses. The ROS 2 node declares exactly these parameters (with descriptors); the bag replay reads the
same YAML (``/**: ros__parameters:`` layout of ``config/go1.yaml``: it applies under any namespace) through
:func:`load_params`; a test checks that the YAML and this table match key for key. Numeric parameters carry their
allowed range; :func:`check_config` cross-checks them. Units are SI; frames follow REP-103/REP-105.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace

from mcoe_ros.estimation.config import EstimatorConfig
from mcoe_ros.multibody.contact import CONTACT_METHODS

NODE_NAME = "mcoe_estimator"


@dataclass(frozen=True)
class InputConfig:
    """Sensor input of the adapters (ROS node, replay)."""

    mode: str = "low_state"  #: 'low_state' (Unitree LowState) or 'joint_states' (JointState + Imu)
    low_state_topic: str = "/low_state"
    low_state_period: float = 0.002  #: nominal LowState period, s (stamps headerless messages)
    joint_states_topic: str = "/joint_states"
    imu_topic: str = "/imu/data"
    torque_source: str = "tau_est"


@dataclass(frozen=True)
class OutputConfig:
    """Frames and output rates of the adapters."""

    odom_frame: str = "odom"
    publish_tf: bool = True
    #: publish each solve's window on solve/path (~1 ms of Python per solve for 101 poses)
    publish_window_path: bool = True
    diagnostics_period: float = 1.0  #: s
    stale_timeout: float = 5.0  #: s without an estimate (while input arrives) or without input: diagnostics ERROR


@dataclass(frozen=True)
class NodeThreadsConfig:
    """Threads of the ROS node."""

    solver_niceness: int = 10  #: nice increment of the solve thread (the sensor callbacks keep priority), 0..19
    #: SCHED_FIFO priority of the thread that spins the executor (sensor callbacks, input-rate odometry), 1..99;
    #: 0 keeps the normal scheduling. Needs CAP_SYS_NICE or an rtprio limit; without it the node says so and goes on
    sensor_priority: int = 10


@dataclass
class NodeConfig:
    """Everything the ROS node and the replay are configured with."""

    estimator: EstimatorConfig = field(default_factory=EstimatorConfig)
    input: InputConfig = field(default_factory=InputConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    node: NodeThreadsConfig = field(default_factory=NodeThreadsConfig)


def _get(obj, path: str):
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _ros_value(value):
    """Tuples (dataclass defaults) become lists (ROS array parameters)."""
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Param:
    """One ROS parameter: flat name, the :class:`NodeConfig` field it sets, description, allowed choices."""

    name: str
    path: str
    description: str
    choices: tuple = ()
    bounds: tuple = ()  #: (low, high, low_inclusive) for numbers (every element of a list); None = unbounded

    def range_text(self) -> str:
        """The allowed range as text ('> 0', '[0, 1]', ...), '' when unbounded."""
        if not self.bounds:
            return ""
        low, high, inclusive = self.bounds
        if high is None:
            return f"{'>=' if inclusive else '>'} {low:g}"
        return f"{'[' if inclusive else '('}{low:g}, {high:g}]"

    @property
    def default(self):
        return _ros_value(_get(_DEFAULT_CONFIG, self.path))


_DEFAULT_CONFIG = NodeConfig()

_TABLE: tuple[Param, ...] = (
    # robot model
    Param(
        "robot.urdf_path",
        "estimator.robot.urdf_path",
        "URDF of the robot; empty = Unitree Go1 from example-robot-data",
    ),
    Param("robot.base_frame", "estimator.robot.base_frame", "base link frame (child frame of odometry and TF)"),
    Param("robot.imu_frame", "estimator.robot.imu_frame", "frame of the IMU in the URDF"),
    Param("robot.foot_frames", "estimator.robot.foot_frames", "contact frames, model foot order"),
    Param(
        "robot.payload_frame",
        "estimator.robot.payload_frame",
        "frame the payload body is rigidly attached to (payload parameters frame)",
    ),
    Param("robot.armature", "estimator.robot.armature", "rotor inertia reflected on every actuated joint, kg m^2"),
    Param(
        "robot.foot_radius",
        "estimator.robot.foot_radius",
        "radius of the round feet around the foot frames (their rolling enters the published x, y covariance), m",
    ),
    Param(
        "robot.foot_contact_offset",
        "estimator.robot.foot_contact_offset",
        "contact point of every foot in its foot frame (x, y, z), m; [0, 0, 0] = the foot frame (a round foot's "
        "centre), the bottom of the foot sphere at the stance orientation = the point that rolls on the ground",
    ),
    Param("robot.hw_joint_names", "estimator.robot.hw_joint_names", "joint names in the hardware (LowState) order"),
    # inputs
    Param(
        "input.mode",
        "input.mode",
        "sensor input: Unitree LowState, or JointState + Imu",
        ("low_state", "joint_states"),
    ),
    Param(
        "input.low_state_topic",
        "input.low_state_topic",
        "Unitree LowState topic (no header: reception time is used)",
    ),
    Param(
        "input.low_state_period",
        "input.low_state_period",
        "nominal LowState period, s (stamps headerless messages, see io/convert.py)",
    ),
    Param(
        "input.joint_states_topic",
        "input.joint_states_topic",
        "sensor_msgs/JointState topic (position, velocity, effort)",
    ),
    Param(
        "input.imu_topic",
        "input.imu_topic",
        "sensor_msgs/Imu topic (orientation, angular velocity, specific force)",
    ),
    Param("input.torque_source", "input.torque_source", "joint torque input: measured/estimated torque", ("tau_est",)),
    Param(
        "input.use_foot_force",
        "estimator.contact.use_foot_force",
        "use LowState.foot_force as an extra contact cue",
    ),
    # frames and outputs
    Param("output.odom_frame", "output.odom_frame", "world-fixed odometry frame (REP-105)"),
    Param("output.publish_tf", "output.publish_tf", "broadcast odom -> base TF when tf2_ros is available"),
    Param(
        "output.publish_window_path",
        "output.publish_window_path",
        "publish each solve's window (its knots' poses, fixed-lag smoothed) on solve/path",
    ),
    Param("output.diagnostics_period", "output.diagnostics_period", "seconds between /diagnostics messages"),
    Param(
        "output.stale_timeout",
        "output.stale_timeout",
        "s without an estimate (while input arrives) or input before diagnostics say ERROR; span of 'recent' problems",
    ),
    Param(
        "node.solver_niceness",
        "node.solver_niceness",
        "nice increment of the node's solve thread: sensor callbacks and odometry keep the CPU when both compete",
    ),
    Param(
        "node.sensor_priority",
        "node.sensor_priority",
        "SCHED_FIFO priority of the executor thread (sensor callbacks, input-rate odometry) so that other processes "
        "do not preempt it mid-message; 0 = normal scheduling; needs CAP_SYS_NICE or an rtprio limit (else ignored)",
    ),
    # estimator grid and window
    Param("estimator.dt", "estimator.grid.dt", "estimator grid step, s"),
    Param("estimator.window", "estimator.grid.window", "sliding-window length, s"),
    Param("estimator.tick_period", "estimator.grid.tick_period", "sensor time between two solves, s"),
    Param("estimator.max_gap", "estimator.grid.max_gap", "a sensor gap longer than this restarts the window, s"),
    Param(
        "estimator.impulse_on_touchdown",
        "estimator.grid.impulse_on_touchdown",
        "apply the impulse (reset) map when a foot lands (only with dynamics.landing_damping 0) and to the feet the"
        " contact detector (re)starts on",
    ),
    Param(
        "estimator.payload_estimator",
        "estimator.payload.estimator",
        "payload estimator: optimal estimation, RLS, or both",
        ("oe", "rls", "oe+rls"),
    ),
    # noise models (standard deviations)
    Param("noise.joint_position", "estimator.noise.joint_position", "encoder noise, rad"),
    Param("noise.joint_velocity", "estimator.noise.joint_velocity", "joint velocity noise, rad/s"),
    Param("noise.gyro", "estimator.noise.gyro", "gyro noise, rad/s"),
    Param(
        "noise.orientation",
        "estimator.noise.orientation",
        "IMU orientation noise per knot (white equivalent of the IMU filter's correlated error), rad",
    ),
    Param(
        "noise.orientation_gait",
        "estimator.noise.orientation_gait",
        "IMU orientation noise per knot on the intervals with a foot in the air (gaits), rad; 0 = noise.orientation",
    ),
    Param("noise.accelerometer", "estimator.noise.accelerometer", "accelerometer noise, m/s^2"),
    Param(
        "noise.accelerometer_realised",
        "estimator.noise.accelerometer_realised",
        "the accelerometer measures the realised acceleration (model's plus process noise), not the model's alone",
    ),
    Param(
        "noise.realised_flight_time",
        "estimator.noise.realised_flight_time",
        "with noise.accelerometer_realised: also in a flight and for this long after its landing, s; 0 = off",
    ),
    Param(
        "noise.realised_standing_time",
        "estimator.noise.realised_standing_time",
        "with noise.accelerometer_realised: only on intervals whose first knot has every foot down for at least this"
        " long, s; 0 = every interval",
    ),
    Param(
        "noise.foot_velocity",
        "estimator.noise.foot_velocity",
        "stance-foot zero-velocity pseudo-measurement (leg odometry), m/s",
    ),
    Param(
        "noise.foot_height",
        "estimator.noise.foot_height",
        "flat-ground base-height pseudo-measurement (stance feet on dynamics.ground_height), m; 0 = off (stairs)",
    ),
    Param(
        "noise.stance_foot_height",
        "estimator.noise.stance_foot_height",
        "base height from each settled stance foot on dynamics.ground_height at every knot, m; 0 = off (stairs)",
    ),
    Param(
        "noise.height_random_walk",
        "estimator.noise.height_random_walk",
        "leg-odometry height random walk between two windows (with noise.foot_height), m/sqrt(s)",
    ),
    Param(
        "noise.odometry_slip_time",
        "estimator.noise.odometry_slip_time",
        "published horizontal position std added per touch-down per m/s of landing foot speed (odometry drift), s",
    ),
    Param(
        "noise.process_model",
        "estimator.noise.process_model",
        "process noise on the velocities only, or on positions and velocities",
        ("velocity", "full"),
    ),
    Param(
        "noise.process_position",
        "estimator.noise.process_position",
        "process noise on configuration per step, m or rad (process_model full)",
    ),
    Param(
        "noise.joint_torque",
        "estimator.noise.joint_torque",
        "white noise of the reported joint torques, N m (process_model velocity)",
    ),
    Param(
        "noise.joint_torque_weight",
        "estimator.noise.joint_torque_weight",
        "velocity noise of noise.joint_torque and noise.contact_acceleration: held fixed in the parameters at each"
        " linearisation, or differentiated in them too (parametric: no errors-in-variables bias)",
        ("frozen", "parametric"),
    ),
    Param(
        "noise.contact_acceleration",
        "estimator.noise.contact_acceleration",
        "white noise on each stance foot's contact-constraint acceleration, m/s^2 (rigid, Python solver only)",
    ),
    Param(
        "noise.process_velocity",
        "estimator.noise.process_velocity",
        "process noise on velocity per step, m/s or rad/s",
    ),
    Param(
        "noise.process_base_linear",
        "estimator.noise.process_base_linear",
        "process noise on the base linear velocity per step (unmodelled foot sliding), m/s; 0 = process_velocity",
    ),
    Param(
        "noise.process_joint_velocity",
        "estimator.noise.process_joint_velocity",
        "process noise on the joint velocities per step (unmodelled foot sliding), rad/s; 0 = process_velocity",
    ),
    Param(
        "noise.touchdown_transient",
        "estimator.noise.touchdown_transient",
        "time after a touch-down (impulse knot) whose intervals get process_joint_velocity, the other intervals with a"
        " foot in the air process_velocity on the joints (every foot held: process_joint_velocity), s; 0 ="
        " process_joint_velocity on every interval; at most estimator.window - tick_period (longer is shortened to it)",
    ),
    Param(
        "noise.settled_joint_velocity",
        "estimator.noise.settled_joint_velocity",
        "process noise on the joint velocities per step while every foot is settled (the torques' information kept),"
        " rad/s; 0 = as on the other intervals",
    ),
    Param(
        "noise.settled_time",
        "estimator.noise.settled_time",
        "an interval whose first knot has every foot down for at least this long gets noise.settled_joint_velocity"
        " too, loaded or not, s; 0 = settled (loaded) feet only",
    ),
    Param(
        "noise.arrival_position",
        "estimator.noise.arrival_position",
        "initial arrival prior on configuration, m or rad",
    ),
    Param(
        "noise.arrival_tilt",
        "estimator.noise.arrival_tilt",
        "initial arrival prior on the base roll and pitch (the IMU orientation reading's tilt), rad;"
        " 0 = arrival_position",
    ),
    Param(
        "noise.arrival_velocity",
        "estimator.noise.arrival_velocity",
        "initial arrival prior on velocity, m/s or rad/s",
    ),
    # payload prior and estimators
    Param(
        "payload.parametrization",
        "estimator.payload.parametrization",
        "inertial manifold of the payload",
        ("exp-eigval", "log-cholesky", "plain"),
    ),
    Param("payload.prior_mass", "estimator.payload.prior_mass", "prior payload mass, kg"),
    Param("payload.prior_com", "estimator.payload.prior_com", "prior payload CoM in the payload frame, m"),
    Param("payload.prior_inertia", "estimator.payload.prior_inertia", "prior principal moments about the CoM, kg m^2"),
    Param(
        "payload.prior_sigma",
        "estimator.payload.prior_sigma",
        "prior std of theta, manifold coordinates (exp-eigval: log m, h kg m, rotation rad, log second moments)",
    ),
    Param("payload.rls_window", "estimator.payload.rls_window", "RLS: Savitzky-Golay window for the accelerations, s"),
    Param(
        "payload.rls_alpha",
        "estimator.payload.rls_alpha",
        "RLS: strength of the log-det regulariser (prior: 1 kg box at the trunk)",
    ),
    Param(
        "payload.rls_forgetting",
        "estimator.payload.rls_forgetting",
        "RLS: directional forgetting factor mu (1 = no forgetting)",
    ),
    Param(
        "payload.body",
        "estimator.payload.body",
        "estimate trunk + payload as one body and report the difference to the URDF trunk, or a separate payload",
        ("combined", "payload"),
    ),
    Param(
        "payload.min_vertical_excitation",
        "estimator.payload.min_vertical_excitation",
        "RMS variation of the horizontal specific force below which a window's solve keeps the vertical first moment"
        " of the estimated body (standing still), m/s^2 (0: off)",
    ),
    Param(
        "payload.leg_mass.enabled",
        "estimator.payload.leg_mass.enabled",
        "estimate a leg mass scale (legs = k x URDF legs; Python solver only)",
    ),
    Param(
        "payload.leg_mass.prior_sigma",
        "estimator.payload.leg_mass.prior_sigma",
        "prior std of the log of the leg mass scale (relative leg mass deviation at 1 sigma)",
    ),
    Param(
        "payload.leg_mass.min_swing",
        "estimator.payload.leg_mass.min_swing",
        "fraction of a window's knots with a foot in the air below which its solve keeps the leg mass scale (0: never)",
    ),
    Param(
        "payload.leg_mass.min_swing_speed",
        "estimator.payload.leg_mass.min_swing_speed",
        "RMS joint speed of the legs in the air below which a window's solve keeps the leg mass scale, rad/s (0: off)",
    ),
    # actuator model
    Param("actuator.enabled", "estimator.actuator.enabled", "identify joint friction and rotor inertia"),
    Param(
        "actuator.grouping",
        "estimator.actuator.grouping",
        "one parameter set per joint type or per joint",
        ("type", "joint"),
    ),
    Param("actuator.coulomb_smoothing", "estimator.actuator.coulomb_smoothing", "Coulomb friction smoothing, rad/s"),
    Param("actuator.prior_viscous", "estimator.actuator.prior_viscous", "prior median viscous friction, N m s/rad"),
    Param("actuator.prior_coulomb", "estimator.actuator.prior_coulomb", "prior median Coulomb friction, N m"),
    Param(
        "actuator.prior_rotor_inertia",
        "estimator.actuator.prior_rotor_inertia",
        "prior median reflected rotor inertia on top of robot.armature, kg m^2",
    ),
    Param("actuator.log_sigma", "estimator.actuator.log_sigma", "prior std of the log of every actuator parameter"),
    Param("actuator.max_viscous", "estimator.actuator.max_viscous", "upper bound of the viscous friction, N m s/rad"),
    Param("actuator.max_coulomb", "estimator.actuator.max_coulomb", "upper bound of the Coulomb friction, N m"),
    Param(
        "actuator.max_rotor_inertia",
        "estimator.actuator.max_rotor_inertia",
        "upper bound of the reflected rotor inertia, kg m^2",
    ),
    Param(
        "actuator.min_excitation",
        "estimator.actuator.min_excitation",
        "RMS joint velocity of a window below which its solve keeps the actuator parameters, rad/s (0: never)",
    ),
    # IMU biases
    Param("imu_bias.enabled", "estimator.imu_bias.enabled", "estimate the IMU biases (the gyro's, see accelerometer)"),
    Param(
        "imu_bias.accelerometer",
        "estimator.imu_bias.accelerometer",
        "with enabled, estimate the accelerometer bias too (false: the gyro bias alone)",
    ),
    Param(
        "imu_bias.consider",
        "estimator.imu_bias.consider",
        "with the biases not estimated, add their prior uncertainty to the published covariances (consider analysis)",
    ),
    Param("imu_bias.gyro_prior_std", "estimator.imu_bias.gyro_prior_std", "initial gyro bias std, rad/s"),
    Param(
        "imu_bias.accelerometer_prior_std",
        "estimator.imu_bias.accelerometer_prior_std",
        "initial accelerometer bias std, m/s^2",
    ),
    Param(
        "imu_bias.orientation_offset_std",
        "estimator.imu_bias.orientation_offset_std",
        "tilt error std of the IMU orientation reading (its filter's), added by consider analysis, rad; 0 = off",
    ),
    Param(
        "imu_bias.attitude_tracking",
        "estimator.imu_bias.attitude_tracking",
        "with the biases not estimated, learn the gyro's horizontal bias from the orientation reading's long-term tilt"
        " and subtract it (its uncertainty replaces gyro_prior_std in the consider analysis)",
    ),
    Param(
        "imu_bias.attitude_tracking_error",
        "estimator.imu_bias.attitude_tracking_error",
        "tilt error std of the orientation reading per attitude-tracking update, rad",
    ),
    Param(
        "imu_bias.attitude_tracking_interval",
        "estimator.imu_bias.attitude_tracking_interval",
        "time between attitude-tracking updates (no shorter than the reading's error correlation time), s",
    ),
    Param(
        "imu_bias.stance_yaw",
        "estimator.imu_bias.stance_yaw",
        "with attitude_tracking, learn the gyro's bias about the world vertical from the settled stance feet's turn"
        " against the integrated gyro (intervals of at most attitude_tracking_interval) and replace the orientation"
        " reading's drifting yaw by the tracker's heading; off for an IMU whose yaw does not drift (magnetometer)",
    ),
    Param(
        "imu_bias.stance_yaw_foot_speed",
        "estimator.imu_bias.stance_yaw_foot_speed",
        "speed std of a settled foot relative to the others (creep, sinking, encoders; its rolling taken out), m/s",
    ),
    Param(
        "imu_bias.vertical_accelerometer_tracking",
        "estimator.imu_bias.vertical_accelerometer_tracking",
        "with the accelerometer bias not estimated, learn its component along the IMU's z axis from the settled stance"
        " feet's kinematic velocity against the integrated specific force (an IMU + leg-kinematics filter outside the"
        " window) and subtract it (its uncertainty replaces accelerometer_prior_std on z in the consider analysis)",
    ),
    Param("imu_bias.gyro_random_walk", "estimator.imu_bias.gyro_random_walk", "gyro bias random walk, rad/s/sqrt(s)"),
    Param(
        "imu_bias.accelerometer_random_walk",
        "estimator.imu_bias.accelerometer_random_walk",
        "accelerometer bias random walk, m/s^2/sqrt(s)",
    ),
    # robust losses and covariance calibration
    Param(
        "robust.loss",
        "estimator.robust.loss",
        "robust loss on the selected residual groups (non-quadratic: Python solver only)",
        ("quadratic", "huber", "cauchy"),
    ),
    Param("robust.threshold", "estimator.robust.threshold", "outlier threshold, RMS whitened residual per component"),
    Param("robust.process", "estimator.robust.process", "robust loss on each interval's process noise"),
    Param(
        "robust.contact",
        "estimator.robust.contact",
        "robust loss on each stance foot's zero-velocity and base-height residual",
    ),
    Param("robust.sensors", "estimator.robust.sensors", "robust loss on each IMU and encoder measurement block"),
    Param(
        "robust.covariance_scaling",
        "estimator.robust.covariance_scaling",
        "published covariances scaled by the window's reduced chi-square (residual), by the payload estimates'"
        " consistency over time (consistency) or not",
        ("none", "residual", "consistency"),
    ),
    Param(
        "robust.consistency_lag",
        "estimator.robust.consistency_lag",
        "lag between the compared payload estimates of the consistency scaling, s",
    ),
    Param(
        "robust.covariance_scale_floor",
        "estimator.robust.covariance_scale_floor",
        "lower bound of the covariance scale factor",
    ),
    # contact model of the dynamics
    Param(
        "dynamics.model",
        "estimator.dynamics.model",
        "contact model: rigid stance-foot contacts, or implicit soft contact of every foot (Python solver only,"
        " needs actuator.enabled false)",
        ("rigid", "soft"),
    ),
    Param(
        "dynamics.soft_compliance_normal",
        "estimator.dynamics.soft_compliance_normal",
        "soft contact: normal compliance r_n, 1/kg (stiffness 1/(r_n tau^2))",
    ),
    Param(
        "dynamics.soft_compliance_tangential",
        "estimator.dynamics.soft_compliance_tangential",
        "soft contact: tangential compliance r_t, 1/kg",
    ),
    Param("dynamics.soft_time_constant", "estimator.dynamics.soft_time_constant", "soft contact: time constant, s"),
    Param(
        "dynamics.soft_smoothing",
        "estimator.dynamics.soft_smoothing",
        "soft contact: softplus smoothing of the normal force, N",
    ),
    Param(
        "dynamics.ground_height",
        "estimator.dynamics.ground_height",
        "ground height in odom (soft contact, base-height pseudo-measurement), m",
    ),
    Param(
        "dynamics.newton_max_iterations",
        "estimator.dynamics.newton_max_iterations",
        "soft contact: Newton iterations per interval step (no convergence: the tick is held)",
    ),
    Param(
        "dynamics.rigid_contacts",
        "estimator.dynamics.rigid_contacts",
        "rigid model: stance feet held still by the dynamics (impulse when a foot enters): every detected one, the"
        " settled ones, or detected ones from contact.settle_time after touch-down",
        ("detected", "settled", "delayed", "unloading"),
    ),
    Param(
        "dynamics.landing_damping",
        "estimator.dynamics.landing_damping",
        "rigid model: > 0 lands a foot over time instead of by the impulse: its contact velocity decays at this rate"
        " for its first dynamics.landing_time of stance, 1/s (0 = impulse at touch-down)",
    ),
    Param(
        "dynamics.landing_time",
        "estimator.dynamics.landing_time",
        "rigid model: stance time with the landing damping (dynamics.landing_damping > 0), s",
    ),
    Param(
        "dynamics.rolling_radius",
        "estimator.dynamics.rolling_radius",
        "rigid model: a round foot's contact point this far straight below the foot frame at the knot, whose velocity"
        " the stance-foot velocity pseudo-measurement holds at zero (a foot rolling without slip; its radius on a hard"
        " floor, less on a soft one), m; 0 = the foot frame",
    ),
    Param(
        "dynamics.rolling_contacts",
        "estimator.dynamics.rolling_contacts",
        "rigid model, dynamics.rolling_radius > 0: the contacts at that point too (the ground force acts there and the"
        " dynamics hold it); false = the contacts at the foot frames",
    ),
    # solver
    Param("solver.max_iterations", "estimator.solver.max_iterations", "solver iterations per tick"),
    Param(
        "solver.max_iterations_cold",
        "estimator.solver.max_iterations_cold",
        "solver iterations of a solve from scratch (first tick, restarts)",
    ),
    Param(
        "solver.cold_iterations_per_tick",
        "estimator.solver.cold_iterations_per_tick",
        "at most this many of a cold start's iterations per tick, the rest on the next ticks (0 = all in one tick)",
    ),
    Param(
        "solver.time_budget",
        "estimator.solver.time_budget",
        "wall-time budget per tick, s (0 = none: deterministic replay)",
    ),
    Param("solver.rollout", "estimator.solver.rollout", "rollout type", ("multiple", "feasible", "single")),
    Param("solver.arrival", "estimator.solver.arrival", "arrival-node factorisation", ("auto", "schur", "nullspace")),
    Param(
        "solver.backend",
        "estimator.solver.backend",
        "solver implementation: compiled C++ (auto: when built) or the Python reference",
        ("auto", "python", "compiled"),
    ),
    Param(
        "solver.threads",
        "estimator.solver.threads",
        "threads of the compiled solver's per-knot loops (0 = auto: 2 with >= 4 cores, else 1; a replay 2 with >= 2 "
        "cores; same results for any)",
    ),
    Param(
        "solver.spare_knots",
        "estimator.solver.spare_knots",
        "dropped knots the compiled solver keeps for later shifts' new knots (-1 = one window, 0 = none; ~2 MB each; "
        "same results for any)",
    ),
    # contact detection
    Param("contact.force_on", "estimator.contact.force_on", "vertical ground reaction force to enter contact, N"),
    Param(
        "contact.force_off",
        "estimator.contact.force_off",
        "vertical ground reaction force to leave contact, N (a foot that moves, see contact.lift_off_speed)",
    ),
    Param(
        "contact.force_off_still",
        "estimator.contact.force_off_still",
        "vertical ground reaction force below which a foot that does not move leaves contact too, N",
    ),
    Param(
        "contact.lift_off_speed",
        "estimator.contact.lift_off_speed",
        "speed relative to the other stance feet above which an unloaded stance foot moves (lifts off), m/s",
    ),
    Param("contact.min_duration", "estimator.contact.min_duration", "a contact change must persist this long, s"),
    Param(
        "contact.backdate",
        "estimator.contact.backdate",
        "a confirmed contact change dates from the first sample that wanted it (unsolved knots since relabelled)",
    ),
    Param(
        "contact.settle_fraction",
        "estimator.contact.settle_fraction",
        "share of the stance feet's mean vertical force above which a foot's zero-velocity pseudo-measurement is used",
    ),
    Param(
        "contact.settle_time",
        "estimator.contact.settle_time",
        "time after touch-down before a stance foot's zero-velocity pseudo-measurement is used, s",
    ),
    Param(
        "contact.foot_force_threshold",
        "estimator.contact.foot_force_threshold",
        "raw foot-force threshold when input.use_foot_force is set",
    ),
    Param(
        "contact.method",
        "estimator.contact.method",
        "force estimate: generalized-momentum observer per leg (no differentiated acceleration) or inverse dynamics"
        " of the leg rows (differenced accelerations)",
        CONTACT_METHODS,
    ),
    Param(
        "contact.observer_gain",
        "estimator.contact.observer_gain",
        "momentum observer bandwidth K, 1/s (K x input period >= 1: no filtering)",
    ),
    Param(
        "contact.retouch_time",
        "estimator.contact.retouch_time",
        "> 0: stance feet unloaded below contact.force_off while no stance foot is loaded lift off at once, and"
        " for this long after the flight's onset (the last stance foot's lift-off) a foot re-enters contact only"
        " when its force stays above contact.force_on for contact.retouch_duration (the force estimate rings"
        " when the robot leaves the ground), s; 0 = off",
    ),
    Param(
        "contact.retouch_duration",
        "estimator.contact.retouch_duration",
        "time the force must stay above contact.force_on for a touch-down within contact.retouch_time, s",
    ),
)

POSITIVE, NONNEGATIVE = (0.0, None, False), (0.0, None, True)
#: allowed ranges of the numeric parameters (checked by :func:`check_value`; cross-checks in :func:`check_config`)
_BOUNDS = {
    "robot.armature": NONNEGATIVE,
    "robot.foot_radius": (0.0, 0.2, True),
    "robot.foot_contact_offset": (-0.2, 0.2, True),
    "input.low_state_period": POSITIVE,
    "output.diagnostics_period": POSITIVE,
    "output.stale_timeout": POSITIVE,
    "node.solver_niceness": (0, 19, True),
    "node.sensor_priority": (0, 99, True),
    "estimator.dt": POSITIVE,
    "estimator.window": POSITIVE,
    "estimator.tick_period": POSITIVE,
    "estimator.max_gap": POSITIVE,
    **{f"noise.{n}": POSITIVE for n in ("joint_position", "joint_velocity", "gyro", "orientation", "accelerometer")},
    **{f"noise.{n}": POSITIVE for n in ("foot_velocity", "process_position", "process_velocity")},
    "noise.orientation_gait": NONNEGATIVE,
    "noise.process_base_linear": NONNEGATIVE,
    "noise.process_joint_velocity": NONNEGATIVE,
    "noise.touchdown_transient": (0.0, 1.0, True),
    "noise.settled_joint_velocity": NONNEGATIVE,
    "noise.settled_time": (0.0, 10.0, True),
    "noise.realised_standing_time": (0.0, 10.0, True),
    "noise.realised_flight_time": (0.0, 10.0, True),
    **{f"noise.{n}": POSITIVE for n in ("arrival_position", "arrival_velocity")},
    "noise.arrival_tilt": (0.0, 1.0, True),
    "noise.joint_torque": NONNEGATIVE,
    "noise.contact_acceleration": NONNEGATIVE,
    "noise.foot_height": NONNEGATIVE,
    "noise.height_random_walk": NONNEGATIVE,
    "noise.stance_foot_height": NONNEGATIVE,
    "noise.odometry_slip_time": (0.0, 1.0, True),
    "payload.prior_mass": POSITIVE,
    "payload.prior_com": (-10.0, 10.0, True),
    "payload.prior_inertia": POSITIVE,
    "payload.prior_sigma": POSITIVE,
    "payload.rls_window": POSITIVE,
    "payload.rls_alpha": NONNEGATIVE,
    "payload.rls_forgetting": (0.0, 1.0, False),
    "payload.leg_mass.prior_sigma": POSITIVE,
    "payload.leg_mass.min_swing": (0.0, 1.0, True),
    "payload.leg_mass.min_swing_speed": NONNEGATIVE,
    "payload.min_vertical_excitation": (0.0, 10.0, True),
    "actuator.coulomb_smoothing": POSITIVE,
    "actuator.prior_viscous": POSITIVE,
    "actuator.prior_coulomb": POSITIVE,
    "actuator.prior_rotor_inertia": POSITIVE,
    "actuator.log_sigma": POSITIVE,
    **{f"actuator.max_{n}": POSITIVE for n in ("viscous", "coulomb", "rotor_inertia")},
    "actuator.min_excitation": NONNEGATIVE,
    **{f"imu_bias.{n}": POSITIVE for n in ("gyro_prior_std", "accelerometer_prior_std")},
    **{f"imu_bias.{n}": POSITIVE for n in ("gyro_random_walk", "accelerometer_random_walk")},
    "imu_bias.orientation_offset_std": (0.0, 0.5, True),
    "imu_bias.attitude_tracking_error": (0.0, 1.0, False),
    "imu_bias.attitude_tracking_interval": (0.0, 60.0, False),
    "imu_bias.stance_yaw_foot_speed": (0.0, 1.0, False),
    "robust.threshold": POSITIVE,
    "robust.covariance_scale_floor": NONNEGATIVE,
    "robust.consistency_lag": POSITIVE,
    **{f"dynamics.soft_{n}": POSITIVE for n in ("compliance_normal", "compliance_tangential")},
    **{f"dynamics.soft_{n}": POSITIVE for n in ("time_constant", "smoothing")},
    "dynamics.ground_height": (-10.0, 10.0, True),
    "dynamics.newton_max_iterations": (1, None, True),
    "dynamics.landing_damping": (0.0, 1e4, True),
    "dynamics.landing_time": (0.0, 10.0, False),
    "dynamics.rolling_radius": (0.0, 0.2, True),
    "solver.max_iterations": (1, None, True),
    "solver.max_iterations_cold": (1, None, True),
    "solver.cold_iterations_per_tick": (0, None, True),
    "solver.time_budget": NONNEGATIVE,
    "solver.threads": (0, 64, True),
    "solver.spare_knots": (-1, 100000, True),
    "contact.force_on": NONNEGATIVE,
    "contact.force_off": NONNEGATIVE,
    "contact.force_off_still": NONNEGATIVE,
    "contact.lift_off_speed": NONNEGATIVE,
    "contact.min_duration": NONNEGATIVE,
    "contact.settle_fraction": NONNEGATIVE,
    "contact.settle_time": NONNEGATIVE,
    "contact.foot_force_threshold": NONNEGATIVE,
    "contact.observer_gain": POSITIVE,
    "contact.retouch_time": (0.0, 1.0, True),
    "contact.retouch_duration": (0.0, 0.1, True),
}
PARAMETERS: tuple[Param, ...] = tuple(replace(p, bounds=_BOUNDS.get(p.name, ())) for p in _TABLE)
DEFAULTS: dict = {p.name: p.default for p in PARAMETERS}
_BY_NAME = {p.name: p for p in PARAMETERS}


class ConfigError(ValueError):
    """A bad parameter file or value; the message names the key."""


def check_value(name: str, value):
    """Validate one parameter value against its declaration; returns it (lists kept as lists)."""
    if name not in _BY_NAME:
        raise ConfigError(f"unknown parameter '{name}'")
    param = _BY_NAME[name]
    default = param.default
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, (int, float)):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = type(default)(value) if ok and isinstance(default, float) else value
    elif isinstance(default, str):
        ok = isinstance(value, str)
    else:
        ok = isinstance(value, (list, tuple)) and all(
            isinstance(v, type(default[0])) or (isinstance(default[0], float) and isinstance(v, int)) for v in value
        )
        value = list(value) if ok else value
    if not ok:
        raise ConfigError(f"parameter '{name}' must be like {default!r}, got {value!r}")
    if param.choices and value not in param.choices:
        raise ConfigError(f"parameter '{name}' must be one of {list(param.choices)}, got {value!r}")
    if param.bounds and not all(_within(v, param.bounds) for v in (value if isinstance(value, list) else [value])):
        raise ConfigError(f"parameter '{name}' must be {param.range_text()}, got {value!r}")
    return value


def _within(v, bounds) -> bool:
    low, high, inclusive = bounds
    if not math.isfinite(v):
        return False
    return (v >= low if inclusive else v > low) and (high is None or v <= high)


def check_config(cfg: NodeConfig) -> NodeConfig:
    """Cross-checks between parameters (each error names a parameter); returns ``cfg``."""
    grid = cfg.estimator.grid
    if len(cfg.estimator.robot.foot_contact_offset) != 3:
        raise ConfigError("parameter 'robot.foot_contact_offset' must be 3 numbers (x, y, z in the foot frame, m)")
    if cfg.estimator.dynamics.rolling_radius > 0.0 and any(cfg.estimator.robot.foot_contact_offset):
        raise ConfigError("parameter 'dynamics.rolling_radius' needs robot.foot_contact_offset [0, 0, 0]")
    if grid.window < 5 * grid.dt:
        raise ConfigError(f"parameter 'estimator.window' must be at least 5 grid steps (5 x {grid.dt:g} s)")
    if not grid.dt <= grid.tick_period <= grid.window:
        raise ConfigError("parameter 'estimator.tick_period' must lie between estimator.dt and estimator.window")
    if grid.max_gap < 2 * grid.dt:
        raise ConfigError("parameter 'estimator.max_gap' must be at least two grid steps (2 x estimator.dt)")
    if cfg.estimator.dynamics.landing_damping * grid.dt > 1.0:
        # semi-implicit Euler: a damped foot's velocity is multiplied by 1 - k_d dt per step (oscillates beyond 1)
        raise ConfigError("parameter 'dynamics.landing_damping' must be at most 1 / estimator.dt (a stable decay)")
    contact = cfg.estimator.contact
    if contact.force_off > contact.force_on:
        raise ConfigError("parameter 'contact.force_off' must not exceed contact.force_on")
    urdf = cfg.estimator.robot.urdf_path
    if urdf and not os.path.isfile(urdf):
        raise ConfigError(f"parameter 'robot.urdf_path': no such file {urdf!r}")
    if cfg.estimator.solver.max_iterations_cold < cfg.estimator.solver.max_iterations:
        raise ConfigError("parameter 'solver.max_iterations_cold' must be >= solver.max_iterations")
    if cfg.estimator.dynamics.model == "soft" and cfg.estimator.actuator.enabled:
        raise ConfigError("parameter 'dynamics.model' 'soft' needs actuator.enabled false (no actuator model)")
    if cfg.estimator.solver.backend == "compiled" and cfg.estimator.payload.leg_mass.enabled:
        raise ConfigError("parameter 'payload.leg_mass.enabled' needs solver.backend auto or python (not compiled)")
    if cfg.estimator.dynamics.model == "soft" and cfg.estimator.payload.leg_mass.enabled:
        raise ConfigError("parameter 'dynamics.model' 'soft' needs payload.leg_mass.enabled false (no leg mass scale)")
    if cfg.estimator.noise.contact_acceleration > 0.0:
        if cfg.estimator.solver.backend == "compiled":
            raise ConfigError(
                "parameter 'noise.contact_acceleration' needs solver.backend auto or python (not compiled)"
            )
        if cfg.estimator.dynamics.model != "rigid" or cfg.estimator.noise.process_model != "velocity":
            raise ConfigError(
                "parameter 'noise.contact_acceleration' needs dynamics.model rigid, process_model velocity"
            )
    # the errors-in-variables defaults last: an option set explicitly names itself first
    if cfg.estimator.noise.joint_torque_weight == "parametric":
        est = cfg.estimator
        why = [
            (
                "noise.joint_torque or noise.contact_acceleration > 0",
                est.noise.joint_torque > 0.0 or est.noise.contact_acceleration > 0.0,
            ),
            ("noise.process_model velocity", est.noise.process_model == "velocity"),
            ("dynamics.model rigid", est.dynamics.model == "rigid"),
            ("payload.leg_mass.enabled false", not est.payload.leg_mass.enabled),
            ("robust.loss quadratic", est.robust.loss == "quadratic"),
        ]
        missing = [text for text, ok in why if not ok]
        if missing:
            raise ConfigError(
                f"parameter 'noise.joint_torque_weight' 'parametric' needs {', '.join(missing)} (or set it 'frozen')"
            )
    if cfg.estimator.noise.accelerometer_realised:
        est = cfg.estimator
        why = [
            ("dynamics.model rigid", est.dynamics.model == "rigid"),
            ("robust.loss quadratic", est.robust.loss == "quadratic"),
        ]
        missing = [text for text, ok in why if not ok]
        if missing:
            raise ConfigError(f"parameter 'noise.accelerometer_realised' needs {', '.join(missing)} (or set it false)")
    return cfg


def _with(obj, path: list[str], value):
    """Copy of dataclass ``obj`` with the field at ``path`` replaced (nested dataclasses copied, not mutated)."""
    name = path[0]
    if len(path) == 1:
        current = getattr(obj, name)
        if isinstance(current, tuple) and isinstance(value, list):
            value = tuple(value)
        return replace(obj, **{name: value})
    return replace(obj, **{name: _with(getattr(obj, name), path[1:], value)})


def node_config(params: dict | None = None) -> NodeConfig:
    """Typed configuration from flat parameters (validated with :func:`resolve`; missing keys take defaults)."""
    cfg = NodeConfig()
    for key, value in resolve(params).items():
        cfg = _with(cfg, _BY_NAME[key].path.split("."), value)
    return check_config(cfg)


def resolve(overrides: dict | None = None) -> dict:
    """Defaults updated with validated overrides (flat dotted keys)."""
    out = dict(DEFAULTS)
    for key, value in (overrides or {}).items():
        out[key] = check_value(key, value)
    return out


def flatten(tree: dict, prefix: str = "") -> dict:
    """Nested YAML mapping -> flat dotted keys."""
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def load_params(path: str, node_name: str = NODE_NAME, required: bool = True) -> dict:
    """Read a ROS 2 parameter YAML (``/**: ros__parameters: ...``) into a validated flat dict (``required=False``:
    a file without a section for this node gives {})."""
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except OSError as err:
        raise ConfigError(f"cannot read config '{path}': {err.strerror}") from err
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigError(f"config '{path}' is not valid YAML{where}: {str(err).splitlines()[0]}") from err
    if not isinstance(doc, dict):
        raise ConfigError(f"config '{path}' must be a mapping with a '/**' or '{node_name}' entry")
    sections = [v for k, v in doc.items() if _applies(str(k), node_name)]
    if not sections and not required:
        return {}
    if not sections or not all(isinstance(v, dict) and isinstance(v.get("ros__parameters"), dict) for v in sections):
        raise ConfigError(f"config '{path}' has no '/**: ros__parameters:' (or '{node_name}:') section")
    flat = {}
    for section in sections:  # in file order, later sections override earlier ones (as rcl does)
        flat.update(flatten(section["ros__parameters"]))
    flat.pop("use_sim_time", None)
    return resolve(flat)


def _applies(key: str, node_name: str) -> bool:
    """Whether a parameter-file section key ('/**', 'mcoe_estimator', '/ns/mcoe_estimator', '/**/name') selects the
    node whatever its namespace (rcl's wildcards: '*' one token, '**' any number)."""
    last = key.rstrip("/").rsplit("/", 1)[-1]
    return last in ("**", "*", node_name)
