"""Estimator outputs as ROS message *field trees* (plain dicts), shared by the node and the bag replay.

The node fills rclpy message objects from these trees (:func:`mcoe_ros.ros.convert.fill`) and the replay
builds rosbags message objects from the same trees, so both publish identical content without importing
each other's message libraries here. Message choices:

- ``odom``: nav_msgs/Odometry, header.frame_id = odom frame, child_frame_id = base frame, body twist; at input rate
  (:class:`~mcoe_ros.estimation.propagation.Odometry`: the newest solve propagated to every input sample).
- ``pose``: geometry_msgs/PoseWithCovarianceStamped in the odom frame, at input rate as ``odom``.
- ``solve/odom``: nav_msgs/Odometry of the newest node of every solve (solve rate, older than ``odom``).
- ``payload/inertia``: geometry_msgs/InertiaStamped of the payload: m, com = CoM in the payload frame,
  inertia about the CoM in the payload frame (header.frame_id = payload frame).
- ``payload/combined_inertia``: geometry_msgs/InertiaStamped of parent body + payload in the parent body
  frame (about the combined CoM): the trunk inertia an MPC model can use as is.
- ``payload/covariance``: std_msgs/Float64MultiArray, 10x10 row-major covariance of the payload's dynamic
  parameters pi = [m, h_x, h_y, h_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz] (about the payload frame origin),
  layout dims ("rows", 10, 100), ("cols", 10, 10); no standard message carries an inertia covariance.
- ``payload/rls/inertia``: geometry_msgs/InertiaStamped of the RLS payload estimate (when that estimator runs).

:data:`OUTPUTS` names every output topic once (relative name, message type, latched or not);
:func:`odometry_messages` maps an input-rate :class:`~mcoe_ros.estimation.propagation.Odometry` and
:func:`estimate_messages` a solve's :class:`~mcoe_ros.estimation.estimate.Estimate` onto them: the node and the replay
use both, so they publish the same topics with the same content.
"""

from __future__ import annotations

import numpy as np

from mcoe_ros.estimation.diagnostics import Diagnostics
from mcoe_ros.estimation.estimate import Estimate
from mcoe_ros.estimation.propagation import Odometry
from mcoe_ros.multibody.inertia import pi_about_com

#: output topics (relative to the node's namespace): name -> (message type, latched = transient local, depth 1)
OUTPUTS: dict[str, tuple[str, bool]] = {
    "odom": ("nav_msgs/msg/Odometry", False),
    "pose": ("geometry_msgs/msg/PoseWithCovarianceStamped", False),
    "solve/odom": ("nav_msgs/msg/Odometry", False),
    "solve/path": ("nav_msgs/msg/Path", False),
    "payload/inertia": ("geometry_msgs/msg/InertiaStamped", True),
    "payload/combined_inertia": ("geometry_msgs/msg/InertiaStamped", True),
    "payload/covariance": ("std_msgs/msg/Float64MultiArray", True),
    "payload/rls/inertia": ("geometry_msgs/msg/InertiaStamped", True),
}
DIAGNOSTICS_TOPIC = "/diagnostics"
DIAGNOSTICS_TYPE = "diagnostic_msgs/msg/DiagnosticArray"
TF_TYPE = "geometry_msgs/msg/TransformStamped"


