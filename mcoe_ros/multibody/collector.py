"""The per-knot data the measurement models share (the role of Crocoddyl's DataCollector).

The interval model (:mod:`mcoe_ros.multibody.interval`) fills it once per evaluation (dynamics, then frame
kinematics) and every measurement model of the knot reads it; measurements never see the interval data itself.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.dynamics import PhaseDynamicsData


class IntervalCollector:
    """Read-only context of the measurement models of one knot.

    model: ``pin.Model`` with the payload of the last evaluation (the dynamics data's own copy);
    kin_x: ``pin.Data`` with frame kinematics at (q, v) (and a, when the interval has no impulse);
    kin_acc: ``pin.Data`` at (q, v+, a) after an impulse, else the same object as ``kin_x``;
    dyn: :class:`mcoe_ros.multibody.dynamics.PhaseDynamicsData` (a, v+, λ and their Jacobians);
    pi: the parameter vector of the last evaluation (sensor biases are read from it).
    """

    def __init__(self, dyn: PhaseDynamicsData, impulse: bool):
        self.dyn = dyn
        self.pi = np.zeros(dyn.da_dpi.shape[1])
        self.model: pin.Model = dyn.model
        self.kin_x = self.model.createData()
        self.kin_acc = self.model.createData() if impulse else self.kin_x
