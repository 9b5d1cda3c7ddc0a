"""The optimal estimator's window as a fixed-lag smoother: each grid knot's base pose from the last window that held it.

The published estimate is the newest knot of each solve (causal: what an MPC needs). The window re-solves every knot
it holds with the data after it, so a knot's pose in the last window that still held it has been smoothed with a lag
of up to the window's length (``estimator.window``; less for the last window's knots at the end of a run). On the
jump it takes 35–41 % off the causal output's error (docs/localisation.md, session 24). For offline use:
trajectory evaluation, maps, the replay's ``--smoothed`` file.
"""

from __future__ import annotations

import numpy as np


class SmoothedTrajectory:
    """Collects :attr:`mcoe_ros.estimation.estimator.Estimator.window_trajectory` after each solve (:meth:`update`);
    :meth:`poses` gives every knot once, from the last window that held it."""

    def __init__(self) -> None:
        self._poses: dict[int, tuple[float, np.ndarray, np.ndarray]] = {}  #: grid index -> (t s, p (3,), q xyzw (4,))
        self._epoch, self._dt = 0.0, 1.0

    def update(self, estimator) -> None:
        """Take ``estimator``'s last solve (call after each solve; a held tick re-reads the same solve, harmlessly)."""
        window = estimator.window_trajectory
        if window is None:
            return
        self._epoch, self._dt = estimator.epoch or 0.0, estimator.dt
        for t, p, q in zip(*window, strict=True):
            self._poses[round(t / self._dt)] = (float(t + self._epoch), p, q)

    def position_at(self, t: float) -> np.ndarray:
        """The smoothed position (3,) m of the knot at sensor time ``t`` s (KeyError if no window held it)."""
        return self._poses[round((t - self._epoch) / self._dt)][1]

    def at(self, times) -> list[tuple[float, np.ndarray, np.ndarray]]:
        """:meth:`poses` of the knots at these sensor times (s; those no window held are left out): the smoothed
        poses at the published estimates' times compare with them like for like (same times, same first pose)."""
        keys = (round((t - self._epoch) / self._dt) for t in times)
        return [self._poses[k] for k in keys if k in self._poses]

    def __len__(self) -> int:
        return len(self._poses)

    def poses(self) -> list[tuple[float, np.ndarray, np.ndarray]]:
        """(sensor time s, position (3,) m, orientation (4,) x, y, z, w) per knot, odometry frame, in time order."""
        return [self._poses[k] for k in sorted(self._poses)]

    def write_tum(self, path: str) -> int:
        """Write :meth:`poses` as a TUM trajectory file (``t x y z qx qy qz qw`` per line); returns the line count."""
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("# mcoe_ros fixed-lag smoothed base trajectory (odometry frame): t x y z qx qy qz qw\n")
            for t, p, q in self.poses():
                fh.write(f"{t:.6f} " + " ".join(f"{v:.9g}" for v in (*p, *q)) + "\n")
        return len(self._poses)
