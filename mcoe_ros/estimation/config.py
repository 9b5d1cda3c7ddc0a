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
    #: apply the impulse (reset) map when a foot lands (only with dynamics.landing_damping 0) and to the feet the
    #: contact detector (re)starts on
    impulse_on_touchdown: bool = True

    @property
    def n_intervals(self) -> int:
        """Intervals of the window (knots - 1)."""
        return max(2, int(round(self.window / self.dt)))

    @property
    def tick_knots(self) -> int:
        """New grid knots between two solves."""
        return max(1, int(round(self.tick_period / self.dt)))


PROCESS_NOISE_MODELS = ("velocity", "full")
TORQUE_NOISE_WEIGHTS = ("frozen", "parametric")


@dataclass(frozen=True)
class NoiseConfig:
    """Standard deviations of the measurement, process and initial arrival models.

    ``process_model``: 'velocity' puts the process noise on the generalized velocities only (positions follow the
    velocities exactly through the integrator; the noise then enters the Riccati recursion with a trivial Jacobian,
    half the size), 'full' on every tangent coordinate (positions get ``process_position``). With 'velocity' its
    covariance per interval is dt² (da/dtau) diag(joint_torque²) (da/dtau)ᵀ [+ dt² contact_acceleration² (da/dw)
    (da/dw)ᵀ] + Σ_v: the reported joint torques are an
    input with white noise (sensor noise, unmodelled actuator effects) whose effect on the motion depends on the
    configuration and the contacts, plus unmodelled generalized forces Σ_v, the interval's diagonal velocity noise
    (``process_velocity``, ``process_base_linear``, ``process_joint_velocity`` on the intervals ``touchdown_transient``
    selects, ``settled_joint_velocity`` on the joints while every foot is settled or, with ``settled_time``, down).
    """

    joint_position: float = 0.002  #: rad
    joint_velocity: float = 0.1  #: rad/s
    gyro: float = 0.02  #: rad/s
    #: rad per knot, white: the IMU's orientation reading comes from the IMU's own attitude filter, whose tilt error
    #: is correlated (its leans, over τ ≈ 0.15–0.5 s) and whose yaw is the integrated gyro: white noise carrying the
    #: information of an error σ_e correlated over τ has σ_e √(2τ / dt) per knot, measured on the realism suite's
    #: recordings 0.02–0.20 rad (median 0.13); 0.02 trusted it several times too much. Its slowly varying part:
    #: ``imu_bias.orientation_offset_std`` (docs/realism.md session 25)
    orientation: float = 0.1
    #: rad per knot, the same reading on the intervals with a foot in the air (0 = ``orientation``). There the
    #: accelerometer measures the model's acceleration (the contact forces'), which ties the tilt to the torque-driven
    #: dynamics and their errors, and the reading alone holds it: at 0.1 the window's tilt leaves even a perfect
    #: reading by 15–45 mrad over a 10 s trot in place (docs/localisation.md session 30); a trot's reading leans less
    #: than a sway's (white equivalent 0.06–0.09 rad, pronks 0.02–0.06; docs/realism.md session 25). With every foot
    #: down the realised accelerometer and the feet hold the tilt, and a tighter reading would pass its accelerometer-
    #: bias tilt to the payload's CoM
    orientation_gait: float = 0.03
    accelerometer: float = 0.3  #: m/s^2
    #: the accelerometer measures the interval's realised acceleration a + n_v/dt (the model's plus the process noise
    #: on the base velocity), not the model's a(x, τ̃; θ) alone: the noise the dynamics needs (torque noise, feet that
    #: slide) is then seen by the IMU as well (Riccati cross terms, :mod:`mcoe_ros.ocp.interval`; both solvers)
    accelerometer_realised: bool = True
    #: s; the realised accelerometer only on intervals whose first knot has every foot down for at least this long
    #: (standing, swaying: the process noise is the torque noise's), the model's acceleration elsewhere (a gait's
    #: stances, whose noise also carries the rigid contacts' errors); 0 = every interval
    realised_standing_time: float = 0.1
    #: s; > 0: the realised accelerometer also on the intervals of a flight (every foot in the air) and for this long
    #: after its landing (GridKnot.since_flight): the rigid contacts stop landing feet that still sink into a soft
    #: floor, and the loose base velocity followed them (docs/localisation.md, session 21); 0 = off
    realised_flight_time: float = 0.05
    foot_velocity: float = 0.02  #: stance-foot zero-velocity pseudo-measurement, m/s
    #: flat-ground base-height pseudo-measurement at the window's arrival knot (its stance feet on the ground plane
    #: z = dynamics.ground_height), m; bounds the height drift of soft feet sinking into the ground; 0 = off (stairs,
    #: slopes)
    foot_height: float = 0.01
    height_random_walk: float = 0.05  #: m/sqrt(s), leg-odometry height random walk (with foot_height > 0)
    #: m; > 0: the same flat ground at every knot: each stance foot that has the zero-velocity pseudo-measurement
    #: puts the base at the height its encoders and IMU orientation say (leg odometry; only the base height moves,
    #: :class:`~mcoe_ros.multibody.measurements.BaseHeight`); 0 = the arrival knot's term only
    stance_foot_height: float = 0.01
    #: s; each touch-down adds τ ‖v_foot‖ (the landing foot's speed) to the standard deviation of the published
    #: horizontal position, coherently over the run: the systematic drift of the touch-down transients
    #: (:mod:`mcoe_ros.estimation.drift`, docs/realism.md session 14; 3 ms until session 24, whose NEES decomposition
    #: calibrated it on the soft floor's trot forward, the one gait whose odometry really drifts); 0 = the window's
    #: covariance only (the feet's rolling share of ``robot.foot_radius`` off as well)
    odometry_slip_time: float = 0.0015
    process_model: str = "velocity"  #: one of PROCESS_NOISE_MODELS
    process_position: float = 1e-4  #: per grid step, m or rad (process_model 'full' only)
    process_velocity: float = 0.02  #: per grid step, m/s or rad/s
    #: per grid step on the base's linear velocity (base axes), m/s; 0 = process_velocity. The rigid contacts hold
    #: every detected stance foot still, while real feet slide and roll through the touch-down transient and the
    #: unloading before lift-off: the base velocity's random walk is where that unmodelled sliding goes
    #: (docs/localisation.md, "The horizontal error")
    process_base_linear: float = 0.0
    #: per grid step on the joint velocities, rad/s; 0 = process_velocity. A held foot can only slide in the model
    #: through joint motion that the base motion does not explain (docs/localisation.md, "The horizontal error")
    process_joint_velocity: float = 0.04
    #: s; > 0: on the gaits, process_joint_velocity applies only to the intervals of a touch-down transient (from a
    #: knot where the rigid dynamics starts holding a foot, the impulse knot, for this long), process_velocity to the
    #: joint velocities of the other intervals with a foot in the air (swing and stance away from a landing, where the
    #: rigid model holds what the feet do); an interval whose first knot holds every foot keeps process_joint_velocity
    #: (standing, swaying: the soft feet roll and sink all the time); 0: process_joint_velocity on every interval.
    #: The rigid contact holds a landing foot that in reality still slides and sinks (docs/realism.md, runs 4 and 5,
    #: session 31: 0.05 s takes the trots' mass error from 0.9-2.8 % to 0.2-1.8 % on the soft floor). At most the
    #: window less a tick (GridConfig.window - tick_period; longer is shortened to it)
    touchdown_transient: float = 0.05
    #: per grid step on the joint velocities of an interval whose first knot has every foot settled (standing on
    #: settled feet, :attr:`GridKnot.measured`), rad/s; 0 = the value above. There the rigid contacts hold what the
    #: feet do and the reported torques' information is kept (tight, with ``joint_torque``'s torque-shaped noise);
    #: while a foot swings, lands or unloads the soft, rolling feet move every leg of the closed chain in ways the
    #: rigid contacts do not explain, and the loose ``process_joint_velocity`` keeps that out of the payload
    #: (docs/realism.md, session 11)
    settled_joint_velocity: float = 0.002
    #: s; > 0: an interval whose first knot has every foot down for at least this long counts as settled too, loaded
    #: or not (:meth:`GridKnot.down_for`). Settled alone asks each foot's load above contact.settle_fraction of the
    #: mean (:attr:`GridKnot.measured`), and a sway shifts the load between the feet: it holds on only ~30 % of a
    #: sway's knots, and on the others the loose joints let the dynamics' base acceleration follow a biased
    #: accelerometer instead of the kinematics, at the payload mass's expense (docs/realism.md, session 12). 0.3 s:
    #: longer than a pronk's or a walk's four-foot phases (their landings stay loose); 0 = off
    settled_time: float = 0.3
    #: white noise of the reported joint torques, N m (process_model 'velocity' only)
    joint_torque: float = 0.1
    #: how the payload's estimate sees the velocity noise that ``joint_torque`` (and ``contact_acceleration``) cause
    #: (its covariance depends on the mass matrix, so on the inertial parameters): 'frozen' evaluates it at each
    #: linearisation and holds it fixed in θ (then a least-squares estimate prefers a body that makes the noisy torque
    #: matter less: heavier, larger inertia; the errors-in-variables bias of docs/realism.md); 'parametric'
    #: differentiates the noise cost in θ as well (:mod:`mcoe_ros.ocp.problem`, "Parametric noise"; both solvers)
    joint_torque_weight: str = "parametric"
    #: white noise on each stance foot's contact-constraint acceleration J a = -γ + w, m/s² (isotropic; process_model
    #: 'velocity', rigid dynamics, Python solver only): the rigid contact holds feet that really move (a soft ground's
    #: sinking under a changing load, a round foot's rolling); adds dt² σ² (da/dw)(da/dw)ᵀ to the interval's velocity
    #: noise covariance (docs/realism.md, "Foot contact ablation")
    contact_acceleration: float = 0.0
    arrival_position: float = 0.05  #: m or rad
    #: rad, the initial arrival prior on the base's roll and pitch (a problem built from scratch starts from the IMU's
    #: orientation reading, whose tilt is its attitude filter's: good to ~0.01 rad); 0 = arrival_position. Without it
    #: a rebuilt window could lean 0.1 rad at a gait transition (docs/realism.md, session 25)
    arrival_tilt: float = 0.02
    arrival_velocity: float = 0.5  #: m/s or rad/s

    def __post_init__(self):
        if self.process_model not in PROCESS_NOISE_MODELS:
            raise ValueError(f"process noise model must be one of {PROCESS_NOISE_MODELS}, got {self.process_model!r}")
        if self.joint_torque_weight not in TORQUE_NOISE_WEIGHTS:
            raise ValueError(
                f"joint torque weight must be one of {TORQUE_NOISE_WEIGHTS}, got {self.joint_torque_weight!r}"
            )


