"""I/O adapters without rclpy: the ROS parameter table and typed configuration, message <-> array conversion, the one
``SensorFeed`` every adapter feeds the estimator through, output topics and message field trees, rosbag2 I/O."""
