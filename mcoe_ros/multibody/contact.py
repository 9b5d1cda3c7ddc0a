"""Contact detection from the dynamics: ground reaction forces estimated from joint torques, with hysteresis.

For foot i on leg i, the leg rows of the floating-base dynamics read
    tau_leg = M_leg,: a + h_leg(q, v) - J_leg^T f_i,
because a foot force only enters the rows of its own leg. Hence f_i = J_leg^{-T} (M_leg,: a + h_leg - tau_leg),
with J_leg the 3x3 leg block of the foot's LOCAL_WORLD_ALIGNED translation Jacobian and f_i the force on
the robot from the ground, in world axes. The base motion in (v, a) comes from the IMU through
:func:`mcoe_ros.multibody.imu.base_motion` (specific force + gravity, lever arm, angular acceleration); joint and
angular accelerations are optional but matter: without them a swinging leg's inertia reads as up to
+-10 N of ground force on the Go1, with them (backward differences, as the sliding window passes) about +-4 N,
which allows the low thresholds that catch a touch-down early. A foot is in contact when the vertical force
exceeds ``force_on`` and stays above ``force_off`` for ``min_duration`` (a landing's force rings through the band; a
one-sample spike in flight is no touch-down), and leaves it when it stays below ``force_off`` as long while it
moves relative to the other stance feet faster than ``lift_off_speed`` (else only below ``force_off_still``: a sway
unloads a foot to a few N without lifting it, and a force threshold alone lifted it for 0.1-0.3 s on every sway of
the realism suite, with an impulse on its return; ``docs/realism.md`` session 16). With ``backdate`` a confirmed
change dates from the first sample that wanted it (:attr:`ContactDetector.onset`): ``min_duration`` rejects a
one-sample blip without delaying the contact phase (a touch-down one 2 ms knot late biased a trot's payload CoM by
~40 mm, ``docs/realism.md`` session 17). A stance foot is
*settled* (:meth:`ContactDetector.settled`: its zero-velocity pseudo-measurement is used) from ``settle_time`` after
its touch-down while its vertical force is at least ``settle_fraction`` of the stance feet's mean.
Raw foot-force sensors (uncalibrated on the Go1, sometimes zero) are only an optional extra cue.

``method = 'momentum'`` (default): a generalized-momentum observer per leg (De Luca & Mattone 2003, Haddadin et al.
2017) in place of the inverse dynamics above ('dynamics'). The leg's *reduced* momentum p_l = M_l,w w + M_l,l dq_l
(leg rows of M nu0, nu0 = (0, w, dq): the base linear velocity, which the IMU does not give, set to zero) contains no
unknown: M in Pinocchio's local free-flyer coordinates depends on the joint angles only, w is the gyro. Its rate is

    dp_l/dt = tau_l + J_l^T f - M_l,lin s_O + (C(q, nu0)^T nu0)_l,

from d(M nu)/dt = tau + J^T f + C^T nu - g (dM/dt = C + C^T), the generalized gravity of a free-floating robot
g = -M (R^T g_W, 0, ..., 0), and the boost invariance of the leg rows (their terms in the base linear velocity cancel,
so they are evaluated at zero, where the base acceleration is the classical a_O): s_O = a_O - R^T g_W is the specific
force of the base origin (accelerometer with the lever arm), base axes. Exact, no approximation beyond the model's
(test_contact_observer.py checks it by finite differences on a moving base). The residual (leg rows)

    r_k = (1 - K dt) r_{k-1} + K dt [(p_k - p_{k-1}) / dt - mean(rhs_{k-1}, rhs_k)],  rhs = tau - M_l,lin s_O + C^T nu0

is the discrete first-order filter r = K / (s + K) J^T f (K = ``observer_gain``, 1/s). No joint or angular
acceleration is differentiated and the torques are averaged over the interval that the momentum change spans: the
inverse dynamics instead pairs the interval's mean (backward-differenced) acceleration with the torque at its end,
which reads a fast torque change, e.g. a leg unloading at lift-off, times the rotor inertia as foot force. The
rotor inertia I_r (armature) enters only as I_r dq in p; a *wrong* I_r still reads as I_r dq-dot filtered (the
observer cannot tell a wrong model from a force). At K dt >= 1 (the default at 500 Hz) r is the interval's mean
J^T f, half a sample late; a lower K trades delay for noise. f = J_l^-T r.

Re-touch guard (``retouch_time`` > 0, 0.03 s by default; 0 = the previous rules). When the last stance feet leave
the ground the legs and the base change their accelerations within a sample (the specific force jumps, the
controller switches to flight) and the force estimate of *every* leg rings for a few samples: e.g. -29, +29, +9, +4
N on a 500 Hz pronk, a pattern that sums to about zero (the momentum change is right, its split over the samples is
not). With the hysteresis above, the positive half-wave re-lands feet that are retracting in the air (a touch-down
needs force_on for min_duration, then holds down to force_off), and it cancels the pending lift-off of the last pair
(two feet that unload together do not move relative to each other, so they are held until force_off_still). The
rigid contacts then hold the retracting feet still and the window loses the take-off velocity (docs/localisation.md,
"The jump's height drop on today's code"). With the guard, stance feet below force_off while no stance foot is
loaded (>= force_off) lift off at that sample (nothing carries the robot: it is leaving the ground), and for
``retouch_time`` after the flight's onset (:attr:`ContactDetector.flight_time`, the last stance foot's lift-off),
while every foot is in the air, a touch-down needs the force above force_on for ``retouch_duration`` (the hysteresis
band does not hold it): the ring decays through force_on within a few samples, a landing stays far above it. With
``backdate`` the confirmed touch-down still dates from its first loaded sample. Only flights: a foot that lifts off
while others stand (a trot's lightly loaded foot whose force estimate hovers about force_off in a three-leg phase)
re-lands through the hysteresis as without the guard (the first version guarded every lift-off and changed the
trots' flags there)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.imu import GRAVITY, base_motion, imu_mount
from mcoe_ros.multibody.robot import RobotModel

try:  # the compiled force estimates (same numbers, cheaper per sample); optional like the whole extension
    from mcoe_ros._mcoe import ContactForces as _CompiledForces
    from mcoe_ros._mcoe import Robot as _CompiledRobot
except ImportError:
    _CompiledForces = _CompiledRobot = None


CONTACT_METHODS = ("dynamics", "momentum")
_NO_BASE = np.zeros(0)  #: the compiled momentum's specific force without a floating base
_LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED  #: the feet's velocities for the lift-off motion test


def _copied(*arrays) -> tuple:
    """Float copies of a sample's arrays (None kept): the observer keeps the previous sample."""
    return tuple(None if a is None else np.array(a, dtype=float) for a in arrays)


