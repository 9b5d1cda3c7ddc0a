"""The ROS 2 adapter (rclpy): the ``mcoe_estimator`` node and rclpy message helpers."""