PAYLOAD_BODIES = ("combined", "payload")


@dataclass(frozen=True)
class LegMassConfig:
    """A leg mass scale k estimated with the payload: the inertial parameters of every body but the payload's parent
    (the legs) are k times the URDF's (:class:`mcoe_ros.multibody.actuator.ParameterLayout`), so a robot whose legs
    are lighter or heavier than its URDF does not bias the payload. k = exp(theta) > 0 (always physically consistent),
    prior theta ~ N(0, prior_sigma^2) (prior_sigma ~ the relative deviation at 1 sigma); windows with less than
    ``min_swing`` swing knots, or whose swing legs move slower than ``min_swing_speed``, keep k
    (:class:`mcoe_ros.estimation.excitation.LegMassGate`). Python solver only."""

    enabled: bool = False
    prior_sigma: float = 0.1  #: prior std of log k (about the legs' relative mass deviation at 1 sigma)
    #: fraction of a window's knots with a foot in the air below which its solve keeps k (0: never freeze)
    min_swing: float = 0.1
    #: RMS joint speed of the legs flagged in the air below which a window's solve keeps k, rad/s (0: no check)
    min_swing_speed: float = 1.3


@dataclass(frozen=True)
class PayloadConfig:
    """Payload estimator choice and prior (payload frame, see :mod:`mcoe_ros.multibody.inertia`).

    ``body``: 'combined' estimates the payload's parent body as a whole (URDF trunk + payload, always physically
    consistent) and reports the payload as its difference to the URDF trunk, which may be negative (a robot lighter
    than its URDF); 'payload' estimates a separate physically consistent payload body (mass > 0). The prior below is
    the payload's in both cases (added to the URDF trunk for 'combined')."""

    estimator: str = "oe"  #: one of PAYLOAD_ESTIMATORS
    body: str = "combined"  #: one of PAYLOAD_BODIES
    parametrization: str = "exp-eigval"  #: inertial manifold ('exp-eigval', 'log-cholesky', 'plain')
    prior_mass: float = 1.0  #: kg
    prior_com: tuple[float, float, float] = (0.0, 0.0, 0.0)  #: m
    prior_inertia: tuple[float, float, float] = (0.01, 0.01, 0.01)  #: principal moments about the CoM, kg m^2
    #: std of theta in manifold coordinates (exp-eigval: log m, h kg m, rotation rad, log second moments)
    prior_sigma: tuple[float, ...] = (2.0, 0.5, 0.5, 0.5, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0)
    rls_window: float = 0.01  #: RLS: Savitzky-Golay window for the accelerations, s
    rls_alpha: float = 1.0  #: RLS: strength of the log-det regulariser
    rls_forgetting: float = 1.0  #: RLS: directional forgetting factor (1 = none)
    #: m/s²; a window whose horizontal specific force hardly varies (RMS about its mean, 20 ms averages, below this)
    #: keeps the vertical first moment h_z of the estimated body for its solve: standing still, nothing but noise
    #: informs it, and the reported torques' noise drags it far below the trunk (errors in variables,
    #: :class:`mcoe_ros.estimation.excitation.VerticalMomentGate`, docs/realism.md session 14); 0 = off. Needs the
    #: 'exp-eigval' or 'plain' parametrization (h_z is a coordinate)
    min_vertical_excitation: float = 0.03
    leg_mass: LegMassConfig = field(default_factory=LegMassConfig)

    def __post_init__(self):
        if self.estimator not in PAYLOAD_ESTIMATORS:
            raise ValueError(f"payload estimator must be one of {PAYLOAD_ESTIMATORS}, got {self.estimator!r}")
        if self.body not in PAYLOAD_BODIES:
            raise ValueError(f"payload body must be one of {PAYLOAD_BODIES}, got {self.body!r}")

    @property
    def uses_rls(self) -> bool:
        return "rls" in self.estimator


