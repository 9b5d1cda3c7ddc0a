"""How the simulator's floor moves a held foot: the contact law of MuJoCo's soft contact measured on the realism suite's
cases (docs/localisation.md, session 22).

For each profile (``real``: soft floor, ``solref`` time constant 0.05 s; ``soft-floor``: point feet on it;
``hard-floor``: 0.02 s) and scenario (seed :data:`realism_suite.SEED`), the episode is run and at every sample (after
``mj_step``: the contacts, constraint rows and body velocities of the forward pass at the sample's state) each foot's
ground force (world, on the foot), its contact point's velocity relative to the floor (MuJoCo's constraint velocity,
world axes), the penetration and the tangential rows' R and B are logged. On the *held* samples (normal force > 1 N,
the first 50 ms and the last 30 ms of each stance dropped):

- tangential: the first-order law v_t = -c f_t - tau dv_t/dt + tau' (J̇v)_t fitted by least squares (x and y pooled;
  J̇v the velocity-product acceleration of the foot's point at the contact, which MuJoCo's contact acceleration
  leaves out), against MuJoCo's own c = R/B and tau = 1/B of the friction rows (medians); R² of the fit;
- normal: f_n = k depth - b v_n - m a_n (the soft constraint's spring-damper and the foot's inertia), least squares,
  R².

Run: .venv/bin/python benchmarks/floor_contact_law.py [--seconds 4] [--only trot,walk]
Prints one markdown table.
"""

from __future__ import annotations

import argparse

import mujoco
import numpy as np

from mcoe_ros.sim.cli import build_parser, config_from_args
from mcoe_ros.sim.runner import Episode
from mcoe_ros.testing.scripts import load_benchmark

rs = load_benchmark("realism_suite")

#: scenario -> (payload of the suite's case, seconds)
SCENARIOS = {
    "trot": ("5kg-off", 4.0),
    "walk": ("5kg-off", 4.0),
    "squat-sway": ("5kg-off", 4.0),
    "trot-forward": ("3kg", 3.0),
}
PROFILES = ("real", "soft-floor", "hard-floor")
HELD_AFTER, HELD_BEFORE, LOADED = 0.05, 0.03, 1.0  # s, s, N


def log_case(scenario: str, profile: str, seconds: float) -> dict:
    """Per-sample arrays (n, 4, ...) of one episode: force (3, world, on the foot), velocity (3, world, contact point
    relative to the floor), depth (m, > 0 into the floor), R_t, B_t (the first tangential row's), and dt (s)."""
    payload = SCENARIOS[scenario][0]
    argv = [
        "--scenario",
        f"{scenario}:{seconds:g}",
        *rs.PAYLOADS[payload],
        *rs.PROFILES[profile],
        "--seed",
        str(rs.SEED),
        "--out",
        "unused",
    ]
    cfg = config_from_args(build_parser().parse_args(argv))
    episode = Episode(cfg)
    sim = episode.sim
    if sim.model.opt.cone != mujoco.mjtCone.mjCONE_ELLIPTIC:
        raise SystemExit("the law's velocity rows assume MuJoCo's elliptic friction cone (the simulator's)")
    feet, floor = list(sim.foot_geom_ids), sim.floor_id
    rec = {k: [] for k in ("force", "velocity", "depth", "R", "B", "jdv")}
    wrench, jacp, jacr = np.zeros(6), np.zeros((3, sim.model.nv)), np.zeros((3, sim.model.nv))

    def on_sample(truth, meas, payload_spec) -> None:
        m, d = sim.model, sim.data
        force, vel = np.zeros((4, 3)), np.full((4, 3), np.nan)
        depth, r_t, b_t, jdv = np.full(4, np.nan), np.full(4, np.nan), np.full(4, np.nan), np.full((4, 3), np.nan)
        for c in range(d.ncon):
            con = d.contact[c]
            g1, g2 = int(con.geom1), int(con.geom2)
            other = g2 if g1 == floor else g1 if g2 == floor else -1
            if other not in feet or con.efc_address < 0:
                continue
            i, sign = feet.index(other), (1.0 if g1 == floor else -1.0)
            frame = np.asarray(con.frame).reshape(3, 3)  # rows: normal, tangent 1, tangent 2 (world)
            mujoco.mj_contactForce(m, d, c, wrench)
            force[i] += sign * frame.T @ wrench[:3]
            a = con.efc_address
            if con.dim >= 3:  # elliptic cone: rows a (normal), a+1, a+2 (tangents) are the contact-frame velocity
                vel[i] = sign * frame.T @ d.efc_vel[a : a + 3]
                r_t[i], b_t[i] = d.efc_R[a + 1], d.efc_KBIP[a + 1, 1]
            depth[i] = -con.dist
            # the velocity-product acceleration J̇v of the foot's point at the contact (world), which MuJoCo's contact
            # acceleration leaves out (qvel one physics step later than the forward pass: a negligible difference)
            mujoco.mj_jacDot(m, d, jacp, jacr, con.pos, m.geom_bodyid[other])
            jdv[i] = jacp @ d.qvel
        for key, value in (("force", force), ("velocity", vel), ("depth", depth), ("R", r_t), ("B", b_t), ("jdv", jdv)):
            rec[key].append(value)

    episode.run(on_sample)
    out = {k: np.asarray(v) for k, v in rec.items()}
    out["dt"] = cfg.timestep * episode.sens_div
    return out


