"""Accuracy metrics of an estimator run against ground truth (pure functions, no I/O).

Payload: mass, CoM and inertia about the CoM with standard deviations from the 10x10 covariance of pi; errors
against a true pi. Localisation: absolute trajectory error (ATE, RMS of the position error after aligning the first
estimate to the truth at the same time in translation and yaw, the convention of evo's ``ape`` with ``--align_origin``
restricted to yaw for a gravity-aligned odometry frame), final error, drift per metre of path, orientation RMS.
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from mcoe_ros.multibody.inertia import pi_about_com


def payload_summary(pi: np.ndarray, cov: np.ndarray) -> dict:
    """Mass, CoM and inertia about the CoM of pi (10,) and their standard deviations from cov (10, 10) (pushed
    through the map pi -> (m, c, I_c) by central differences: the map is smooth where m > 0)."""

    def params(p):
        m, c, ic = pi_about_com(p)
        return np.r_[m, c, ic[np.triu_indices(3)]]

    jac = np.zeros((10, 10))
    for k in range(10):
        h = 1e-7 * max(1.0, abs(pi[k]))
        e = np.zeros(10)
        e[k] = h
        jac[:, k] = (params(pi + e) - params(pi - e)) / (2 * h)
    std = np.sqrt(np.clip(np.diag(jac @ cov @ jac.T), 0.0, None))
    m, c, ic = pi_about_com(pi)
    std_i = np.zeros((3, 3))
    std_i[np.triu_indices(3)] = std[4:]
    std_i = std_i + np.triu(std_i, 1).T
    return {
        "mass_kg": float(m),
        "mass_std_kg": float(std[0]),
        "com_m": [float(v) for v in c],
        "com_std_m": [float(v) for v in std[1:4]],
        "inertia_com_kgm2": [[float(v) for v in row] for row in ic],
        "inertia_std_kgm2": [[float(v) for v in row] for row in std_i],
    }


def payload_errors(estimate: dict, pi_true: np.ndarray) -> tuple[dict, dict]:
    """(ground truth {mass_kg, com_m, inertia_com_kgm2}, errors {mass_pct, com_m, inertia_rel_pct}) of a
    :func:`payload_summary` against the true pi (10,) (mass_pct is None for a true mass of 0; relative to |m| for
    the negative effective payload of a robot lighter than its URDF)."""
    m, c, ic = pi_about_com(pi_true) if pi_true[0] != 0 else (0.0, np.zeros(3), np.zeros((3, 3)))
    truth = {
        "mass_kg": float(m),
        "com_m": [float(v) for v in c],
        "inertia_com_kgm2": [[float(v) for v in row] for row in ic],
    }
    errors = {
        "mass_pct": 100.0 * abs(estimate["mass_kg"] - m) / abs(m) if m != 0 else None,
        "mass_kg": float(estimate["mass_kg"] - m),
        "com_m": float(np.linalg.norm(np.array(estimate["com_m"]) - c)),
        "inertia_rel_pct": 100.0
        * float(np.linalg.norm(np.array(estimate["inertia_com_kgm2"]) - ic) / max(np.linalg.norm(ic), 1e-12)),
    }
    return truth, errors


def yaw(q_xyzw) -> float:
    """Yaw (rad) of a quaternion (x, y, z, w)."""
    x, y, z, w = q_xyzw
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def rotation(q_xyzw) -> np.ndarray:
    """Rotation matrix (3, 3) of a quaternion (x, y, z, w)."""
    x, y, z, w = q_xyzw
    return pin.Quaternion(w, x, y, z).normalized().toRotationMatrix()


def trajectory_errors(estimates: list[tuple[float, np.ndarray, np.ndarray]], truth: list) -> dict:
    """ATE, final error, drift per metre and orientation RMS of ``estimates`` [(t s, position (3,), quat xyzw)]
    against ``truth`` [(t s, position (3,), quat xyzw)] sorted by time; estimates without a truth sample within
    10 ms are skipped. Empty if fewer than two pairs. Keys starting with '_' hold per-pair series for plots."""
    times = np.array([o[0] for o in truth])
    pairs = []
    for e in estimates:
        i = int(np.clip(np.searchsorted(times, e[0]), 0, len(times) - 1))
        if abs(times[i] - e[0]) < 0.01:
            pairs.append((e, truth[i]))
    if len(pairs) < 2:
        return {}
    (_, pe0, qe0), (_, p0, q0) = pairs[0]
    dyaw = yaw(q0) - yaw(qe0)
    c, s = math.cos(dyaw), math.sin(dyaw)
    rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    pos_err, ang_err = [], []
    for (_, pe, qe), (_, p, q) in pairs:
        aligned = rz @ (pe - pe0) + p0
        pos_err.append(np.linalg.norm(aligned - p))
        r_err = (rz @ rotation(qe)).T @ rotation(q)
        ang_err.append(math.degrees(math.acos(np.clip((np.trace(r_err) - 1) / 2, -1.0, 1.0))))
    path = [p for _, (_, p, _) in pairs]
    length = float(sum(np.linalg.norm(b - a) for a, b in zip(path[:-1], path[1:], strict=True)))
    return {
        "ate_position_m": float(np.sqrt(np.mean(np.square(pos_err)))),
        "final_position_m": float(pos_err[-1]),
        "drift_per_m": float(pos_err[-1] / length) if length > 0.05 else None,
        "orientation_rms_deg": float(np.sqrt(np.mean(np.square(ang_err)))),
        "path_length_m": length,
        "_times": [e[0] for e, _ in pairs],
        "_pos_err": [float(v) for v in pos_err],
    }


#: two-sided 95 % band of a chi-square variable with d degrees of freedom (d = 1, 4, 6: mass, mass + CoM, pose)
CHI2_BAND_95 = {1: (0.000982, 5.024), 3: (0.2158, 9.348), 4: (0.4844, 11.143), 6: (1.237, 14.449)}


def payload_nees(pi_est: np.ndarray, cov_pi: np.ndarray, pi_true: np.ndarray, with_com: bool = True) -> float:
    """NEES eᵀ Σ⁻¹ e of the payload's (mass kg, CoM m (3,)) (or the mass alone), Σ mapped from the covariance of
    pi (10, 10) through d(m, h/m)/dpi at the estimate (h = m c the first moment)."""
    m = float(pi_est[0])
    if not with_com or m == 0.0:
        var = float(cov_pi[0, 0])
        return (m - float(pi_true[0])) ** 2 / var if var > 0.0 else math.inf
    jac = np.zeros((4, 10))
    jac[0, 0] = 1.0
    jac[1:, 0] = -np.asarray(pi_est[1:4]) / m**2
    jac[1:, 1:4] = np.eye(3) / m
    err = np.r_[m - pi_true[0], np.asarray(pi_est[1:4]) / m - np.asarray(pi_true[1:4]) / pi_true[0]]
    cov = jac @ cov_pi @ jac.T
    return float(err @ np.linalg.pinv(0.5 * (cov + cov.T), rcond=1e-14, hermitian=True) @ err)


def aligned_pose_errors(estimates: list[tuple[float, np.ndarray, np.ndarray]], truth: list) -> list[tuple]:
    """(index into ``estimates``, error e (6,), J (6, 6)) of each pose estimate (t s, position (3,), quat xyzw) against
    ``truth`` [(t, p, q)] after the first-pose alignment of :func:`trajectory_errors` (translation + yaw): e = (position
    m, rotation rad with R_true = Exp(e_rot) R_est) in the aligned odom axes, J the map of an odom-axes covariance into
    them (J Σ Jᵀ); estimates without a truth sample within 10 ms are skipped."""
    times = np.array([o[0] for o in truth])
    out, align = [], None
    for n, (t, pe, qe, *_) in enumerate(estimates):
        i = int(np.clip(np.searchsorted(times, t), 0, len(times) - 1))
        if abs(times[i] - t) >= 0.01:
            continue
        _, p, q = truth[i]
        if align is None:
            dyaw = yaw(q) - yaw(qe)
            c, s = math.cos(dyaw), math.sin(dyaw)
            align = (np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]), pe.copy(), p.copy())
        rz, pe0, p0 = align
        err = np.r_[p - (rz @ (pe - pe0) + p0), pin.log3(rotation(q) @ (rz @ rotation(qe)).T)]
        jac = np.zeros((6, 6))
        jac[:3, :3] = jac[3:, 3:] = rz
        out.append((n, err, jac))
    return out


def pose_nees(estimates: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]], truth: list) -> list[float]:
    """NEES of each pose estimate (t s, position (3,), quat xyzw, covariance (6, 6) over (position, rotation) in odom
    axes) against ``truth`` [(t, p, q)] with the errors of :func:`aligned_pose_errors`."""
    out = []
    for n, err, jac in aligned_pose_errors(estimates, truth):
        cov = jac @ np.asarray(estimates[n][3], dtype=float) @ jac.T
        out.append(float(err @ np.linalg.pinv(0.5 * (cov + cov.T), rcond=1e-14, hermitian=True) @ err))
    return out
