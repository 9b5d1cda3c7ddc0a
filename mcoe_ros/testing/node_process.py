"""The mcoe_estimator node as a child process (console-script module, Go1 parameter file), for tests and benchmarks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "config", "go1.yaml")


def start_node(*params: str, namespace: str = "/mcoe") -> subprocess.Popen:
    """Start the node with ``config/go1.yaml`` and extra ``name:=value`` parameters; output captured as text."""
    args = [
        sys.executable,
        "-m",
        "mcoe_ros.ros.node",
        "--ros-args",
        "--params-file",
        CONFIG,
        "-r",
        f"__ns:={namespace}",
    ]
    for p in params:
        args += ["-p", p]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def stop_node(proc: subprocess.Popen) -> str:
    """SIGINT (killed after 30 s) and the node's output."""
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out
