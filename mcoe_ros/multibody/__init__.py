"""Multibody models on Pinocchio: the robot (URDF, payload body, joint and foot maps), inertial parametrizations,
contact and impulse dynamics with analytic derivatives, measurement models, the interval model of the estimation
problem and its per-phase cache, the IMU -> base-state conversion and dynamics-based contact detection."""
