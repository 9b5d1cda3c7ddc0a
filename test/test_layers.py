"""The package's architecture, read from the source (AST): folders are layers with one import direction.

    ocp (numpy/scipy) <- multibody (+ pinocchio) <- payload <- estimation <- io <- {ros, apps, sim} <- testing

A module may import its own layer and the layers below it, never above or sideways; ROS (rclpy and message packages)
only in ``ros/``, rosbags only in the I/O and application layers, mujoco only in ``sim/`` (and the test helpers that
build simulated datasets), matplotlib only in ``apps/`` and ``testing/``. Imports inside functions count too. The
module import graph has no cycle, and neither ``test/`` nor ``benchmarks/`` manipulate ``sys.path``.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.quick  # also run by colcon test in .ci/colcon-check

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mcoe_ros"

RANK = {"ocp": 0, "multibody": 1, "payload": 2, "estimation": 3, "io": 4, "ros": 5, "apps": 5, "sim": 5, "testing": 6}
ROS_MODULES = {
    "rclpy",
    "rcl_interfaces",
    "rosgraph_msgs",
    "std_msgs",
    "sensor_msgs",
    "geometry_msgs",
    "nav_msgs",
    "diagnostic_msgs",
    "std_srvs",
    "builtin_interfaces",
    "tf2_ros",
    "unitree_legged_msgs",
    "ros2_unitree_legged_msgs",
}
#: third-party top-level modules and the layers allowed to import them (absent = allowed everywhere but ocp)
ALLOWED_THIRD_PARTY = {
    **{m: {"ros"} for m in ROS_MODULES},
    "rosbags": {"io", "apps", "sim", "testing"},
    "mujoco": {"sim", "testing"},
    "matplotlib": {"apps", "testing"},
}
OCP_THIRD_PARTY = {"numpy", "scipy"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        if "interfaces" in rel.parts or "data" in rel.parts:
            continue
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _imports(module: str, path: Path) -> list[tuple[str, int]]:
    """Every imported module name (absolute) with its line, anywhere in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((name, node.lineno))
            # "from mcoe_ros.io import messages" imports the submodule mcoe_ros.io.messages
            for alias in node.names:
                sub = f"{name}.{alias.name}"
                if sub in MODULES:
                    found.append((sub, node.lineno))
    return found


def _internal_target(name: str) -> str | None:
    """The package module an import refers to (longest known prefix), or None for third-party modules."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        cand = ".".join(parts[:i])
        if cand in MODULES:
            return cand
    return None


def _show(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _violations() -> list[str]:
    bad = []
    for module, path in sorted(MODULES.items()):
        layer = _layer(module)
        for name, line in _imports(module, path):
            where = f"{_show(path)}:{line} imports {name}"
            top = name.split(".")[0]
            if top == "mcoe_ros":
                target = _internal_target(name)
                tlayer = _layer(target) if target else None
                if layer is None or tlayer is None or tlayer == layer:
                    if layer is None and tlayer is not None:
                        bad.append(f"{where}: the package root imports no layer")
                    continue
                if layer not in RANK or tlayer not in RANK:
                    bad.append(f"{where}: unknown layer")
                elif RANK[tlayer] >= RANK[layer]:
                    bad.append(f"{where}: layer '{layer}' may not import layer '{tlayer}'")
                continue
            if layer == "ocp" and top not in OCP_THIRD_PARTY and not _is_stdlib(top):
                bad.append(f"{where}: the ocp layer is numpy/scipy only")
            allowed = ALLOWED_THIRD_PARTY.get(top)
            if allowed is not None and layer not in allowed:
                bad.append(f"{where}: '{top}' only in {sorted(allowed)}")
    return bad


def _is_stdlib(name: str) -> bool:
    import sys

    return name in sys.stdlib_module_names or name == "__future__"


def test_imports_follow_the_layer_order():
    assert not _violations(), "\n".join(_violations())


def test_layer_rules_catch_violations(tmp_path, monkeypatch):
    """The checker itself fails on an upward import, a ROS import in the core and a numpy-only breach in ocp."""
    bad = {
        "mcoe_ros.ocp.bad_up": "from mcoe_ros.estimation.estimate import Estimate\n",
        "mcoe_ros.estimation.bad_ros": "def f():\n    import rclpy\n",
        "mcoe_ros.ocp.bad_pin": "import pinocchio\n",
        "mcoe_ros.ros.bad_side": "from mcoe_ros.apps import replay\n",
    }
    extra = {}
    for module, text in bad.items():
        path = tmp_path / (module.replace(".", "_") + ".py")
        path.write_text(text)
        extra[module] = path
    monkeypatch.setattr(f"{__name__}.MODULES", {**MODULES, **extra})
    found = "\n".join(_violations())
    for module in bad:
        assert module.replace(".", "_") in found, (module, found)


def test_import_graph_has_no_cycle():
    graph = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for name, _ in _imports(module, path):
            target = _internal_target(name) if name.startswith("mcoe_ros") else None
            if target and target != module and target != "mcoe_ros":
                graph[module].add(target)
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                pytest.fail("import cycle: " + " -> ".join(stack[stack.index(t) :] + [t]))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


@pytest.mark.parametrize("folder", ["test", "benchmarks"])
def test_no_sys_path_manipulation(folder):
    offenders = []
    for path in sorted((ROOT / folder).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", "") == "sys":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders


def test_every_layer_is_documented_in_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for layer in RANK:
        assert f"`mcoe_ros/{layer}/`" in readme, layer
        assert (PACKAGE / layer / "__init__.py").read_text(encoding="utf-8").strip().startswith('"""'), layer
    assert os.path.isdir(PACKAGE / "ocp")
