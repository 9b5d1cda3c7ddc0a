"""Small helpers the benchmark scripts share to print and store their tables (markdown in ``docs/``)."""

from __future__ import annotations

import os
import platform
import sys

import numpy as np
import pinocchio as pin


def versions() -> str:
    """Versions of the numerical stack (for the header of a results table)."""
    import matplotlib
    import mujoco
    import scipy

    return (
        f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
        f"pinocchio {pin.__version__}, mujoco {mujoco.__version__}, matplotlib {matplotlib.__version__}"
    )


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def parse_overrides(items: list[str]) -> dict:
    """Estimator parameter overrides from ``KEY=VALUE`` strings (a benchmark's repeatable ``--set``): flat parameter
    name of :mod:`mcoe_ros.io.params`, YAML value."""
    import yaml

    out = {}
    for item in items:
        key, _, value = item.partition("=")
        out[key] = yaml.safe_load(value)
    return out


def write_doc(docs_dir: str, name: str, text: str) -> str:
    """Write ``text`` to ``docs_dir/name``; returns the path."""
    os.makedirs(docs_dir, exist_ok=True)
    path = os.path.join(docs_dir, name)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def command_line(root: str) -> str:
    """The command that ran this script, relative to the repository ``root`` (for reproducibility notes)."""
    return ".venv/bin/python " + " ".join([os.path.relpath(sys.argv[0], root), *sys.argv[1:]])


def uptime() -> str:
    """The machine load (``/proc/loadavg``) when a benchmark runs: timings on a shared machine need it."""
    try:
        with open("/proc/loadavg", encoding="utf-8") as fh:
            return "load average " + " ".join(fh.read().split()[:3])
    except OSError:
        return "load average n/a"


def run_in_tree(tree: str, code: str, *args) -> dict:
    """Run ``python -c code args...`` with source tree ``tree`` first on the path (one-threaded BLAS, cwd ``tree``)
    and return the JSON object of its last stdout line: one version of the package measured in a fresh process."""
    import json
    import subprocess

    tree = os.path.abspath(tree)
    env = dict(os.environ, PYTHONPATH=tree, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], env=env, cwd=tree, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])