@dataclass(frozen=True)
class ActuatorConfig:
    """Actuator model identified with the payload (:class:`mcoe_ros.multibody.actuator.ActuatorModel`): viscous and
    smoothed Coulomb friction and rotor inertia per joint type ('type') or per joint ('joint'). The parameters are
    positive: they are estimated on a log scale, with log-normal priors (median, std of the logarithm). The default
    medians are Go1-like magnitudes (damping ~1-2 N m s/rad, Coulomb ~0.2 N m, reflected rotor inertia ~0.01 kg m^2),
    the bounds physical maxima; windows without joint motion do not update them
    (:mod:`mcoe_ros.estimation.excitation`)."""

    enabled: bool = True  #: on by default: docs/realism.md (a real Go1 has these losses)
    grouping: str = "type"
    coulomb_smoothing: float = 0.05  #: rad/s
    prior_viscous: float = 1.0  #: prior median, N m s/rad
    prior_coulomb: float = 0.2  #: prior median, N m
    prior_rotor_inertia: float = 0.01  #: prior median, kg m^2 (reflected, on top of robot.armature)
    log_sigma: float = 0.5  #: prior std of the logarithm of every actuator parameter
    max_viscous: float = 5.0  #: upper bound, N m s/rad
    max_coulomb: float = 1.0  #: upper bound, N m
    max_rotor_inertia: float = 0.05  #: upper bound, kg m^2
    #: RMS joint velocity of a window (rad/s) below which the parameters are frozen for its solve (0: never)
    min_excitation: float = 0.1


