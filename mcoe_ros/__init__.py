"""mcoe_ros: multi-contact optimal estimation for legged robots.

Folders are layers with one import direction (see README "Layout"):
``ocp`` (generic optimal estimation, numpy/scipy) <- ``multibody`` (Pinocchio models) <- ``payload`` (payload
identification) <- ``estimation`` (the online pipeline) <- ``io`` (adapters without rclpy) <- ``ros`` (the ROS 2
node), ``apps`` (replay, evaluation, report), ``sim`` (MuJoCo simulator) <- ``testing`` (shared test fixtures).
"""

import os as _os

# The estimator's linear algebra runs on small (<= 50 x 50) matrices, where BLAS threads only add
# synchronisation overhead (measured 5x slower per solve on 2 cores). An explicit user setting wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    _os.environ.setdefault(_var, "1")