@dataclass
class ContactConfig:
    force_on: float = 8.0  #: N, vertical force to enter contact (Go1 stance foot: 30-100 N)
    force_off: float = 4.0  #: N, vertical force to leave contact (a foot that moves, see lift_off_speed)
    #: N, vertical force below which a foot that does not move leaves contact too (a sway unloads a foot to a few N
    #: without lifting it); > force_off: no motion test
    force_off_still: float = 1.0
    #: m/s, a stance foot moves (leaves contact below force_off) when its velocity relative to the mean of the other
    #: stance feet exceeds this (gyro + leg kinematics: the base's unknown linear velocity cancels); a foot that is
    #: alone on the ground always counts as moving
    lift_off_speed: float = 0.1
    min_duration: float = 0.002  #: s, a new state must persist this long
    #: a change confirmed after min_duration dates from the first sample that wanted it (:attr:`ContactDetector.onset`;
    #: the window relabels its knots since then): the confirmation is not a delay of the contact phase
    backdate: bool = True
    use_foot_force: bool = False  #: also require the raw foot-force cue
    foot_force_threshold: float = 20.0  #: raw sensor units
    #: fraction of the stance feet's mean vertical force above which a stance foot is settled (its zero-velocity
    #: pseudo-measurement is used); below it, while loading at touch-down and unloading before lift-off, the foot
    #: still slides and rolls (relative, so that a standing robot's evenly loaded feet are all settled)
    settle_fraction: float = 0.7
    settle_time: float = 0.03  #: s, a stance foot is settled only this long after its touch-down
    #: force estimate: 'momentum' (generalized-momentum observer per leg, no differentiated accelerations; module
    #: docstring) or 'dynamics' (inverse dynamics of the leg rows with backward-differenced accelerations)
    method: str = "momentum"
    observer_gain: float = 500.0  #: 1/s, momentum observer bandwidth K (K dt >= 1: no filtering)
    #: s, > 0: lift-offs that the force estimate's ringing cannot undo (module docstring, "Re-touch guard"): stance
    #: feet below force_off while no stance foot is loaded (>= force_off) lift off at that sample, and for this long
    #: after the flight's onset (the last stance foot's lift-off) a foot re-enters contact only when its force stays
    #: above force_on for retouch_duration (not through the hysteresis band); 0 = off
    retouch_time: float = 0.03
    retouch_duration: float = 0.006  #: s, persistence above force_on of a touch-down within retouch_time

    def __post_init__(self) -> None:
        if self.method not in CONTACT_METHODS:
            raise ValueError(f"contact method must be one of {CONTACT_METHODS}, got {self.method!r}")
        if not self.observer_gain > 0.0:
            raise ValueError(f"contact observer_gain must be > 0 1/s, got {self.observer_gain}")
        if not (self.retouch_time >= 0.0 and self.retouch_duration >= 0.0):
            raise ValueError(
                f"contact retouch_time and retouch_duration must be >= 0 s, got {self.retouch_time}, "
                f"{self.retouch_duration}"
            )


