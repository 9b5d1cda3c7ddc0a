"""Go1 datasets from an independent physics engine (MuJoCo), written as rosbag2 files (see ``cli.py``)."""
