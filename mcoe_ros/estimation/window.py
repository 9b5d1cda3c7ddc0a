"""The sliding window: sensor streams resampled onto the estimator grid, with contact phases per knot.

Samples arrive asynchronously (joint and IMU streams, possibly at different rates and with jitter). The
window keeps a grid t_k = k dt; a grid knot is created once both streams have samples on either side
of t_k (linear interpolation; normalised lerp for the quaternion). Each new knot runs the dynamics-based
contact detector once (its momentum observer steps over the grid period; the inverse-dynamics method and the
observer's restart use joint and trunk angular accelerations from backward differences of the grid's joint
velocities and gyro, so swing-leg and trunk inertia are not mistaken for ground force), so contact flags are
causal. A change that the detector confirms after ``contact.min_duration`` dates from its onset
(``contact.backdate``): the knots since then are relabelled, but never one older than the newest knot of the last
:meth:`SlidingWindow.snapshot` (a solver's shift rebuilds that one; older knots' models are already solved), so
with the default 2 ms debounce on the 2 ms grid a touch-down or lift-off lands on the knot where its force crossed
the threshold. The window holds the last ``n_knots`` grid knots. A sensor gap longer than
``max_gap`` (or a stream that stalls) restarts the grid. The window counts what its buffers accept and reject
in its own ``stats``. Times should be seconds since a recent epoch (the Estimator subtracts one): Unix-epoch
floats lose ~0.2 us.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from mcoe_ros.estimation.samples import ImuSample, JointSample, SampleStats, StampedBuffer, interp_imu, interp_joint
from mcoe_ros.multibody.contact import ContactDetector


@dataclass
class GridKnot:
    """One knot of the estimator grid: resampled sensors and the detected contact set (model foot order)."""

    t: float
    joint: JointSample
    imu: ImuSample
    contacts: tuple[bool, ...]
    forces: np.ndarray  #: estimated ground reaction forces (nfeet, 3), world axes, N
    #: settled stance feet (their zero-velocity pseudo-measurement is used, ContactDetector.settled); None = contacts
    settled: tuple[bool, ...] | None = None
    #: stance feet down for at least contact.settle_time (ContactDetector.aged); None = contacts
    aged: tuple[bool, ...] | None = None
    #: the first knot after the contact detector's (re)start: its flags are the detector's initial state (no contact
    #: until a force persists for contact.min_duration), so the next knot's contacts are no touch-down
    detector_start: bool = False
    #: s each foot has been down (ContactDetector.stance_time, 0 in the air); None = not known
    stance_time: tuple[float, ...] | None = None
    #: stance feet whose stance began with a touch-down, not at the detector's start (ContactDetector.landed); None =
    #: not known (every stance foot)
    landed: tuple[bool, ...] | None = None
    #: s since the last knot with every foot in the air (0 in a flight; inf: no flight since the grid's (re)start;
    #: the detector's start knots, before any contact was confirmed, are no flight)
    since_flight: float = np.inf

    def down_for(self, duration: float) -> tuple[bool, ...]:
        """The feet down for at least ``duration`` s (the contacts where that is not known)."""
        if self.stance_time is None:
            return self.contacts
        return tuple(c and s >= duration - 1e-9 for c, s in zip(self.contacts, self.stance_time, strict=True))

    @property
    def measured(self) -> tuple[bool, ...]:
        """The feet whose zero-velocity pseudo-measurement is used at this knot."""
        return self.contacts if self.settled is None else self.settled

    def with_contact(self, foot: int, down: bool, since: float, landed: bool = True) -> GridKnot:
        """A copy with foot ``foot``'s flag set to ``down`` from time ``since`` (s; its stance time counts from
        there); a relabelled foot is neither settled nor aged (it has just landed or lifted); ``landed``: a stance
        that began with a touch-down (not at the detector's start)."""

        def set_(flags, value):
            return None if flags is None else tuple(value if i == foot else f for i, f in enumerate(flags))

        stance = self.t - since if down else 0.0
        return replace(
            self,
            contacts=set_(self.contacts, down),
            settled=set_(self.settled, False),
            aged=set_(self.aged, False),
            stance_time=set_(self.stance_time, stance),
            landed=set_(self.landed, down and landed),
        )


class SlidingWindow:
    """Resampling buffers + the grid (see module docstring)."""

    def __init__(self, detector: ContactDetector, dt: float, n_knots: int, max_gap: float):
        self.detector = detector
        self.dt = dt
        self.n_knots = n_knots
        self.max_gap = max_gap
        self.stats = SampleStats()  #: accepted samples per stream, rejections (out of order, duplicate, gap)
        horizon = max(4 * max_gap, 0.5)
        self.joints = StampedBuffer("joint", horizon, self.stats)
        self.imu = StampedBuffer("imu", horizon, self.stats)
        self.knots: deque[GridKnot] = deque(maxlen=n_knots)
        self.next_k: int | None = None  #: integer index of the next grid time k * dt (no drift)
        self.restarts = 0
        self.n_created = 0  #: grid knots created since the start (monotonic)
        self.backdated = 0  #: foot-knots relabelled by a backdated contact change (contact.backdate)
        self._foot_force: np.ndarray | None = None
        self._snapshot_t = -np.inf  #: s, the newest knot of the last snapshot (older knots keep their flags)
        self._airborne_t = -np.inf  #: s, the newest knot with every foot in the air after a confirmed contact
        self._seen_contact = False  #: a knot since the (re)start had a foot down (so an empty flag set is a flight)

    def snapshot(self) -> list[GridKnot]:
        """The knots as a list that later relabelling does not change (relabelled knots are replaced, not
        mutated); knots older than its newest keep their flags from now on."""
        if self.knots:
            self._snapshot_t = self.knots[-1].t
        return list(self.knots)

    @property
    def final_t(self) -> float:
        """s: the knots up to this time keep their contact flags from now on (those of the last snapshot)."""
        return self._snapshot_t

    @property
    def full(self) -> bool:
        return len(self.knots) == self.n_knots

    def restart(self) -> None:
        """Forget the grid (after a gap); buffered samples newer than the gap are kept."""
        self.knots.clear()
        self.next_k = None
        self._snapshot_t = -np.inf
        self._airborne_t = -np.inf
        self._seen_contact = False
        self.detector.reset()
        self.restarts += 1

    def push_joint(self, sample: JointSample, foot_force=None) -> bool:
        self._check_gap(self.joints, sample.t)
        ok = self.joints.push(sample)
        if ok and foot_force is not None:
            self._foot_force = np.asarray(foot_force, dtype=float)
        return ok

    def push_imu(self, sample: ImuSample) -> bool:
        self._check_gap(self.imu, sample.t)
        return self.imu.push(sample)

    def _check_gap(self, buf: StampedBuffer, t: float) -> None:
        if buf.items and t - buf.last_t > self.max_gap:
            self.stats.reject("gap", f"{buf.name} stream silent for {t - buf.last_t:.3f} s")
            self.joints.clear()
            self.imu.clear()
            self.restart()

    def advance(self) -> int:
        """Create every grid knot that both streams now cover; returns how many were created."""
        if not self.joints.items or not self.imu.items:
            return 0
        if self.next_k is None:
            t0 = max(self.joints.items[0].t, self.imu.items[0].t)
            self.next_k = int(np.ceil(t0 / self.dt - 1e-6))  # grid aligned to multiples of dt
        created = 0
        horizon = min(self.joints.last_t, self.imu.last_t)
        while self.next_k * self.dt <= horizon:
            t = self.next_k * self.dt
            joint, imu = interp_joint(self.joints, t), interp_imu(self.imu, t)
            self.next_k += 1
            if joint is None or imu is None:  # fell behind the buffers' history: restart cleanly
                self.restart()
                return created
            prev = self.knots[-1] if self.knots and abs(t - self.dt - self.knots[-1].t) < 0.5 * self.dt else None
            # backward differences: swing-leg and trunk inertia are not mistaken for ground force
            ddq = None if prev is None else (joint.dq - prev.joint.dq) / self.dt
            domega = None if prev is None else (imu.gyro - prev.imu.gyro) / self.dt
            forces = self.detector.estimate_forces(
                imu.quat,
                imu.gyro,
                imu.acc,
                joint.q,
                joint.dq,
                joint.tau,
                ddq,
                domega,
                None if prev is None else self.dt,
            ).copy()
            raw = self.detector.update(t, forces, self._foot_force)
            flags = tuple(bool(f) for f in raw)
            self._backdate(t, flags)
            settled = tuple(bool(f) for f in self.detector.settled(t, np.asarray(flags), forces))
            aged = tuple(bool(f) for f in self.detector.aged)
            stance_time = tuple(float(s) for s in self.detector.stance_time)
            landed = tuple(bool(f) for f in self.detector.landed)
            start = not self.knots  # emptied only by restart(), which resets the detector
            if any(flags):
                self._seen_contact = True
            elif self._seen_contact:
                self._airborne_t = t
            since_flight = t - self._airborne_t
            self.knots.append(
                GridKnot(t, joint, imu, flags, forces, settled, aged, start, stance_time, landed, since_flight)
            )
            self.n_created += 1
            created += 1
        return created

    def _backdate(self, t: float, flags: tuple[bool, ...]) -> None:
        """Relabel the knots since the onset (:attr:`ContactDetector.onset`) of each foot whose flag changes at the
        knot of time t, newest first, down to the last snapshot's newest knot (see module docstring)."""
        if not self.knots:
            return
        onset = self.detector.onset
        for foot, down in enumerate(flags):
            if down == self.knots[-1].contacts[foot] or not onset[foot] < t - 1e-9:  # no change, or no earlier onset
                continue
            for j in range(len(self.knots) - 1, -1, -1):
                knot = self.knots[j]
                if knot.t < onset[foot] - 1e-9 or knot.t < self._snapshot_t - 1e-9 or knot.detector_start:
                    break
                self.knots[j] = knot.with_contact(
                    foot, down, onset[foot], bool(onset[foot] > self.detector.start_time + 1e-9)
                )
                self.backdated += 1