def stamp(t: float) -> dict:
    """builtin_interfaces/Time from seconds (t >= 0)."""
    ns = int(round(t * 1e9))
    return {"sec": ns // 1_000_000_000, "nanosec": ns % 1_000_000_000}


def header(t: float, frame_id: str) -> dict:
    return {"stamp": stamp(t), "frame_id": frame_id}


def _pose(est: Estimate | Odometry) -> dict:
    p, q = est.position, est.quat_xyzw
    return {
        "position": {"x": float(p[0]), "y": float(p[1]), "z": float(p[2])},
        "orientation": {"x": float(q[0]), "y": float(q[1]), "z": float(q[2]), "w": float(q[3])},
    }


def _vec(v) -> dict:
    return {"x": float(v[0]), "y": float(v[1]), "z": float(v[2])}


def _cov36(cov: np.ndarray) -> list:
    sym = 0.5 * (cov + cov.T)
    return [float(x) for x in sym.reshape(-1)]


def odometry(est: Estimate | Odometry, odom_frame: str, base_frame: str) -> dict:
    return {
        "header": header(est.t, odom_frame),
        "child_frame_id": base_frame,
        "pose": {"pose": _pose(est), "covariance": _cov36(est.pose_cov)},
        "twist": {
            "twist": {"linear": _vec(est.linear_velocity), "angular": _vec(est.angular_velocity)},
            "covariance": _cov36(est.twist_cov),
        },
    }


def pose_with_covariance(est: Estimate | Odometry, odom_frame: str) -> dict:
    return {"header": header(est.t, odom_frame), "pose": {"pose": _pose(est), "covariance": _cov36(est.pose_cov)}}


def inertia_stamped(t: float, pi: np.ndarray, frame_id: str) -> dict:
    """geometry_msgs/InertiaStamped of a body with parameters pi (about the frame origin) -> about its CoM."""
    # a 'combined' payload (estimated trunk + payload minus the URDF trunk) may have a negative mass
    mass, com, inertia = pi_about_com(pi) if abs(pi[0]) > 1e-9 else (0.0, np.zeros(3), np.zeros((3, 3)))
    return {
        "header": header(t, frame_id),
        "inertia": {
            "m": float(mass),
            "com": _vec(com),
            "ixx": float(inertia[0, 0]),
            "ixy": float(inertia[0, 1]),
            "ixz": float(inertia[0, 2]),
            "iyy": float(inertia[1, 1]),
            "iyz": float(inertia[1, 2]),
            "izz": float(inertia[2, 2]),
        },
    }


def matrix(mat: np.ndarray) -> dict:
    """std_msgs/Float64MultiArray of a row-major matrix."""
    rows, cols = mat.shape
    return {
        "layout": {
            "dim": [
                {"label": "rows", "size": rows, "stride": rows * cols},
                {"label": "cols", "size": cols, "stride": cols},
            ],
            "data_offset": 0,
        },
        "data": [float(x) for x in mat.reshape(-1)],
    }


def transform(est: Estimate | Odometry, odom_frame: str, base_frame: str) -> dict:
    """geometry_msgs/TransformStamped odom -> base."""
    p, q = est.position, est.quat_xyzw
    return {
        "header": header(est.t, odom_frame),
        "child_frame_id": base_frame,
        "transform": {
            "translation": _vec(p),
            "rotation": {"x": float(q[0]), "y": float(q[1]), "z": float(q[2]), "w": float(q[3])},
        },
    }


def diagnostic_array(t: float, name: str, hardware_id: str, level: int, message: str, values: dict) -> dict:
    """diagnostic_msgs/DiagnosticArray with one status (level 0 OK, 1 WARN, 2 ERROR, 3 STALE)."""
    return {
        "header": header(t, ""),
        "status": [
            {
                "level": level,
                "name": name,
                "message": message,
                "hardware_id": hardware_id,
                "values": [{"key": k, "value": str(v)} for k, v in values.items()],
            }
        ],
    }


def odometry_messages(odo: Odometry, odom_frame: str, base_frame: str) -> dict[str, dict]:
    """Field trees of the input-rate topics (``odom``, ``pose``) for one propagated state (TF: :func:`transform`)."""
    return {"odom": odometry(odo, odom_frame, base_frame), "pose": pose_with_covariance(odo, odom_frame)}


def path(times: np.ndarray, positions: np.ndarray, quats_xyzw: np.ndarray, odom_frame: str) -> dict:
    """nav_msgs/Path of base poses: times (n,) s (sensor time), positions (n, 3) m, orientations (n, 4) x, y, z, w,
    odometry frame; stamped with the newest pose's time."""
    poses = [
        {
            "header": header(float(t), odom_frame),
            "pose": {
                "position": _vec(p),
                "orientation": {"x": float(q[0]), "y": float(q[1]), "z": float(q[2]), "w": float(q[3])},
            },
        }
        for t, p, q in zip(times, positions, quats_xyzw, strict=True)
    ]
    return {"header": header(float(times[-1]), odom_frame), "poses": poses}


def estimate_messages(est: Estimate, odom_frame: str, base_frame: str, window: tuple | None = None) -> dict[str, dict]:
    """Field trees of the solve-rate topics of :data:`OUTPUTS` for one estimate: ``solve/odom``, the payload
    (``payload/rls/inertia`` only when the estimate carries an RLS payload) and, given its solve's ``window`` (sensor
    times (n,) s, positions (n, 3), orientations (n, 4) x, y, z, w: the window's poses, oldest first, the newest the
    estimate's; :meth:`mcoe_ros.estimation.estimator.Estimator.window_poses`), ``solve/path``."""
    trees = {
        "solve/odom": odometry(est, odom_frame, base_frame),
        "payload/inertia": inertia_stamped(est.t, est.payload_pi, est.payload_frame),
        "payload/combined_inertia": inertia_stamped(est.t, est.combined_pi, est.combined_frame),
        "payload/covariance": matrix(est.payload_cov),
    }
    if est.rls_payload_pi is not None:
        trees["payload/rls/inertia"] = inertia_stamped(est.t, est.rls_payload_pi, est.payload_frame)
    if window is not None:
        trees["solve/path"] = path(*window, odom_frame)
    return trees


def diagnostics_message(t: float, diag: Diagnostics, hardware_id: str = "go1", name: str = "mcoe_estimator") -> dict:
    """The estimator's /diagnostics message (one status named after the node, e.g. its fully qualified name)."""
    return diagnostic_array(t, name, hardware_id, diag.level, diag.message, diag.key_values())
