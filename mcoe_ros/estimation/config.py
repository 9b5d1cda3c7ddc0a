"""Typed configuration of the estimator (no ROS): what :class:`mcoe_ros.estimation.estimator.Estimator` is built from.

The ROS parameter table (:mod:`mcoe_ros.io.params`) maps its flat dotted names onto these dataclasses; code that
builds an estimator directly (tests, benchmarks) uses them with keyword overrides, e.g.
``EstimatorConfig(solver=SolverConfig(max_iterations=5))``. Units SI.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mcoe_ros.multibody.contact import ContactConfig
from mcoe_ros.multibody.robot import RobotSpec

PAYLOAD_ESTIMATORS = ("oe", "rls", "oe+rls")


@dataclass(frozen=True)
class GridConfig:
    """Estimator grid and sliding window."""

    dt: float = 0.002  #: grid step, s
    window: float = 0.2  #: window length, s
    tick_period: float = 0.05  #: sensor time between two solves, s
    max_gap: float = 0.1  #: a sensor gap longer than this restarts the window, s
    impulse_on_touchdown: bool = True  #: apply the impulse (reset) map when a foot lands

    @property
    def n_intervals(self) -> int:
        """Intervals of the window (knots - 1)."""
        return max(2, int(round(self.window / self.dt)))

    @property
    def tick_knots(self) -> int:
        """New grid knots between two solves."""
        return max(1, int(round(self.tick_period / self.dt)))


PROCESS_NOISE_MODELS = ("velocity", "full")


@dataclass(frozen=True)
class NoiseConfig:
    """Standard deviations of the measurement, process and initial arrival models.

    ``process_model``: 'velocity' puts the process noise on the generalized velocities only (positions follow the
    velocities exactly through the integrator; the noise then enters the Riccati recursion with a trivial Jacobian,
    half the size), 'full' on every tangent coordinate (positions get ``process_position``).
    """

    joint_position: float = 0.002  #: rad
    joint_velocity: float = 0.1  #: rad/s
    gyro: float = 0.02  #: rad/s
    orientation: float = 0.02  #: rad
    accelerometer: float = 0.3  #: m/s^2
    foot_velocity: float = 0.02  #: stance-foot zero-velocity pseudo-measurement, m/s
    process_model: str = "velocity"  #: one of PROCESS_NOISE_MODELS
    process_position: float = 1e-4  #: per grid step, m or rad (process_model 'full' only)
    process_velocity: float = 0.02  #: per grid step, m/s or rad/s
    arrival_position: float = 0.05  #: m or rad
    arrival_velocity: float = 0.5  #: m/s or rad/s

    def __post_init__(self):
        if self.process_model not in PROCESS_NOISE_MODELS:
            raise ValueError(f"process noise model must be one of {PROCESS_NOISE_MODELS}, got {self.process_model!r}")


@dataclass(frozen=True)
class PayloadConfig:
    """Payload estimator choice and prior (payload frame, see :mod:`mcoe_ros.multibody.inertia`)."""

    estimator: str = "oe"  #: one of PAYLOAD_ESTIMATORS
    parametrization: str = "exp-eigval"  #: inertial manifold ('exp-eigval', 'log-cholesky', 'plain')
    prior_mass: float = 1.0  #: kg
    prior_com: tuple[float, float, float] = (0.0, 0.0, 0.0)  #: m
    prior_inertia: tuple[float, float, float] = (0.01, 0.01, 0.01)  #: principal moments about the CoM, kg m^2
    #: std of theta in manifold coordinates (exp-eigval: log m, h kg m, rotation rad, log second moments)
    prior_sigma: tuple[float, ...] = (2.0, 0.5, 0.5, 0.5, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0)
    rls_window: float = 0.01  #: RLS: Savitzky-Golay window for the accelerations, s
    rls_alpha: float = 1.0  #: RLS: strength of the log-det regulariser
    rls_forgetting: float = 1.0  #: RLS: directional forgetting factor (1 = none)

    def __post_init__(self):
        if self.estimator not in PAYLOAD_ESTIMATORS:
            raise ValueError(f"payload estimator must be one of {PAYLOAD_ESTIMATORS}, got {self.estimator!r}")

    @property
    def uses_rls(self) -> bool:
        return "rls" in self.estimator


@dataclass(frozen=True)
class SolverConfig:
    """Iteration budget and solver variants per tick."""

    max_iterations: int = 3  #: per warm-started tick
    max_iterations_cold: int = 10  #: of a solve from scratch (first tick, restarts)
    time_budget: float = 0.0  #: wall-time budget per tick, s (0 = none: deterministic)
    rollout: str = "multiple"  #: 'multiple', 'feasible' or 'single'
    arrival: str = "auto"  #: 'auto', 'schur' or 'nullspace'


@dataclass
class EstimatorConfig:
    """Everything the estimator core needs."""

    robot: RobotSpec = field(default_factory=RobotSpec)
    grid: GridConfig = field(default_factory=GridConfig)
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    payload: PayloadConfig = field(default_factory=PayloadConfig)
    solver: SolverConfig = field(default_factory=SolverConfig)
    contact: ContactConfig = field(default_factory=ContactConfig)
