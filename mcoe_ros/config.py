"""Every estimator parameter, declared once: name, default, description (and allowed choices).

The ROS 2 node declares exactly these parameters (with descriptors); the bag replay reads the same YAML
(``<node>: ros__parameters:`` layout of ``config/go1.yaml``) through :func:`load_params`; a test checks
that the YAML and this table match key for key. Units are SI; frames follow REP-103/REP-105.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcoe_ros.model import GO1_UNITREE_JOINT_ORDER

NODE_NAME = "mcoe_estimator"


@dataclass(frozen=True)
class Param:
    name: str
    default: object
    description: str
    choices: tuple = ()


PARAMETERS: tuple[Param, ...] = (
    # robot model
    Param("robot.urdf_path", "", "URDF of the robot; empty = Unitree Go1 from example-robot-data"),
    Param("robot.base_frame", "base", "base link frame (child frame of odometry and TF)"),
    Param("robot.imu_frame", "imu_link", "frame of the IMU in the URDF"),
    Param("robot.foot_frames", ["FL_foot", "FR_foot", "RL_foot", "RR_foot"], "contact frames, model foot order"),
    Param("robot.payload_frame", "trunk", "frame the payload body is rigidly attached to (payload parameters frame)"),
    Param("robot.armature", 0.0, "rotor inertia reflected on every actuated joint, kg m^2"),
    Param("robot.hw_joint_names", list(GO1_UNITREE_JOINT_ORDER), "joint names in the hardware (LowState) order"),
    # inputs
    Param(
        "input.mode", "low_state", "sensor input: Unitree LowState, or JointState + Imu", ("low_state", "joint_states")
    ),
    Param("input.low_state_topic", "/low_state", "Unitree LowState topic (no header: reception time is used)"),
    Param("input.low_state_period", 0.002, "nominal LowState period, s (stamps headerless messages, see inputs.py)"),
    Param("input.joint_states_topic", "/joint_states", "sensor_msgs/JointState topic (position, velocity, effort)"),
    Param("input.imu_topic", "/imu/data", "sensor_msgs/Imu topic (orientation, angular velocity, specific force)"),
    Param("input.torque_source", "tau_est", "joint torque input: measured/estimated torque", ("tau_est",)),
    Param("input.use_foot_force", False, "use LowState.foot_force as an extra contact cue"),
    # frames and outputs
    Param("output.odom_frame", "odom", "world-fixed odometry frame (REP-105)"),
    Param("output.publish_tf", True, "broadcast odom -> base TF when tf2_ros is available"),
    Param("output.diagnostics_period", 1.0, "seconds between /diagnostics messages"),
    # estimator grid and window
    Param("estimator.dt", 0.002, "estimator grid step, s"),
    Param("estimator.window", 0.2, "sliding-window length, s"),
    Param("estimator.tick_period", 0.05, "sensor time between two solves, s"),
    Param("estimator.max_gap", 0.1, "a sensor gap longer than this restarts the window, s"),
    Param("estimator.impulse_on_touchdown", True, "apply the impulse (reset) map when a foot lands"),
    Param(
        "estimator.payload_estimator",
        "oe",
        "payload estimator: optimal estimation, RLS, or both",
        ("oe", "rls", "oe+rls"),
    ),
    # noise models (standard deviations)
    Param("noise.joint_position", 0.002, "encoder noise, rad"),
    Param("noise.joint_velocity", 0.1, "joint velocity noise, rad/s"),
    Param("noise.gyro", 0.02, "gyro noise, rad/s"),
    Param("noise.orientation", 0.02, "IMU orientation noise, rad"),
    Param("noise.accelerometer", 0.3, "accelerometer noise, m/s^2"),
    Param("noise.foot_velocity", 0.02, "stance-foot zero-velocity pseudo-measurement (leg odometry), m/s"),
    Param("noise.process_position", 1e-4, "process noise on configuration per step, m or rad"),
    Param("noise.process_velocity", 0.02, "process noise on velocity per step, m/s or rad/s"),
    Param("noise.arrival_position", 0.05, "initial arrival prior on configuration, m or rad"),
    Param("noise.arrival_velocity", 0.5, "initial arrival prior on velocity, m/s or rad/s"),
    # payload prior
    Param(
        "payload.parametrization",
        "exp-eigval",
        "inertial manifold of the payload",
        ("exp-eigval", "log-cholesky", "plain"),
    ),
    Param("payload.prior_mass", 1.0, "prior payload mass, kg"),
    Param("payload.prior_com", [0.0, 0.0, 0.0], "prior payload CoM in the payload frame, m"),
    Param("payload.prior_inertia", [0.01, 0.01, 0.01], "prior principal moments about the CoM, kg m^2"),
    Param(
        "payload.prior_sigma",
        [2.0, 0.5, 0.5, 0.5, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0],
        "prior std of theta, manifold coordinates (exp-eigval: log m, h kg m, rotation rad, log second moments)",
    ),
    Param("payload.rls_window", 0.01, "RLS: Savitzky-Golay window for the accelerations, s"),
    Param("payload.rls_alpha", 1.0, "RLS: strength of the log-det regulariser (prior: 1 kg box at the trunk)"),
    Param("payload.rls_forgetting", 1.0, "RLS: directional forgetting factor mu (1 = no forgetting)"),
    # solver
    Param("solver.max_iterations", 3, "solver iterations per tick"),
    Param("solver.max_iterations_cold", 10, "solver iterations of a solve from scratch (first tick, restarts)"),
    Param("solver.time_budget", 0.0, "wall-time budget per tick, s (0 = none: deterministic replay)"),
    Param("solver.rollout", "multiple", "rollout type", ("multiple", "feasible", "single")),
    Param("solver.arrival", "auto", "arrival-node factorisation", ("auto", "schur", "nullspace")),
    # contact detection
    Param("contact.force_on", 8.0, "vertical ground reaction force to enter contact, N"),
    Param("contact.force_off", 4.0, "vertical ground reaction force to leave contact, N"),
    Param("contact.min_duration", 0.002, "a contact change must persist this long, s"),
    Param("contact.foot_force_threshold", 20.0, "raw foot-force threshold when input.use_foot_force is set"),
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
