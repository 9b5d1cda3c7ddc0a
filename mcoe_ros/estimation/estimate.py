"""What the estimator outputs at each tick: the only thing adapters read from a tick (core data class, no ROS)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Estimate:
    """One estimator output.

    Frames: position/orientation of the base frame in the odometry frame (REP-105); linear and angular
    velocity in the base frame (body twist, as nav_msgs/Odometry expects). Covariances are 6x6 over
    (x, y, z, rot_x, rot_y, rot_z) with rotations as tangent-space (local) perturbations of the base, and
    over (v_x, v_y, v_z, w_x, w_y, w_z) for the twist. Payload: pi (10,) in the payload frame ``payload_frame``
    (:mod:`mcoe_ros.multibody.inertia` order; with the 'combined' body the difference between the estimated trunk +
    payload and the URDF trunk, which may have a negative mass) with its 10x10 covariance; ``combined_pi`` is parent
    body + payload in ``combined_frame`` (what an MPC model of the trunk needs); ``rls_payload_pi`` the RLS estimate
    when that estimator runs and has enough data (else None).
    """

    t: float  #: sensor time of the newest knot, s
    position: np.ndarray  #: (3,) m
    quat_xyzw: np.ndarray  #: (4,) base orientation
    linear_velocity: np.ndarray  #: (3,) m/s, base frame
    angular_velocity: np.ndarray  #: (3,) rad/s, base frame
    pose_cov: np.ndarray  #: (6, 6)
    twist_cov: np.ndarray  #: (6, 6)
    payload_pi: np.ndarray  #: (10,)
    payload_cov: np.ndarray  #: (10, 10), pi space
    combined_pi: np.ndarray  #: (10,) parent body + payload, parent joint frame
    theta: np.ndarray  #: (10,) solver parameters (manifold coordinates)
    theta_cov: np.ndarray  #: (10, 10)
    contacts: tuple = ()  #: contact flags, model foot order
    source: str = "oe"  #: which estimator produced the payload ("oe", "rls", "hold")
    status: str = "ok"  #: "ok", or why the last good estimate is being held
    solve: dict = field(default_factory=dict)  #: iterations, cost, solve_time, converged, ...
    rls_payload_pi: np.ndarray | None = None  #: (10,) RLS payload (modes rls, oe+rls) once it has data
    payload_frame: str = ""  #: frame of payload_pi
    combined_frame: str = ""  #: frame of combined_pi (the payload's parent body)
    #: identified actuator parameters and their std ((n,), (n,)): viscous N m s/rad, Coulomb N m, rotor inertia
    #: kg m^2 per joint group (:class:`mcoe_ros.multibody.actuator.ActuatorModel` order), None if not estimated
    actuator: tuple[np.ndarray, np.ndarray] | None = None
    #: IMU biases and their std ((6,), (6,)): gyro rad/s then accelerometer m/s^2, IMU frame; None if not estimated
    imu_bias: tuple[np.ndarray, np.ndarray] | None = None
    #: the legs' identified mass deviation from the URDF and its std, kg ((k - 1) and std(k) times the URDF leg mass,
    #: payload.leg_mass.enabled); None if not estimated
    leg_mass: tuple[float, float] | None = None
    #: the unestimated IMU biases' share of (pose_cov (6, 6), twist_cov (6, 6), payload_cov (10, 10)) (consider
    #: analysis, ``imu_bias.consider``: already included in them); None if not added
    bias_cov: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def is_finite(self) -> bool:
        arrays = (
            self.position,
            self.quat_xyzw,
            self.linear_velocity,
            self.angular_velocity,
            self.pose_cov,
            self.twist_cov,
            self.payload_pi,
            self.payload_cov,
            self.combined_pi,
        )
        return all(bool(np.all(np.isfinite(a))) for a in arrays)
