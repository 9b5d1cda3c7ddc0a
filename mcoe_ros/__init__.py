"""mcoe_ros: multi-contact optimal estimation for legged robots."""