def held_mask(force: np.ndarray, dt: float) -> np.ndarray:
    """(n, 4) True on the held samples: loaded, HELD_AFTER s after the stance began and HELD_BEFORE s before it ends."""
    on = force[..., 2] > LOADED
    held = np.zeros_like(on)
    n = len(on)
    for f in range(4):
        k = 0
        while k < n:
            if not on[k, f]:
                k += 1
                continue
            end = k
            while end < n and on[end, f]:
                end += 1
            lo, hi = k + int(round(HELD_AFTER / dt)), end - int(round(HELD_BEFORE / dt))
            held[lo:hi, f] = True
            k = end
    return held


def r2(y: np.ndarray, fit: np.ndarray) -> float:
    return float(1.0 - np.sum((y - fit) ** 2) / np.sum((y - y.mean()) ** 2))


def fit_case(log: dict) -> dict:
    dt, f, v = log["dt"], log["force"], log["velocity"]
    held = held_mask(f, dt)
    acc = np.zeros_like(v)
    acc[1:-1] = (v[2:] - v[:-2]) / (2.0 * dt)
    sel = held & np.isfinite(v).all(-1) & np.isfinite(acc).all(-1)
    sel[[0, -1]] = False
    ft, vt, at = f[sel][:, :2].ravel(), v[sel][:, :2].ravel(), acc[sel][:, :2].ravel()
    jt = log["jdv"][sel][:, :2].ravel()
    a = np.stack([-ft, -at, jt], axis=1)
    sol, *_ = np.linalg.lstsq(a, vt, rcond=None)
    c, tau = sol[:2]
    fn, depth, vn, an = f[sel][:, 2], log["depth"][sel], v[sel][:, 2], acc[sel][:, 2]
    b_n = np.stack([depth, -vn, -an], axis=1)
    sol_n, *_ = np.linalg.lstsq(b_n, fn, rcond=None)
    k, b = sol_n[:2]
    return {
        "held": int(sel.sum()),
        "f_t": float(np.median(np.linalg.norm(f[sel][:, :2], axis=1))),
        "v_t": float(np.median(np.linalg.norm(v[sel][:, :2], axis=1))),
        "c": float(c),
        "tau": float(tau),
        "r2_t": r2(vt, a @ sol),
        "c_mj": float(np.median(log["R"][sel] / log["B"][sel])),
        "tau_mj": float(np.median(1.0 / log["B"][sel])),
        "k": float(k),
        "b": float(b),
        "r2_n": r2(fn, b_n @ sol_n),
        "depth": float(np.median(depth)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=0.0, help="episode length (0: the suite's case length)")
    ap.add_argument("--only", default="", help="comma-separated scenarios (default: all)")
    args = ap.parse_args()
    scenarios = [s for s in SCENARIOS if not args.only or s in args.only.split(",")]
    print(
        "| scenario | profile | held samples | median \\|f_t\\| N | median \\|v_t\\| mm/s | c mm/s/N (MuJoCo R/B) "
        "| τ ms (MuJoCo 1/B) | R² tangential | k N/mm | b N s/m | R² normal | median depth mm |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for scenario in scenarios:
        for profile in PROFILES:
            r = fit_case(log_case(scenario, profile, args.seconds or SCENARIOS[scenario][1]))
            print(
                f"| {scenario} | {profile} | {r['held']} | {r['f_t']:.1f} | {1e3 * r['v_t']:.1f} | "
                f"{1e3 * r['c']:.2f} ({1e3 * r['c_mj']:.2f}) | {1e3 * r['tau']:.1f} ({1e3 * r['tau_mj']:.1f}) | "
                f"{r['r2_t']:.2f} | {1e-3 * r['k']:.1f} | {r['b']:.0f} | {r['r2_n']:.2f} | {1e3 * r['depth']:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