@dataclass(frozen=True)
class ImuBiasConfig:
    """Gyro and accelerometer biases estimated as parameters of the window (IMU frame), with a random walk between
    windows (their prior's covariance grows by walk^2 x elapsed time at every shift)."""

    enabled: bool = False
    #: with ``enabled``: the accelerometer bias estimated too (false: the gyro bias alone, the accelerometer's then
    #: added by consider analysis when ``consider``). On gaits an estimated accelerometer bias trades against the mass
    #: (a systematic surplus of 0.1-0.3 kg, docs/realism.md session 20), where the gyro bias is fixed by the IMU
    #: orientation against the gyro and an unestimated horizontal gyro bias moves the mass by up to 0.2 kg
    #: (docs/realism.md, session 20, helper study)
    accelerometer: bool = True
    #: per axis, rad/s and m/s^2: the spread of the biases of a Go1-class MEMS IMU (issue 13's Go1-like sensors, 0.01
    #: rad/s and 0.05 m/s^2). The prior of the estimated biases (``enabled``) and the uncertainty that ``consider``
    #: adds when they are not estimated (docs/realism.md, session 13: 0.02 / 0.1 made the published pose 2-4x
    #: underconfident on the suite)
    gyro_prior_std: float = 0.01
    accelerometer_prior_std: float = 0.05
    #: with the biases not estimated (``enabled`` false; the accelerometer's alone with ``accelerometer`` false): add
    #: their uncertainty (the prior stds above) to the published pose, twist and payload covariances by consider
    #: analysis, S Σ_b Sᵀ with S the estimate's first-order sensitivity to constant biases
    #: (:meth:`mcoe_ros.ocp.solver.MCOESolver.terminal_covariance`). A biased accelerometer tilts the estimated gravity
    #: and moves the payload (docs/realism.md, session 12), which the Gauss–Newton covariance of a bias-free model
    #: cannot show (issue 14, calibrated uncertainty)
    consider: bool = True
    #: rad about the IMU's x and y axes: the tilt error of the IMU's orientation reading, which comes from the IMU's
    #: own attitude filter (its accelerometer's bias over g: accelerometer_prior_std / g ≈ 5 mrad, slowly varying),
    #: added to the published covariances by consider analysis as a constant rotation offset of the reading (with
    #: ``consider``; whether the biases are estimated or not); noise.orientation is its white part. 0 = off
    #: (docs/realism.md, session 25)
    orientation_offset_std: float = 0.005
    #: with the biases not estimated: learn the gyro's horizontal bias from the orientation reading's long-term tilt
    #: (:class:`mcoe_ros.estimation.gyro_bias.GyroBiasTracker`, a 6-state Kalman filter outside the window), subtract
    #: it from every gyro sample and let the consider analysis add its remaining uncertainty instead of
    #: gyro_prior_std (docs/realism.md, session 26: the window's unestimated gyro bias leans the tilt by ~1.5 s x b)
    attitude_tracking: bool = True
    #: rad: the reading's tilt error per tracker update (its filter's fluctuations, 1-12 mrad on the suite)
    attitude_tracking_error: float = 0.015
    #: s between tracker updates: no shorter than the reading's error correlation time (0.15-0.5 s on the suite)
    attitude_tracking_interval: float = 0.5
    #: with attitude_tracking: learn the gyro's bias about the world vertical, which the reading cannot see, from the
    #: settled stance feet's turn in the IMU frame against the integrated gyro
    #: (:class:`mcoe_ros.estimation.gyro_bias.StanceYaw`; intervals of at most attitude_tracking_interval), and give
    #: the window the reading turned to the tracker's heading (a 6-axis filter's yaw drifts at that bias). Off for an
    #: IMU whose yaw does not drift (a magnetometer's, motion capture): the gyro's heading would only add its error
    stance_yaw: bool = True
    #: m/s: the speed std of a settled foot relative to the others (creep, sinking, encoders; its rolling is
    #: compensated), 2-4 mm/s on the suite's floors (docs/realism.md, session 27)
    stance_yaw_foot_speed: float = 0.003
    #: with the accelerometer bias not estimated: learn its component along the IMU's z axis from the settled stance
    #: feet's kinematic velocity against the integrated specific force
    #: (:class:`mcoe_ros.estimation.accelerometer_bias.VerticalAccelerometerBias`, an IMU + leg-kinematics filter
    #: outside the window; accelerometer_prior_std, accelerometer_random_walk), subtract it from every specific-force
    #: sample and let the consider analysis add its remaining uncertainty on z instead of accelerometer_prior_std. On a
    #: gait the window reads a bias along gravity as payload mass, (M / g) b_z (docs/realism.md, session 29)
    vertical_accelerometer_tracking: bool = True
    gyro_random_walk: float = 1e-3  #: rad/s/sqrt(s)
    accelerometer_random_walk: float = 1e-2  #: m/s^2/sqrt(s)


