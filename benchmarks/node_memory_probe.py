"""The ``mcoe_estimator`` node with a memory probe thread (not a test): where the node's resident memory goes.

Use it as the node of the soak benchmark::

    python benchmarks/soak_node.py --duration 600 --every 60 --node benchmarks/node_memory_probe.py

Every ``MCOE_PROBE_PERIOD`` s (default 30) it appends one JSON line to ``$MCOE_PROBE_OUT/probe.jsonl`` (default
``<tempdir>/mcoe_probe_<pid>``): RSS and anonymous memory (``/proc/self/smaps_rollup``), the malloc heap over all arenas
(glibc ``mallinfo2``: ``arena`` obtained from the system, ``in_use``, ``free`` kept by malloc, ``mmapped``), the
resident size of the main thread's ``[heap]`` and of the anonymous mappings (the other threads' arenas, Python's
object arenas, FastDDS pools), the number of threads and of gc-tracked objects, and the sizes of the node's buffers.
Growth of ``in_use`` at a steady message rate is memory kept (a leak or a growing container); growth of ``free``
with a flat ``in_use`` is fragmentation. ``tracemalloc`` (Python allocations only) is left to the reader:
``PYTHONTRACEMALLOC=5``.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import sys
import tempfile
import threading
import time

from mcoe_ros.ros import node as node_module


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ]


def _mallinfo():
    try:
        fn = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):  # not glibc >= 2.33
        return None
    fn.restype = _MallInfo2
    return fn


def _kb(path: str, names: tuple[str, ...]) -> dict[str, int]:
    """Sums of the kB fields ``names`` of /proc/self/smaps_rollup, or per mapping kind of /proc/self/smaps."""
    out: dict[str, int] = {}
    with open(path) as fh:
        for line in fh:
            parts = line.split()
            if parts and parts[0].rstrip(":") in names:
                out[parts[0].rstrip(":")] = int(parts[1])
    return out


def _mapping_rss() -> tuple[int, int]:
    """(RSS of the [heap] mapping, RSS of anonymous mappings), kB."""
    heap = anon = 0
    kind = None
    with open("/proc/self/smaps") as fh:
        for line in fh:
            first = line.split(maxsplit=5)
            if "-" in first[0] and len(first) >= 5 and ":" in first[3]:  # a mapping header line
                kind = first[5].strip() if len(first) > 5 else ""
            elif first[0] == "Rss:":
                if kind == "[heap]":
                    heap += int(first[1])
                elif kind == "":
                    anon += int(first[1])
    return heap, anon


def _buffers(node) -> dict[str, int]:
    prop = node.feed.estimator.propagator
    return {
        "odometry_entries": len(prop.entries),
        "odometry_history": len(prop.track.history) if prop.track is not None else 0,
        "corrections": len(prop.corrections),
        "received": sum(s.received for s in node.intake),
    }


def probe(nodes: list, out_dir: str, period: float) -> None:
    mallinfo = _mallinfo()
    t0 = time.monotonic()
    with open(os.path.join(out_dir, "probe.jsonl"), "w") as log:
        while True:
            time.sleep(period)
            rollup = _kb("/proc/self/smaps_rollup", ("Rss", "Anonymous"))
            heap, anon = _mapping_rss()
            rec = {
                "t": round(time.monotonic() - t0, 1),
                "rss_kb": rollup.get("Rss"),
                "anon_kb": rollup.get("Anonymous"),
            }
            if mallinfo is not None:
                mi = mallinfo()
                rec.update(arena=mi.arena, in_use=mi.uordblks, free=mi.fordblks, mmapped=mi.hblkhd)
            rec.update(heap_kb=heap, anon_mappings_kb=anon, threads=len(os.listdir("/proc/self/task")))
            rec["gc_objects"] = len(gc.get_objects())
            if nodes:
                try:
                    rec.update(_buffers(nodes[0]))
                except (AttributeError, RuntimeError) as err:  # e.g. a deque mutated while measured
                    rec["buffers_error"] = repr(err)
            log.write(json.dumps(rec) + "\n")
            log.flush()


def main() -> int:
    out_dir = os.environ.get("MCOE_PROBE_OUT", os.path.join(tempfile.gettempdir(), f"mcoe_probe_{os.getpid()}"))
    os.makedirs(out_dir, exist_ok=True)
    nodes: list = []
    original_init = node_module.EstimatorNode.__init__

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        nodes.append(self)

    node_module.EstimatorNode.__init__ = init
    period = float(os.environ.get("MCOE_PROBE_PERIOD", "30"))
    threading.Thread(target=probe, args=(nodes, out_dir, period), name="memory_probe", daemon=True).start()
    sys.argv[0] = "mcoe_estimator"
    return node_module.main()


if __name__ == "__main__":
    raise SystemExit(main())
