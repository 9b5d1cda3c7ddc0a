"""The parameter table, config/go1.yaml and the launch file agree (launch itself is not installable here)."""

import ast
import os

import pytest
import yaml

from mcoe_ros.io.params import DEFAULTS, NODE_NAME, PARAMETERS, ConfigError, flatten, load_params, resolve

pytestmark = pytest.mark.quick  # also run by colcon test in .ci/colcon-check

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
YAML = os.path.join(ROOT, "config", "go1.yaml")


def test_every_yaml_key_is_declared_and_vice_versa():
    with open(YAML) as fh:
        doc = yaml.safe_load(fh)
    keys = set(flatten(doc["/**"]["ros__parameters"]))  # applies under any namespace
    declared = {p.name for p in PARAMETERS}
    assert keys == declared, f"only in YAML: {keys - declared}; only declared: {declared - keys}"
    assert load_params(YAML) == DEFAULTS
    assert all(p.description for p in PARAMETERS)
    assert len(declared) == len(PARAMETERS)


def test_bad_values_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="estimator.dt"):
        resolve({"estimator.dt": "fast"})
    with pytest.raises(ConfigError, match="solver.rollout.*one of"):
        resolve({"solver.rollout": "zigzag"})
    with pytest.raises(ConfigError, match="unknown parameter 'nope'"):
        resolve({"nope": 1})
    bad = tmp_path / "bad.yaml"
    bad.write_text("mcoe_estimator: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_params(str(bad))
    bad.write_text("other_node:\n  ros__parameters: {}\n")
    with pytest.raises(ConfigError, match=r"no '/\*\*: ros__parameters:'"):
        load_params(str(bad))
    with pytest.raises(ConfigError, match="cannot read"):
        load_params(str(tmp_path / "missing.yaml"))


def test_launch_file_uses_the_yaml_and_the_installed_console_script(monkeypatch):
    """`launch`/`launch_ros` are not installable here: they are replaced by recording stand-ins (a mock, by
    necessity); the launch file's own code runs for real and is checked against setup.py and the YAML."""
    import importlib.util
    import sys
    import types

    recorded = {}

    def recorder(name):
        def make(*args, **kwargs):
            recorded.setdefault(name, []).append(kwargs or args)
            return (name, args, kwargs)

        return make

    fakes = {
        "launch": {"LaunchDescription": recorder("LaunchDescription")},
        "launch.actions": {"DeclareLaunchArgument": recorder("DeclareLaunchArgument")},
        "launch.substitutions": {"LaunchConfiguration": lambda name: ("LaunchConfiguration", name)},
        "launch_ros.actions": {"Node": recorder("Node")},
        "launch_ros.parameter_descriptions": {"ParameterValue": lambda v, value_type: ("ParameterValue", v)},
        "launch_ros": {},
        "ament_index_python.packages": {"get_package_share_directory": lambda pkg: f"/install/share/{pkg}"},
        "ament_index_python": {},
    }
    for mod, attrs in fakes.items():
        monkeypatch.setitem(sys.modules, mod, types.SimpleNamespace(**attrs))
    spec = importlib.util.spec_from_file_location("go1_launch", os.path.join(ROOT, "launch", "go1_estimator.launch.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.generate_launch_description()
    (node,) = recorded["Node"]
    with open(os.path.join(ROOT, "setup.py")) as fh:
        tree = ast.parse(fh.read())
    scripts = [
        ast.literal_eval(elt).split("=")[0].strip()
        for n in ast.walk(tree)
        if isinstance(n, ast.Dict)
        for k, v in zip(n.keys, n.values, strict=True)
        if isinstance(k, ast.Constant) and k.value == "console_scripts"
        for elt in v.elts
    ]
    assert node["executable"] in scripts and node["package"] == "mcoe_ros" and node["name"] == NODE_NAME
    args = {kw["default_value"] for kw in recorded["DeclareLaunchArgument"] if kw.get("default_value")}
    assert "/install/share/mcoe_ros/config/go1.yaml" in args  # installed by setup.py data_files
    assert ("LaunchConfiguration", "config") in node["parameters"]
    overrides = node["parameters"][1]
    assert set(overrides) - {"use_sim_time"} <= {p.name for p in PARAMETERS}
