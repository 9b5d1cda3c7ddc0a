"""Horizontal odometry drift of the touch-downs: the published x, y covariance relative to the odometry origin.

The base's x and y are not observable: every measurement and pseudo-measurement of the window is invariant to a
horizontal translation of the whole trajectory. The window's Gauss–Newton covariance of the newest position is the
arrival anchor's (``noise.arrival_position`` σ_a per axis, which fixes that gauge and says nothing about the robot) plus
the uncertainty of the motion since the odometry origin under the model's own noise. REP-105's odom frame starts at
the first pose, so the anchor does not belong in the published covariance: :func:`relative_to_origin` removes it.

What is left under-states the drift of a legged robot. Measured on the realism suite (docs/realism.md, session 14),
the horizontal error grows by 0.3–6 mm per touch-down, step after step in the same direction (a systematic error,
linear in the number of steps), more for faster landings (trot forward, pronk) than for slow ones (walk, trot in
place): the landing foot slides and rolls while the rigid contact holds it (docs/localisation.md). The model here:

* each touch-down i of a held foot (a foot the rigid dynamics holds at knot k and not at k - 1) adds a horizontal
  error of standard deviation s_i = τ ‖v_i‖ per axis, v_i (3,) m/s the foot's velocity in odom axes at the knot
  (the estimate's pre-impact state) and τ = ``noise.odometry_slip_time`` s;
* the errors add coherently (worst case of a systematic error): σ_drift = Σ_i s_i m, and the published x, y block
  gets σ_drift² I₂ on top of the window's relative covariance.

* the round feet roll (``robot.foot_radius`` r): the rigid contacts hold the foot frames (the spheres' centres),
  while a foot that rolls by φ about a horizontal axis moves its centre by r φ. The newest state's stance feet have
  rolled by φ_f since their stance began (the horizontal part of the foot frame's rotation, odom axes); σ_roll =
  r √(mean_f ‖φ_f‖²) per axis is added uncorrelated to x, y. It is bounded (it returns when the leg does) and matters
  where nothing lands: a sway moves the body over its feet by a few centimetres, and the consider term of the IMU
  biases alone would correlate x with pitch (y with roll) at ±0.94, leaving the direction across that correlation
  at the sub-millimetre Gauss–Newton share. With ``dynamics.rolling_radius`` r' the stance-foot velocity measures the
  point r' below the centre, so the estimator sets the share's radius to r − r' (the rolling of the rest of the
  sphere; 0 at the full radius).

A touch-down's s_i follows the window's latest estimate while its knot is in the window and is frozen when the knot
is dropped. No touch-down is counted at or right after a contact detector's (re)start knot (its flags are the
detector's initial state, see :meth:`mcoe_ros.estimation.builder.ProblemBuilder.running_models`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pinocchio as pin

from mcoe_ros.estimation.window import GridKnot
from mcoe_ros.multibody.robot import RobotModel

#: m², floor of the relative horizontal variance (1 µm std): a published covariance stays positive definite
MIN_VARIANCE = 1e-12


def relative_to_origin(pose_cov: np.ndarray, anchor_std: float) -> np.ndarray:
    """The pose covariance (6, 6) (position m, rotation rad, odom axes) without the arrival anchor's σ_a² I₂ on x, y.

    The subtraction leaves the x, y block a small difference of two large numbers (σ_a² = 2.5e-3 m² against a
    relative variance that can be 1e-8 m² on a sway): its numerical noise can make the block smaller than its
    covariance with the other four components allows, i.e. the matrix indefinite (seen with the IMU biases estimated:
    x–pitch correlations of 1.9). So the x, y block's variance given the other components (its Schur complement
    A − C B⁻¹ Cᵀ) is floored at :data:`MIN_VARIANCE` per eigen-direction: the result is positive definite whenever the
    rest B is, and equal to the plain subtraction whenever that was already consistent."""
    out = 0.5 * (pose_cov + pose_cov.T)
    block = out[:2, :2] - anchor_std**2 * np.eye(2)
    cross, rest = out[:2, 2:], out[2:, 2:]
    explained = cross @ np.linalg.solve(rest, cross.T) if np.all(np.linalg.eigvalsh(rest) > 0.0) else np.zeros((2, 2))
    explained = 0.5 * (explained + explained.T)
    vals, vecs = np.linalg.eigh(block - explained)
    out[:2, :2] = explained + (vecs * np.clip(vals, MIN_VARIANCE, None)) @ vecs.T
    return out


def horizontal_share(drift_std: float, rolling_std: float) -> np.ndarray:
    """The (6, 6) pose covariance share (odom axes) of the touch-downs' drift σ_drift and the feet's rolling σ_roll
    (m): (σ_drift² + σ_roll²) on x and y, zero elsewhere (added after any covariance scaling)."""
    out = np.zeros((6, 6))
    out[0, 0] = out[1, 1] = drift_std**2 + rolling_std**2
    return out


class TouchdownDrift:
    """σ_drift (m) of the touch-downs since the odometry origin and σ_roll (m) of the stance feet's rolling (see module
    docstring).

    robot: the estimator's model (foot frames); slip_time: τ s; held: the feet a knot's dynamics holds
    (:meth:`ProblemBuilder.held`); dt: the grid step s (knots are keyed by their grid index round(t / dt)).
    """

    def __init__(
        self, robot: RobotModel, slip_time: float, held: Callable[[GridKnot], Sequence[bool]], dt: float
    ) -> None:
        if slip_time < 0.0 or dt <= 0.0:
            raise ValueError("need slip_time >= 0 and dt > 0")
        self.robot, self.slip_time, self.held, self.dt = robot, float(slip_time), held, float(dt)
        self._data = robot.model.createData()
        self.sigma_past = 0.0  #: m, Σ s_i of the touch-downs whose knots left the window
        self.count_past = 0  #: touch-downs whose knots left the window
        #: grid index -> (Σ s_i m, count) of the touch-downs at a window knot (latest estimate)
        self._pending: dict[int, tuple[float, int]] = {}
        #: grid index -> the feet that land at a window knot
        self._landing: dict[int, list[int]] = {}
        #: grid index -> (held flags, detector start) of the two newest knots seen (the predecessors of the next ones)
        self._seen: dict[int, tuple[tuple[bool, ...], bool]] = {}
        self._last_index = -(2**62)  #: grid index of the newest knot seen
        self.foot_radius = float(robot.spec.foot_radius)
        #: foot -> its frame's rotation (odom axes) where its stance began (the estimate then)
        self._stance_rotation: dict[int, np.ndarray] = {}
        self.rolling = 0.0  #: m, σ_roll of the newest update

    @property
    def sigma(self) -> float:
        """σ_drift, m."""
        return self.sigma_past + sum(s for s, _ in self._pending.values())

    @property
    def count(self) -> int:
        """Touch-downs since the odometry origin."""
        return self.count_past + sum(n for _, n in self._pending.values())

    def _index(self, knot: GridKnot) -> int:
        return int(round(knot.t / self.dt))

    def foot_rotations(self, x: np.ndarray) -> list[np.ndarray]:
        """The foot frames' rotations (3, 3) (odom axes) at the state x (nx,)."""
        robot, data = self.robot, self._data
        pin.framesForwardKinematics(robot.model, data, x[: robot.nq])
        return [data.oMf[fid].rotation.copy() for fid in robot.foot_frame_ids]

    def foot_speeds(self, x: np.ndarray) -> np.ndarray:
        """‖v_foot‖ (nfeet,) m/s of every foot at the state x (nx,) (odom axes; the norm is frame-independent)."""
        robot, data = self.robot, self._data
        pin.forwardKinematics(robot.model, data, x[: robot.nq], x[robot.nq :])
        return np.array(
            [
                np.linalg.norm(
                    pin.getFrameVelocity(robot.model, data, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED).linear
                )
                for fid in robot.foot_frame_ids
            ]
        )

    def update(self, knots: Sequence[GridKnot], xs: Sequence[np.ndarray]) -> float:
        """Account for a solved window (its knots and the solution's states xs, one per knot); returns σ_drift m.

        Only the knots new since the last update are searched for touch-downs, plus the newest knot of the last update
        (the one a backdated contact change may still relabel, :class:`mcoe_ros.estimation.window.SlidingWindow`; the
        knots before it keep their flags), and only the pending touch-downs' landing speeds are re-evaluated:
        O(new knots + touch-downs in the window)."""
        if len(knots) != len(xs):
            raise ValueError(f"{len(knots)} knots but {len(xs)} states")
        if not knots:
            return self.sigma
        first = self._index(knots[0])
        if self._index(knots[-1]) - first != len(knots) - 1:
            raise ValueError("the window's knots are not consecutive grid knots")
        for idx in [i for i in self._pending if i < first]:  # dropped knots: their touch-downs are final
            s, n = self._pending.pop(idx)
            self.sigma_past += s
            self.count_past += n
            del self._landing[idx]
        for pos in range(max(0, self._last_index - first), len(knots)):  # the last update's newest and the new knots
            knot = knots[pos]
            idx = first + pos
            held = tuple(bool(h) for h in self.held(knot))
            previous = self._seen.get(idx - 1)  # None: a restart's gap, or the start
            self._landing.pop(idx, None)
            self._pending.pop(idx, None)
            if previous is not None and not previous[1] and not knot.detector_start:
                feet = [f for f, (now, before) in enumerate(zip(held, previous[0], strict=True)) if now and not before]
                if feet:
                    self._landing[idx] = feet
            if idx > self._last_index:  # the stance feet's rolling: from the knot their stance began (as first seen)
                starting = [f for f, h in enumerate(held) if h and f not in self._stance_rotation]
                if starting and self.foot_radius > 0.0:
                    rotations = self.foot_rotations(np.asarray(xs[pos]))
                    self._stance_rotation.update({f: rotations[f] for f in starting})
                for f in [f for f in self._stance_rotation if not held[f]]:
                    del self._stance_rotation[f]
            self._seen[idx] = (held, knot.detector_start)
        self._last_index = first + len(knots) - 1
        for idx in [i for i in self._seen if i < self._last_index - 1]:
            del self._seen[idx]
        for idx, feet in self._landing.items():  # the window's landings at the newest estimate
            speeds = self.foot_speeds(np.asarray(xs[idx - first]))
            self._pending[idx] = (self.slip_time * float(speeds[feet].sum()), len(feet))
        self.rolling = 0.0
        if self._stance_rotation:
            now = self.foot_rotations(np.asarray(xs[-1]))
            angles = [pin.log3(now[f] @ start.T)[:2] for f, start in self._stance_rotation.items()]
            self.rolling = self.foot_radius * float(np.sqrt(np.mean(np.sum(np.square(angles), axis=1))))
        return self.sigma

    def publish(self, pose_cov: np.ndarray) -> np.ndarray:
        """The pose covariance (6, 6) with :func:`horizontal_share` added."""
        return pose_cov + horizontal_share(self.sigma, self.rolling)
