"""Configuration errors end in one line naming the parameter and exit code 2 (node and replay alike); --help of every
console script prints usage without starting the program; the shipped parameter-file layout applies under any
namespace (values that differ from the defaults, checked through the node's parameter service)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "mcoe_ros", "data", "go1_sample")

#: (id, -p arguments or a parameter file's body, text the one-line error must contain)
CASES = [
    ("mode", ["input.mode:=foo"], "input.mode"),
    ("window-int", ["estimator.window:=-1"], "estimator.window"),
    ("window-float", ["estimator.window:=-1.0"], "estimator.window"),
    ("window-tiny", ["estimator.window:=0.004"], "estimator.window"),
    ("dt", ["estimator.dt:=0.0"], "estimator.dt"),
    ("dt-type", ["estimator.dt:=fast"], "estimator.dt"),
    ("urdf", ["robot.urdf_path:=/nonexistent/go1.urdf"], "robot.urdf_path"),
    ("prior-mass", ["payload.prior_mass:=0.0"], "payload.prior_mass"),
    (
        "prior-sigma",
        ["payload.prior_sigma:=[1.0, -1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]"],
        "payload.prior_sigma",
    ),
    ("noise", ["noise.gyro:=-0.1"], "noise.gyro"),
    ("unknown", ["tick_perod:=0.1"], "tick_perod"),
    ("unknown-file", "/**:\n  ros__parameters:\n    estimator:\n      tick_perod: 0.1\n", "estimator.tick_perod"),
    ("unparsable-file", "/**:\n  ros__parameters: [1, 2\n", "not valid YAML"),
]


def _node_args(case, tmp_path) -> list[str]:
    args = [sys.executable, "-m", "mcoe_ros.ros.node", "--ros-args", "-r", "__ns:=/bad"]
    if isinstance(case, str):
        path = tmp_path / "params.yaml"
        path.write_text(case)
        return args + ["--params-file", str(path)]
    for p in case:
        args += ["-p", p]
    return args


def _yaml_of(case) -> str:
    """The -p overrides as a replay --config file (the same checks must apply)."""
    if isinstance(case, str):
        return case
    lines = ["/**:", "  ros__parameters:"]
    for p in case:
        name, value = p.split(":=", 1)
        lines.append(f"    {name}: {value if value[:1] in '-0123456789[' else repr(value)}")
    return "\n".join(lines) + "\n"


def _run_all(commands: list[list[str]]) -> list[subprocess.CompletedProcess]:
    """Run the commands concurrently (each is mostly interpreter start-up); their completed processes."""
    procs = [subprocess.Popen(c, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in commands]
    out = []
    for cmd, p in zip(commands, procs, strict=True):
        try:
            stdout, stderr = p.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, stderr = p.communicate()
        out.append(subprocess.CompletedProcess(cmd, p.returncode, stdout, stderr))
    return out


def _check_one_line(result, expected: str, label: str) -> None:
    text = (result.stdout + result.stderr).strip()
    assert result.returncode == 2, (label, result.returncode, text)
    assert "Traceback" not in text, (label, text)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert len(lines) == 1 and expected in lines[0], (label, text)


def test_node_config_errors_are_one_line_exit_2(tmp_path):
    cmds = []
    for i, (_id, case, _exp) in enumerate(CASES):
        sub = tmp_path / str(i)
        sub.mkdir()
        cmds.append(_node_args(case, sub))
    for (label, _case, expected), result in zip(CASES, _run_all(cmds), strict=True):
        _check_one_line(result, expected, label)


def test_replay_config_errors_are_one_line_exit_2(tmp_path):
    cmds = []
    for i, (_id, case, _exp) in enumerate(CASES):
        path = tmp_path / f"{i}.yaml"
        path.write_text(_yaml_of(case))
        cmds.append([sys.executable, "-m", "mcoe_ros.apps.replay", SAMPLE, "--config", str(path), "--quiet"])
    for (label, _case, expected), result in zip(CASES, _run_all(cmds), strict=True):
        _check_one_line(result, expected, label)


def test_replay_refuses_unwritable_outputs_before_replaying(tmp_path):
    missing = str(tmp_path / "no" / "such" / "folder")
    cmds = [
        [sys.executable, "-m", "mcoe_ros.apps.replay", SAMPLE, "--json", missing + "/s.json"],
        [sys.executable, "-m", "mcoe_ros.apps.replay", SAMPLE, "--report", missing + "/r.png"],
        [sys.executable, "-m", "mcoe_ros.apps.replay", SAMPLE, "--out", missing + "/bag"],
        [sys.executable, "-m", "mcoe_ros.apps.replay", SAMPLE, "--start", "50"],
    ]
    expected = ["--json", "--report", "--out", "past the end"]
    for result, exp in zip(_run_all(cmds), expected, strict=True):
        _check_one_line(result, exp, exp)


def test_help_of_every_console_script_prints_usage_and_starts_nothing():
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as fh:
        text = fh.read()
    modules = {
        line.split("=")[0].strip().strip('"'): line.split("=")[1].split(":")[0].strip()
        for line in text.splitlines()
        if "= mcoe_ros." in line
    }
    assert set(modules) == {"mcoe_estimator", "mcoe_replay", "mcoe_sim"}
    cmds = [[sys.executable, "-c", f"import sys, {m}; sys.exit({m}.main(['--help']))"] for m in modules.values()]
    for (name, _m), result in zip(modules.items(), _run_all(cmds), strict=True):
        assert result.returncode == 0, (name, result.stderr)
        assert "usage" in result.stdout.lower() and name in result.stdout, (name, result.stdout)
        assert "Traceback" not in result.stderr and " up:" not in result.stdout + result.stderr


def test_parameter_file_applies_under_a_namespace(tmp_path):
    """A `/**:` parameter file (the shipped layout) with values unlike the defaults, node under -r __ns:=/ns_test."""
    rclpy = pytest.importorskip("rclpy", reason="ROS 2 wheels not installed")
    from rcl_interfaces.srv import GetParameters
    from rclpy.executors import SingleThreadedExecutor

    from mcoe_ros.io.params import DEFAULTS

    values = {
        "estimator.tick_period": 0.1,
        "estimator.window": 0.1,
        "payload.prior_mass": 3.5,
        "noise.gyro": 0.05,
        "output.odom_frame": "odom_test",
        "solver.max_iterations": 2,
    }
    assert all(DEFAULTS[k] != v for k, v in values.items())
    body = ["/**:", "  ros__parameters:"]
    for key, value in values.items():
        section, name = key.split(".")
        body += [f"    {section}:", f"      {name}: {value!r}".replace("'", '"')]
    path = tmp_path / "params.yaml"
    path.write_text("\n".join(body) + "\n")
    args = [sys.executable, "-m", "mcoe_ros.ros.node", "--ros-args", "--params-file", str(path), "-r", "__ns:=/ns_test"]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ctx = rclpy.context.Context()
    rclpy.init(context=ctx)
    try:
        node = rclpy.create_node("param_checker", context=ctx)
        client = node.create_client(GetParameters, "/ns_test/mcoe_estimator/get_parameters")
        assert client.wait_for_service(timeout_sec=90), "node's parameter service never appeared"
        future = client.call_async(GetParameters.Request(names=list(values)))
        executor = SingleThreadedExecutor(context=ctx)
        executor.add_node(node)
        deadline = time.monotonic() + 30
        while not future.done() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        got = future.result().values
    finally:
        rclpy.shutdown(context=ctx)
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    for (key, want), value in zip(values.items(), got, strict=True):
        have = {2: value.integer_value, 3: value.double_value, 4: value.string_value}[value.type]
        assert have == want, (key, have, want, out)
