"""Copies of simulator bags whose reported joint torques are replaced by a centred (zero-phase) moving average.

Offline upper bound of torque smoothing (non-causal, over the whole recording): every ``joint_states`` message's
``effort`` (N m, one per joint) becomes the mean of the 2h+1 samples centred on it (shrunk symmetrically at the
recording's ends, so it stays centred); with ``--split-contacts`` the window also never crosses a change of the
ground-truth contact set (``ground_truth/contacts``) -- it is shrunk symmetrically to stay inside the segment.
Every other message (incl. ``low_state``, which the realism suite does not read) is copied unchanged, and
``sim_metadata.json`` is copied, so ``benchmarks/realism_suite.py --keep OUT`` reuses the copies without
re-simulating. ``--reference REF --part low|high`` (a bag with the same motion and the noise-free torque, e.g.
``benchmarks/sensor_ablation.py``'s ``clean`` row for its ``tau_std`` row) filters only the torque noise and keeps
its low-passed (centred average) or high-passed (the rest) part, which separates the noise's frequency bands from
the averaging's distortion of the signal:

    PYTHONPATH=$PWD .venv/bin/python benchmarks/torque_smoothing_bags.py --src DIR --out OUT --half 2 [--only ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil

import numpy as np

from mcoe_ros.io.bag import BagWriter, iter_messages, iter_raw, typestore


def centred_average(x: np.ndarray, half: int, segment: np.ndarray | None = None) -> np.ndarray:
    """Centred moving average of x (N, n) along axis 0 over 2h+1 samples; near an end (of the array or of a
    segment: samples with equal ``segment`` (N,) label) the window shrinks symmetrically to stay centred."""
    n = len(x)
    seg = np.zeros(n, dtype=int) if segment is None else segment
    # first / last index of each sample's segment
    starts = np.zeros(n, dtype=int)
    ends = np.full(n, n - 1)
    for k in range(1, n):
        starts[k] = starts[k - 1] if seg[k] == seg[k - 1] else k
    for k in range(n - 2, -1, -1):
        ends[k] = ends[k + 1] if seg[k] == seg[k + 1] else k
    csum = np.vstack([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0)])
    out = np.empty_like(x, dtype=float)
    for k in range(n):
        h = min(half, k - starts[k], ends[k] - k)
        out[k] = (csum[k + h + 1] - csum[k - h]) / (2 * h + 1)
    return out


def smooth_bag(src: str, dst: str, half: int, split_contacts: bool, reference: str = "", part: str = "low") -> None:
    """Write the copy of bag directory ``src`` to ``dst`` (see module docstring). With a ``reference`` bag (same
    joint_states stamps, its torque = the noise-free one of ``src``): only the difference n = tau - tau_ref is
    filtered, tau_ref + MA(n) (``part`` "low") or tau_ref + n - MA(n) (``part`` "high")."""
    store = typestore()
    msgs = list(iter_raw(src))
    joint_idx = [i for i, m in enumerate(msgs) if m[0] == "joint_states"]
    joint = [store.deserialize_cdr(msgs[i][3], msgs[i][1]) for i in joint_idx]
    tau = np.array([np.asarray(m.effort, dtype=float) for m in joint])
    segment = None
    if split_contacts:
        contacts = {
            t: tuple(np.asarray(store.deserialize_cdr(raw, mt).data, dtype=bool))
            for topic, mt, t, raw in msgs
            if topic == "ground_truth/contacts"
        }
        labels, last, cur = [], None, -1
        for i in joint_idx:
            c = contacts.get(msgs[i][2], last)
            cur += c != last
            labels.append(cur)
            last = c
        segment = np.array(labels)
    if reference:
        ref = np.array([np.asarray(m.effort, dtype=float) for _, _, m in iter_messages(reference, ["joint_states"])])
        low = centred_average(tau - ref, half, segment)
        smooth = ref + (low if part == "low" else tau - ref - low)
    else:
        smooth = centred_average(tau, half, segment)
    joint = [dataclasses.replace(m, effort=t.astype(np.float64)) for m, t in zip(joint, smooth, strict=True)]
    replaced = dict(zip(joint_idx, joint, strict=True))
    with BagWriter(dst) as bag:  # rosbag2 directory (DST.mcap + metadata.yaml) as the simulator's (no latched topic)
        for i, (topic, mt, t_ns, raw) in enumerate(msgs):
            bag.write(topic, mt, t_ns, replaced[i] if i in replaced else store.deserialize_cdr(raw, mt))
    shutil.copy(os.path.join(src, "sim_metadata.json"), os.path.join(dst, "sim_metadata.json"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True, help="directory of case bag directories (read only)")
    ap.add_argument("--out", required=True, help="output directory (one bag directory per case)")
    ap.add_argument("--half", type=int, required=True, help="h: samples each side (window 2h+1)")
    ap.add_argument("--split-contacts", action="store_true", help="never average across a contact-set change")
    ap.add_argument("--reference", default="", help="bag directory of the noise-free torque (filter tau - tau_ref)")
    ap.add_argument("--part", choices=("low", "high"), default="low", help="with --reference: keep MA(n) or n - MA(n)")
    ap.add_argument("--only", default="", help="comma-separated case names (exact)")
    args = ap.parse_args()
    cases = args.only.split(",") if args.only else sorted(os.listdir(args.src))
    for case in cases:
        dst = os.path.join(args.out, case)
        if os.path.exists(os.path.join(dst, "sim_metadata.json")):
            continue
        if os.path.exists(dst):
            shutil.rmtree(dst)
        os.makedirs(args.out, exist_ok=True)
        src = os.path.join(args.src, case)
        smooth_bag(src, dst, args.half, args.split_contacts, args.reference, args.part)  # sim_metadata.json last
        print(f"{case}: h={args.half} written to {dst}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