ROBUST_LOSSES = ("quadratic", "huber", "cauchy")
COVARIANCE_SCALINGS = ("none", "residual", "consistency")


@dataclass(frozen=True)
class RobustConfig:
    """Robust losses (:mod:`mcoe_ros.ocp.robust`, solved by IRLS inside the Gauss–Newton solver; Python backend only:
    a robust problem falls back from the compiled solver) and covariance calibration.

    ``loss`` applies to each interval's process noise (``process``), each stance foot's zero-velocity
    pseudo-measurement (``contact``) and each IMU/encoder measurement block (``sensors``); ``threshold`` c is the RMS
    whitened residual component at which a group becomes an outlier (k² = c² × group size).
    ``covariance_scaling`` (:mod:`mcoe_ros.estimation.calibration`) multiplies the published pose, twist and payload
    covariances by a factor floored at ``covariance_scale_floor`` (the estimator's own belief is unscaled):
    'residual' the window's reduced chi-square σ̂² = 2 J_window / Σ n_r, 'consistency' the mean nested-estimate
    statistic of the payload's mass and CoM at lag ``consistency_lag`` s."""

    loss: str = "quadratic"  #: one of ROBUST_LOSSES
    threshold: float = 2.0  #: c, whitened units per residual component
    process: bool = True
    contact: bool = True
    sensors: bool = False
    covariance_scaling: str = "consistency"  #: one of COVARIANCE_SCALINGS
    covariance_scale_floor: float = 1.0
    consistency_lag: float = 0.5  #: s

    def __post_init__(self):
        if self.loss not in ROBUST_LOSSES:
            raise ValueError(f"robust loss must be one of {ROBUST_LOSSES}, got {self.loss!r}")
        if self.covariance_scaling not in COVARIANCE_SCALINGS:
            raise ValueError(
                f"covariance scaling must be one of {COVARIANCE_SCALINGS}, got {self.covariance_scaling!r}"
            )


