"""The ROS parameter surface: every estimator parameter declared once (name, description, allowed choices).

Each parameter maps a flat dotted ROS name (``estimator.dt``) onto a field of the typed configuration
(:class:`NodeConfig`: the estimator's :class:`~mcoe_ros.estimation.config.EstimatorConfig` plus the adapters'
:class:`InputConfig` and :class:`OutputConfig`); its default *is* that field's default, so defaults are written once,
in the dataclasses. The ROS 2 node declares exactly these parameters (with descriptors); the bag replay reads the
same YAML (``<node>: ros__parameters:`` layout of ``config/go1.yaml``) through :func:`load_params`; a test checks that
the YAML and this table match key for key. Units are SI; frames follow REP-103/REP-105.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from mcoe_ros.estimation.config import EstimatorConfig

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
    diagnostics_period: float = 1.0  #: s


@dataclass
class NodeConfig:
    """Everything the ROS node and the replay are configured with."""

    estimator: EstimatorConfig = field(default_factory=EstimatorConfig)
    input: InputConfig = field(default_factory=InputConfig)
    output: OutputConfig = field(default_factory=OutputConfig)


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

    @property
    def default(self):
        return _ros_value(_get(_DEFAULT_CONFIG, self.path))


_DEFAULT_CONFIG = NodeConfig()

PARAMETERS: tuple[Param, ...] = (
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
    Param("output.diagnostics_period", "output.diagnostics_period", "seconds between /diagnostics messages"),
    # estimator grid and window
    Param("estimator.dt", "estimator.grid.dt", "estimator grid step, s"),
    Param("estimator.window", "estimator.grid.window", "sliding-window length, s"),
    Param("estimator.tick_period", "estimator.grid.tick_period", "sensor time between two solves, s"),
    Param("estimator.max_gap", "estimator.grid.max_gap", "a sensor gap longer than this restarts the window, s"),
    Param(
        "estimator.impulse_on_touchdown",
        "estimator.grid.impulse_on_touchdown",
        "apply the impulse (reset) map when a foot lands",
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
    Param("noise.orientation", "estimator.noise.orientation", "IMU orientation noise, rad"),
    Param("noise.accelerometer", "estimator.noise.accelerometer", "accelerometer noise, m/s^2"),
    Param(
        "noise.foot_velocity",
        "estimator.noise.foot_velocity",
        "stance-foot zero-velocity pseudo-measurement (leg odometry), m/s",
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
        "noise.process_velocity",
        "estimator.noise.process_velocity",
        "process noise on velocity per step, m/s or rad/s",
    ),
    Param(
        "noise.arrival_position",
        "estimator.noise.arrival_position",
        "initial arrival prior on configuration, m or rad",
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
    # IMU biases
    Param("imu_bias.enabled", "estimator.imu_bias.enabled", "estimate gyro and accelerometer biases"),
    Param("imu_bias.gyro_prior_std", "estimator.imu_bias.gyro_prior_std", "initial gyro bias std, rad/s"),
    Param(
        "imu_bias.accelerometer_prior_std",
        "estimator.imu_bias.accelerometer_prior_std",
        "initial accelerometer bias std, m/s^2",
    ),
    Param("imu_bias.gyro_random_walk", "estimator.imu_bias.gyro_random_walk", "gyro bias random walk, rad/s/sqrt(s)"),
    Param(
        "imu_bias.accelerometer_random_walk",
        "estimator.imu_bias.accelerometer_random_walk",
        "accelerometer bias random walk, m/s^2/sqrt(s)",
    ),
    # solver
    Param("solver.max_iterations", "estimator.solver.max_iterations", "solver iterations per tick"),
    Param(
        "solver.max_iterations_cold",
        "estimator.solver.max_iterations_cold",
        "solver iterations of a solve from scratch (first tick, restarts)",
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
    # contact detection
    Param("contact.force_on", "estimator.contact.force_on", "vertical ground reaction force to enter contact, N"),
    Param("contact.force_off", "estimator.contact.force_off", "vertical ground reaction force to leave contact, N"),
    Param("contact.min_duration", "estimator.contact.min_duration", "a contact change must persist this long, s"),
    Param(
        "contact.foot_force_threshold",
        "estimator.contact.foot_force_threshold",
        "raw foot-force threshold when input.use_foot_force is set",
    ),
)

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
    return value


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
    return cfg


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


def load_params(path: str, node_name: str = NODE_NAME) -> dict:
    """Read a ROS 2 parameter YAML (``node: ros__parameters: ...``) into a validated flat dict."""
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except OSError as err:
        raise ConfigError(f"cannot read config '{path}': {err.strerror}") from err
    except yaml.YAMLError as err:
        raise ConfigError(f"config '{path}' is not valid YAML: {str(err).splitlines()[0]}") from err
    if not isinstance(doc, dict):
        raise ConfigError(f"config '{path}' must be a mapping with a '{node_name}' entry")
    section = doc.get(node_name, doc.get("/**"))
    if not isinstance(section, dict) or not isinstance(section.get("ros__parameters"), dict):
        raise ConfigError(f"config '{path}' has no '{node_name}: ros__parameters:' section")
    flat = flatten(section["ros__parameters"])
    flat.pop("use_sim_time", None)
    return resolve(flat)