class ContactDetector:
    """Per-foot contact flags (model foot order) from joint torques, encoders and the IMU.

    ``compiled``: estimate the forces with the compiled extension (``mcoe_ros._mcoe.ContactForces``, the same
    Pinocchio calls in C++ for both methods: the inverse dynamics and the observer's momentum, right-hand side and leg
    solves; it runs once per input sample); None = when it is built, False = always in Python (the reference; tests
    compare the two). Leg bodies scaled by :meth:`set_leg_scale` are computed in Python."""

    def __init__(self, robot: RobotModel, config: ContactConfig | None = None, compiled: bool | None = None):
        self.robot = robot
        self.config = config or ContactConfig()
        self.data = robot.create_data()
        nf = len(robot.foot_frame_ids)
        self.flags = np.zeros(nf, dtype=bool)
        self._pending_since = np.full(nf, np.nan)
        self._stance_since = np.full(nf, np.nan)  #: time each foot's contact flag turned on (settled)
        #: s, when each foot's current flag began (the first sample that wanted it, with ``backdate``; else the
        #: confirming sample); nan = the initial state
        self.onset = np.full(nf, np.nan)
        self.lift_time = np.full(nf, np.nan)  #: s, onset of each foot's last lift-off (nan: none since the start)
        #: s, onset of the present flight (the last stance foot's lift-off; nan: a foot is down, or no lift-off yet)
        self.flight_time = np.nan
        #: stance feet down for at least settle_time at the last call of settled() (nfeet,)
        self.aged = np.zeros(nf, dtype=bool)
        #: s, the first update since the (re)start; stances that begin later are landings (nan: none yet)
        self.start_time = np.nan
        #: stance feet whose stance began with a touch-down after the start, at the last call of settled() (nfeet,;
        #: the feet the detector starts on did not land)
        self.landed = np.zeros(nf, dtype=bool)
        #: s each foot had been down at the last call of settled() (nfeet,; 0 in the air)
        self.stance_time = np.zeros(nf)
        self.forces = np.zeros((nf, 3))
        # columns of each foot's leg: the actuated joints that support the foot frame
        self._leg_cols = []
        for fid in robot.foot_frame_ids:
            joint = robot.model.frames[fid].parentJoint
            cols = []
            while joint > (1 if robot.spec.floating_base else 0):
                cols.append(robot.model.joints[joint].idx_v)
                joint = robot.model.parents[joint]
            self._leg_cols.append(np.array(sorted(cols)))
        self._mount = imu_mount(robot) if robot.nu_base else None
        self._model = robot.model.copy()  #: own copy: the identified rotor inertia goes into its armature
        if compiled and _CompiledForces is None:
            raise ValueError("ContactDetector: the compiled extension (ContactForces) is not built")
        self._compiled = None
        if compiled is not False and _CompiledForces is not None:
            feet = [int(f) for f in robot.foot_frame_ids]
            legs = [[int(c) for c in cols] for cols in self._leg_cols]
            self._compiled = _CompiledForces(_CompiledRobot(robot.model.saveToString()), feet, legs)
        self._actuator = None  #: (ActuatorModel, parameters) set by set_actuator
        self._q = robot.neutral()
        self._v = np.zeros(robot.nv)
        self._a = np.zeros(robot.nv)
        self._tau = np.zeros(robot.nv)
        self._jac_t = np.zeros((nf, 3, 3))  #: per leg: J^T of the foot's translation w.r.t. its 3 joints
        self._rhs_legs = np.zeros((nf, 3))
        self._legs = np.concatenate(self._leg_cols)  #: leg rows of all feet, in foot order (nfeet * 3,)
        #: momentum observer state: previous reduced momentum and right-hand side (leg rows), residual J^T f (leg rows)
        self._obs_p: np.ndarray | None = None
        self._obs_rhs = np.zeros(len(self._legs))
        self._obs_sample: tuple | None = None  #: the previous sample's inputs (its p, rhs again after a model change)
        self._obs_stale = False  #: the model changed since the previous sample (set_actuator, set_leg_scale)
        self._obs_r = np.zeros(len(self._legs))

    def reset(self) -> None:
        self._obs_p = None
        self.flags[:] = False
        self._pending_since[:] = np.nan
        self._stance_since[:] = np.nan
        self.onset[:] = np.nan
        self.lift_time[:] = np.nan
        self.flight_time = np.nan
        self.stance_time[:] = 0.0
        self.start_time = np.nan
        self.landed[:] = False

    def settled(self, t: float, flags: np.ndarray, forces: np.ndarray) -> np.ndarray:
        """Which stance feet of ``flags`` (nfeet,) at time t (s) are settled: in contact for at least
        ``settle_time`` (since the flag turned on, as seen by the calls to this method) and loaded with a vertical
        force (``forces`` (nfeet, 3), N) of at least ``settle_fraction`` times the stance feet's mean. Only settled
        feet get the zero-velocity pseudo-measurement (``docs/localisation.md``: the feet slide and roll while loading
        and unloading)."""
        flags = np.asarray(flags, dtype=bool)
        since = self._stance_since
        since[~flags] = np.nan
        new = flags & np.isnan(since)
        since[new] = np.where(self.onset[new] <= t, self.onset[new], t)  # nan onset: compares False
        cfg = self.config
        fz = forces[:, 2]
        mean = float(fz[flags].mean()) if flags.any() else 0.0
        self.stance_time = np.where(flags, t - since, 0.0)
        self.aged = flags & (self.stance_time >= cfg.settle_time - 1e-9)
        self.landed = flags & (since > self.start_time + 1e-9)  # nan start: compares False
        return self.aged & (fz >= cfg.settle_fraction * mean)

    def estimate_forces(
        self, quat_wxyz, gyro, acc, qj, dqj, tau, ddqj=None, domega_imu=None, dt: float | None = None
    ) -> np.ndarray:
        """Ground reaction forces (nfeet, 3) on the robot, world axes, N, from one IMU sample (IMU frame: quaternion
        w, x, y, z, gyro rad/s, specific force m/s^2, optional angular acceleration rad/s^2), the joints (model
        order, rad, rad/s, N m, optional accelerations rad/s^2). The base motion comes from
        :func:`mcoe_ros.multibody.imu.base_motion` (IMU mounting and lever arm from the URDF).

        ``method = 'momentum'``: dt (s) since the previous call of this stream; None (first sample, after a gap)
        restarts the observer at the inverse-dynamics estimate of this sample (ddqj, domega_imu used there only)."""
        if self.config.method == "momentum" and dt is not None and self._obs_p is not None:
            return self._observe(quat_wxyz, gyro, acc, qj, dqj, tau, domega_imu, dt)
        forces = self._inverse_dynamics(quat_wxyz, gyro, acc, qj, dqj, tau, ddqj, domega_imu)
        if self.config.method == "momentum":
            compiled = self._compiled  # one backend per step: the legs' J^T stay where _momentum put them
            sample = _copied(quat_wxyz, gyro, acc, qj, dqj, tau, domega_imu)
            self._obs_p, self._obs_rhs[:] = self._momentum(*sample, compiled=compiled)
            self._obs_sample, self._obs_stale = sample, False
            jac_t = self._jac_t if compiled is None else compiled.jacobians_t.reshape(-1, 3, 3)
            self._obs_r[:] = np.einsum("fij,fj->fi", jac_t, forces).ravel()
        return forces

    def _set_state(self, quat_wxyz, gyro, acc, qj, dqj, domega_imu):
        """Fill self._q, self._v from one sample with a zero base linear velocity; the base motion (None without a
        floating base)."""
        model, nb = self.robot.model, self.robot.nu_base
        q, v = self._q, self._v
        base = None
        if nb:
            base = base_motion(self._mount, quat_wxyz, gyro, acc, domega_imu)
            q[3:7] = base.quat_xyzw
            v[:6] = 0.0  # zero base linear velocity is exact for the leg rows (Galilean boost), with a = a_O
            v[3:6] = base.omega
        q[model.nq - len(qj) :] = qj
        v[nb:] = dqj
        return base

    def _inverse_dynamics(self, quat_wxyz, gyro, acc, qj, dqj, tau, ddqj, domega_imu) -> np.ndarray:
        a, nb = self._a, self.robot.nu_base
        base = self._set_state(quat_wxyz, gyro, acc, qj, dqj, domega_imu)
        if base is not None:
            a[:3], a[3:6] = base.acc, base.domega
        a[nb:] = 0.0 if ddqj is None else ddqj
        return self.forces_from_state(self._q, self._v, a, tau)

    def _joint_torque(self, v: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """Joint torques (nv,) (zero on the base rows): reported tau (nj,) minus the identified friction at the
        joint velocities of v (nv,); puts the identified rotor inertia into the armature of the detector's model."""
        nb = self.robot.nu_base
        self._tau[nb:] = tau
        actuator = self._actuator
        if actuator is not None:
            act, params, armature = actuator
            self._model.armature[:] = armature
            self._tau[nb:] -= act.loss(v[nb:], params)
        return self._tau

    def _observer_inputs(self, quat_wxyz, gyro, acc, qj, dqj, tau, domega_imu) -> tuple:
        """The observer's inputs of one sample: (q (nq,), v (nv,) with a zero base linear velocity, joint torques
        after friction (nv,) (zero base rows), the detector model's armature (nv,), the specific force of the base
        origin s_O = a_O - R^T g_W (3,), m/s^2, base axes, or None without a floating base)."""
        base = self._set_state(quat_wxyz, gyro, acc, qj, dqj, domega_imu)
        tau_j = self._joint_torque(self._v, tau)
        spec = None if base is None else base.acc - base.rotation.T @ GRAVITY
        return self._q, self._v, tau_j, self._model.armature, spec

    def _compiled_inputs(self, sample: tuple) -> tuple:
        """:meth:`_observer_inputs` as the compiled ContactForces.momentum / observe take them (actuated torques)."""
        q, v, tau_j, armature, spec = self._observer_inputs(*sample)
        return q, v, tau_j[self.robot.nu_base :], armature, _NO_BASE if spec is None else spec

    def _momentum(self, quat_wxyz, gyro, acc, qj, dqj, tau, domega_imu, compiled=None) -> tuple[np.ndarray, np.ndarray]:
        """(reduced momentum p, right-hand side tau - M_lin s_O + C^T nu0), leg rows (nfeet * 3,), of one sample
        (module docstring); leaves the configuration in self._q and J_leg^T in self._jac_t, or in ``compiled`` (the
        compiled ContactForces) when given, which computes them."""
        sample = (quat_wxyz, gyro, acc, qj, dqj, tau, domega_imu)
        if compiled is not None:
            return compiled.momentum(*self._compiled_inputs(sample))
        model, data, legs = self._model, self.data, self._legs
        q, v, tau_j, _, spec = self._observer_inputs(*sample)
        mass = pin.crba(model, data, q)  # upper triangle, armature on the diagonal
        mass = np.triu(mass) + np.triu(mass, 1).T
        p = mass[legs] @ v
        rhs = tau_j[legs] + pin.computeCoriolisMatrix(model, data, q, v)[:, legs].T @ v
        if spec is not None:
            rhs -= mass[legs, :3] @ spec
        self._jacobians(q)
        return p, rhs

    def _jacobians(self, q: np.ndarray) -> None:
        """Per foot J_leg^T (nfeet, 3, 3) into self._jac_t: the foot's translation Jacobian (world axes) w.r.t. its
        leg's joints, at q (nq,)."""
        model, data = self._model, self.data
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        for i, fid in enumerate(self.robot.foot_frame_ids):
            jac = pin.getFrameJacobian(model, data, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
            self._jac_t[i] = jac[:3, self._leg_cols[i]].T

    def _observe(self, quat_wxyz, gyro, acc, qj, dqj, tau, domega_imu, dt: float) -> np.ndarray:
        """One momentum-observer step over dt (s); forces (nfeet, 3), world axes, N. After a model change (identified
        actuator or legs) the previous sample's momentum is recomputed with the new model: the change of model is
        no change of momentum (else a swinging leg reads Delta I_r dq / dt as force once per solve)."""
        compiled = self._compiled  # one backend per step: the legs' J^T stay where _momentum put them
        if self._obs_stale:
            self._obs_stale = False
            self._obs_p, self._obs_rhs[:] = self._momentum(*self._obs_sample, compiled=compiled)
        sample = _copied(quat_wxyz, gyro, acc, qj, dqj, tau, domega_imu)
        self._obs_sample = sample
        gain = min(self.config.observer_gain * dt, 1.0)
        if compiled is not None:  # the same step in one call, the observer state updated in place
            state = (self._obs_p, self._obs_rhs, self._obs_r)
            self.forces[:] = compiled.observe(*self._compiled_inputs(sample), dt, gain, *state)
            return self.forces
        p, rhs = self._momentum(*sample)
        r = self._obs_r
        r *= 1.0 - gain
        r += gain * ((p - self._obs_p) / dt - 0.5 * (rhs + self._obs_rhs))
        self._obs_p, self._obs_rhs[:] = p, rhs
        self._rhs_legs[:] = r.reshape(-1, 3)
        return self._solve_legs()

    def set_actuator(self, actuator, params: np.ndarray) -> None:
        """Use an identified actuator model (:class:`mcoe_ros.multibody.actuator.ActuatorModel` and its parameters):
        the joint torque is the reported torque minus the friction, and the rotor inertia is added (thread-safe
        swap: the detector may run in another thread)."""
        params = np.array(params, dtype=float)
        armature = self.robot.model.armature.copy()
        armature[self.robot.nu_base :] += actuator.rotor_inertia(params)
        self._actuator = (actuator, params, armature)
        self._obs_stale = True

    def set_leg_scale(self, scale: float) -> None:
        """Use identified leg bodies: every body but the payload's parent gets ``scale`` times its URDF inertial
        parameters (the estimator's leg mass scale, :class:`mcoe_ros.multibody.actuator.ParameterLayout`)."""
        model = self.robot.model.copy()  # swapped in whole: the detector may run in another thread
        model.armature[:] = self._model.armature
        for j in self.robot.leg_joints:
            nom = self.robot.nominal_inertias[j]
            model.inertias[j] = pin.Inertia(scale * nom.mass, nom.lever, scale * nom.inertia)
        self._model = model
        self._obs_stale = True
        if scale != 1.0:  # the compiled estimate holds the URDF's legs: the reference computes the scaled ones
            self._compiled = None

    def forces_from_state(self, q: np.ndarray, v: np.ndarray, a: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """Ground reaction forces (nfeet, 3), world axes, N, from a full state q (nq,), v (nv,), a (nv,) and the
        actuated-joint torques tau (nj,) (Pinocchio conventions; only the leg rows of the dynamics are used).

        Exact for any base linear velocity if a[:3] is the matching spatial acceleration (classical - w x v).
        """
        model, data, nb = self._model, self.data, self.robot.nu_base
        self._joint_torque(v, tau)
        if self._compiled is not None:
            self.forces[:] = self._compiled.compute(q, v, a, self._tau[nb:], model.armature)
            return self.forces
        rhs = pin.rnea(model, data, q, v, a) - self._tau  # = J^T f, leg rows
        self._jacobians(q)
        self._rhs_legs[:] = rhs[self._legs].reshape(-1, 3)
        return self._solve_legs()

    def _solve_legs(self) -> np.ndarray:
        """self.forces (nfeet, 3) = J_leg^-T of self._rhs_legs (nfeet, 3) per foot (J^T f, leg rows, N m)."""
        jac_t, rhs_legs = self._jac_t, self._rhs_legs
        try:  # all legs in one call (it runs per input sample: a quarter of the cost of one call per leg)
            self.forces[:] = np.linalg.solve(jac_t, rhs_legs[..., None])[..., 0]
        except np.linalg.LinAlgError:  # a singular leg (fully stretched) gives no information; the others do
            for i in range(len(self.forces)):
                try:
                    self.forces[i] = np.linalg.solve(jac_t[i], rhs_legs[i])
                except np.linalg.LinAlgError:
                    self.forces[i] = 0.0
        return self.forces

    def _moving(self, feet: np.ndarray) -> np.ndarray:
        """Which of the stance feet ``feet`` (nfeet,) bool move: their velocity relative to the mean of the other
        stance feet (world axes, from the last sample's orientation, gyro and joints, the base linear velocity zero,
        which cancels) above ``lift_off_speed``; a foot without another stance foot counts as moving."""
        model, data = self._model, self.data
        pin.forwardKinematics(model, data, self._q, self._v)
        vel = np.array(
            [pin.getFrameVelocity(model, data, fid, _LWA).linear for fid in self.robot.foot_frame_ids]
        )  # updateFramePlacements not needed: the frame velocity uses the joint's placement and velocity
        moving = np.zeros(len(feet), dtype=bool)
        for i in np.flatnonzero(feet):
            others = self.flags.copy()
            others[i] = False
            if not others.any():
                moving[i] = True
                continue
            moving[i] = np.linalg.norm(vel[i] - vel[others].mean(axis=0)) > self.config.lift_off_speed
        return moving

    def update(self, t: float, forces: np.ndarray, foot_force=None) -> np.ndarray:
        """Advance the hysteresis with forces (nfeet, 3) at time t; returns the boolean flags (nfeet,)."""
        cfg = self.config
        if np.isnan(self.start_time):
            self.start_time = t
        fz = forces[:, 2]
        want_on = fz > cfg.force_on
        want_off = fz < cfg.force_off
        unsure = want_off & self.flags  # stance feet below force_off: unloaded, but they may still stand
        guard = cfg.retouch_time > 0.0
        # with the re-touch guard: stance feet below force_off while no stance foot is loaded (>= force_off) lift off
        # at this sample (the robot leaves the ground; the force estimate rings there, see the module docstring)
        quick = unsure & ~(self.flags & ~want_off).any() if guard else np.zeros_like(unsure)
        if unsure.any():
            unsure &= fz >= cfg.force_off_still
            unsure &= ~quick
            if unsure.any():
                want_off &= ~unsure | self._moving(unsure)
        if cfg.use_foot_force and foot_force is not None:
            want_on &= np.asarray(foot_force) >= cfg.foot_force_threshold
        # a pending touch-down holds while the force stays above force_off: a landing's force rings through the
        # hysteresis band (its onset is the first crossing of force_on, not the last)
        holds_on = fz >= cfg.force_off
        for i in range(len(self.flags)):
            wants_change = want_off[i] if self.flags[i] else want_on[i]
            duration = 0.0 if quick[i] else cfg.min_duration
            hold = holds_on[i]
            if guard and not self.flags[i]:  # a touch-down that begins within retouch_time of the flight's onset
                began = t if np.isnan(self._pending_since[i]) else self._pending_since[i]
                if began - self.flight_time < cfg.retouch_time - 1e-9:  # nan (not in flight) compares False
                    duration, hold = cfg.retouch_duration, False
            if not wants_change and not (hold and not self.flags[i] and np.isfinite(self._pending_since[i])):
                self._pending_since[i] = np.nan
                continue
            if np.isnan(self._pending_since[i]):
                self._pending_since[i] = t
            if t - self._pending_since[i] >= duration - 1e-9:
                self.flags[i] = not self.flags[i]
                self.onset[i] = self._pending_since[i] if cfg.backdate else t
                if not self.flags[i]:
                    self.lift_time[i] = self.onset[i]
                self._pending_since[i] = np.nan
        if self.flags.any():
            self.flight_time = np.nan
        elif np.isnan(self.flight_time) and np.isfinite(self.lift_time).any():
            self.flight_time = float(np.nanmax(self.lift_time))
        return self.flags.copy()