DYNAMICS_MODELS = ("rigid", "soft")
RIGID_CONTACT_SETS = ("detected", "settled", "delayed", "unloading")


@dataclass(frozen=True)
class DynamicsConfig:
    """Contact model of the estimator's process model. 'rigid': rigid point contacts of the detected stance feet
    with the impulse map at touchdown (:mod:`mcoe_ros.multibody.dynamics`); 'soft': the implicit invertible soft
    contact of every foot with the ground plane z = ``ground_height`` of the odometry frame
    (:mod:`mcoe_ros.multibody.soft_contact`, normal stiffness 1/(r_n tau²), damping 1/(r_n tau)), one Newton solve per
    interval, Python solver only, no actuator model (``actuator.enabled`` must be false)."""

    model: str = "rigid"  #: one of DYNAMICS_MODELS
    soft_compliance_normal: float = 1e-3  #: r_n, 1/kg
    soft_compliance_tangential: float = 1e-3  #: r_t, 1/kg
    soft_time_constant: float = 0.02  #: tau, s
    soft_smoothing: float = 1.0  #: softplus smoothing of the normal force, N
    ground_height: float = 0.0  #: m, odometry frame (the window starts with the lowest foot at z = 0)
    newton_max_iterations: int = 50  #: per interval step; no convergence holds the tick's solve
    #: which stance feet are rigid contacts of the 'rigid' model (a foot entering the set starts an impulse):
    #: 'detected' every foot the detector flags, from its detected touch-down to its lift-off; 'settled' only the
    #: settled feet (ContactDetector.settled: past contact.settle_time and loaded), 'delayed' from
    #: contact.settle_time after the touch-down to the lift-off, 'unloading' the detected feet except an aged foot
    #: that is no longer settled (ablations: every set but 'detected' measured worse, docs/localisation.md)
    rigid_contacts: str = "detected"
    #: 1/s: > 0 lands a foot over time instead of by the impulse map: a foot that touched down (not one the contact
    #: detector started on) has the velocity gain J a = -γ - landing_damping J v for its first ``landing_time`` s of
    #: stance (its velocity decays at this rate, a soft foot's ~13 ms), and touch-downs apply no impulse; 0 = the
    #: impulse at touch-down (``grid.impulse_on_touchdown``). Chosen on the realism suite (docs/realism.md session 18)
    landing_damping: float = 75.0
    landing_time: float = 0.05  #: s of stance with the landing damping (``landing_damping`` > 0 only)
    #: m; rigid model, > 0: a round foot's contact point, this far straight below the foot frame at the knot (from
    #: the knot's encoders and IMU orientation, an input of the interval): the stance-foot velocity pseudo-measurement
    #: measures that point's velocity, not the foot frame's (a foot rolling without slip). The foot's radius on a hard
    #: floor (Go1 0.02), less where the foot sinks into a soft one (docs/localisation.md sessions 22, 23); 0 = the
    #: foot frame; needs ``robot.foot_contact_offset`` 0. Default 0.015: between the suite's soft (~0.012) and hard
    #: (~0.018) floors' contact depths, chosen on the realism suite (docs/localisation.md session 23)
    rolling_radius: float = 0.015
    #: with ``rolling_radius`` > 0: the rigid contacts (stance and landing) at the rolling point too, where the ground
    #: force then acts and the dynamics hold the material point (:mod:`mcoe_ros.multibody.dynamics`); False: the
    #: contacts at the foot frames (the payload's CoM measured better so, docs/localisation.md session 23)
    rolling_contacts: bool = False

    def __post_init__(self):
        if not (0.0 <= self.landing_damping < 1e4) or not (0.0 < self.landing_time <= 10.0):
            raise ValueError("need 0 <= landing_damping < 1e4 (1/s) and 0 < landing_time <= 10 (s)")
        if not 0.0 <= self.rolling_radius <= 0.2:
            raise ValueError("need 0 <= rolling_radius <= 0.2 (m)")
        if self.model not in DYNAMICS_MODELS:
            raise ValueError(f"dynamics model must be one of {DYNAMICS_MODELS}, got {self.model!r}")
        if self.rigid_contacts not in RIGID_CONTACT_SETS:
            raise ValueError(f"rigid contact set must be one of {RIGID_CONTACT_SETS}, got {self.rigid_contacts!r}")


