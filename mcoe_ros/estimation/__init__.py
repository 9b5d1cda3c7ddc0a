"""The online estimation pipeline (no ROS): validated samples, the sliding window on the estimator grid, the problem
builder, the receding-horizon :class:`~mcoe_ros.estimation.estimator.Estimator` and its outputs (``Estimate``,
``Diagnostics``), and the IMU + leg-kinematics filter used as the localisation baseline."""
