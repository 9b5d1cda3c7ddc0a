"""A contact detector that is compared with (and can be replaced by) a simulator's ground-truth contact flags, for the
ablations that separate contact detection from the rest of the estimator (benchmarks/contact_ablation.py,
benchmarks/trot_localisation.py)."""

from __future__ import annotations

import bisect

from mcoe_ros.multibody.contact import ContactConfig, ContactDetector
from mcoe_ros.multibody.robot import RobotModel


class TruthDetector(ContactDetector):
    """The deployed detector (forces still estimated, for the window's diagnostics) that counts its disagreement with
    the ground-truth flags ``truth_flags`` (nfeet bools at times ``truth_t``, s) and, if ``use_truth``, outputs those
    flags instead of its own. ``slack`` (s) is added to a knot time before looking up the truth sample at or before
    it; ``epoch`` (set by the caller) is the estimator's time epoch (knot times are relative to it)."""

    def __init__(
        self,
        robot: RobotModel,
        truth_t: list,
        truth_flags: list,
        use_truth: bool,
        config: ContactConfig | None = None,
        slack: float = 0.0,
    ):
        super().__init__(robot, config)
        self.truth_t, self.truth_flags, self.use_truth, self.slack = truth_t, truth_flags, use_truth, slack
        self.epoch = 0.0
        self.disagree = [0, 0]  #: [foot-knots where the flags differ, foot-knots seen]

    def update(self, t, forces, foot_force=None):
        flags = super().update(t, forces, foot_force)
        i = max(0, bisect.bisect_right(self.truth_t, t + self.epoch + self.slack) - 1)
        truth = self.truth_flags[i]
        self.disagree[0] += int((flags != truth).sum())
        self.disagree[1] += flags.size
        if self.use_truth:
            self.flags[:] = truth
            return truth.copy()
        return flags