@dataclass(frozen=True)
class SolverConfig:
    """Iteration budget and solver variants per tick."""

    max_iterations: int = 1  #: per warm-started tick (real-time iteration; 3 measured no better, docs/tworate.md)
    max_iterations_cold: int = 10  #: of a solve from scratch (first tick, restarts)
    #: at most this many of a cold start's max_iterations_cold per tick (a bounded tick): the window shifts between
    #: them like a warm tick, keeping the prior of a problem built from scratch, and nothing is published until the
    #: budget is spent or the solve converged (``warmup_ticks`` in diagnostics). 0 = the whole budget in one tick
    cold_iterations_per_tick: int = 0
    time_budget: float = 0.0  #: wall-time budget per tick, s (0 = none: deterministic)
    rollout: str = "multiple"  #: 'multiple', 'feasible' or 'single'
    arrival: str = "auto"  #: 'auto', 'schur' or 'nullspace'
    #: 'auto' (the compiled solver when the extension is built and supports the problem, else the Python
    #: reference), 'python' or 'compiled' (an error if unavailable)
    backend: str = "auto"
    #: OpenMP threads of the compiled solver's per-knot loops (linearisations, line-search trial rollouts; the results
    #: do not depend on it, bit for bit). 0 = auto: 2 with at least 4 usable cores, else 1 (a replay as fast as it
    #: goes: 2 with at least 2)
    #: (:func:`mcoe_ros.multibody.compiled.knot_threads`; docs/performance.md run 9). The threads are created by the
    #: solve thread and share its niceness (the sensor callbacks keep priority)
    threads: int = 0
    #: knots (two interval data each, ~2 MB for the Go1) that a shift of the compiled solver drops and no new knot
    #: takes, kept for the new knots of later shifts: a gait returns to its contact phases, whose knots then need no
    #: allocation. -1 = one window (N + 1), 0 = none. Off by default: on the 10 s sample bag the spares cut the
    #: allocations 3.8x and the shift's mean, but while the pool fills its allocations take fresh pages and the
    #: tick p99 grew 32 -> 43 ms, RSS +214 MB (docs/performance.md run 10)
    spare_knots: int = 0


@dataclass
class EstimatorConfig:
    """Everything the estimator core needs."""

    robot: RobotSpec = field(default_factory=RobotSpec)
    grid: GridConfig = field(default_factory=GridConfig)
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    payload: PayloadConfig = field(default_factory=PayloadConfig)
    actuator: ActuatorConfig = field(default_factory=ActuatorConfig)
    imu_bias: ImuBiasConfig = field(default_factory=ImuBiasConfig)
    solver: SolverConfig = field(default_factory=SolverConfig)
    robust: RobustConfig = field(default_factory=RobustConfig)
    dynamics: DynamicsConfig = field(default_factory=DynamicsConfig)
    contact: ContactConfig = field(default_factory=ContactConfig)
