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
# The compiled solver's knot loops use solver.threads OpenMP threads (its own setting, not OMP_NUM_THREADS). Idle
# OpenMP threads sleep instead of spinning: a spinning thread took the core of the solve's sequential phases (Riccati,
# covariance: 1.7-2x slower with 2 threads on a loaded 2-core machine, docs/performance.md run 9). Read when the
# OpenMP runtime loads, so it applies when mcoe_ros is imported before Pinocchio.
_os.environ.setdefault("OMP_WAIT_POLICY", "passive")
