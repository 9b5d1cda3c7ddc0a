"""Small real job used as the README main job until the bag replay lands.

Loads the Go1 model, attaches a 7.2 kg payload body to the trunk, prints the payload-augmented trunk
inertia (what an MPC would load) and one forward-dynamics step with and without the payload.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from mcoe_ros.inertia import pi_about_com, pi_from_com
from mcoe_ros.model import RobotModel


def main() -> int:
    robot = RobotModel()
    q = robot.neutral()
    q[2] = 0.3
    v = np.zeros(robot.nv)
    tau = np.zeros(robot.nv)
    a_nom = pin.aba(robot.model, robot.create_data(), q, v, tau).copy()
    payload = pi_from_com(7.2, np.array([0.0, 0.0, 0.06]), np.diag([0.02, 0.03, 0.04]))
    robot.set_payload(payload)
    a_pay = pin.aba(robot.model, robot.create_data(), q, v, tau)
    mass, com, inertia = pi_about_com(robot.combined_pi())
    np.set_printoptions(precision=4, suppress=True)
    print(f"Go1 model: nq={robot.nq} nv={robot.nv}, total mass {robot.total_mass:.3f} kg (incl. 7.2 kg payload)")
    print(f"trunk+payload: mass {mass:.3f} kg, CoM {com} m (trunk frame)")
    print(f"trunk+payload inertia about CoM [kg m^2]:\n{inertia}")
    print(f"free-fall base acceleration without / with payload: {a_nom[2]:.3f} / {a_pay[2]:.3f} m/s^2")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
