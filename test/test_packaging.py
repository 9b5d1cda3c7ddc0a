"""The package builds a wheel that carries what a ROS 2 install needs (launch, config, ament marker, msgs, data)."""

import os
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_wheel_contains_data_files_and_console_scripts(tmp_path):
    src = tmp_path / "src"  # build from a copy: setuptools writes build/ and *.egg-info next to setup.py
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv", ".cache", "build", "*.egg-info", "out"))
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), src],
        capture_output=True,
        text=True,
        timeout=300,
        # the data files are the subject here; the compiled extension is built and tested by .ci/setup-env and
        # test/test_compiled.py (compiling it again would take minutes)
        env={**os.environ, "MCOE_BUILD_EXTENSION": "0"},
    )
    assert out.returncode == 0, out.stderr
    (wheel,) = list(tmp_path.glob("mcoe_ros-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    data = [n.split(".data/data/", 1)[1] for n in names if ".data/data/" in n]
    for needed in (
        "share/ament_index/resource_index/packages/mcoe_ros",
        "share/mcoe_ros/package.xml",
        "share/mcoe_ros/launch/go1_estimator.launch.py",
        "share/mcoe_ros/config/go1.yaml",
    ):
        assert needed in data, needed
    for needed in (
        "mcoe_ros/interfaces/unitree_legged_msgs/msg/LowState.msg",
        "mcoe_ros/data/go1_sample/go1_sample.mcap",
        "mcoe_ros/data/go1_sample/metadata.yaml",
    ):
        assert needed in names, needed
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    scripts = zipfile.ZipFile(wheel).read(entry).decode()
    for script in ("mcoe_estimator", "mcoe_replay", "mcoe_sim"):
        assert script in scripts


#: import name -> package.xml key, for modules whose rosdep key differs from the import name
ROSDEP_KEYS = {
    "tf2_ros": "tf2_ros_py",
    "numpy": "python3-numpy",
    "scipy": "python3-scipy",
    "yaml": "python3-yaml",
    "matplotlib": "python3-matplotlib",
    "pytest": "python3-pytest",
    "hypothesis": "python3-hypothesis",
}
PIP_ONLY = ("rosbags", "mujoco")  #: not on rosdep: named in package.xml's comment and installed with pip
OPTIONAL = ("unitree_legged_msgs", "ros2_unitree_legged_msgs")  #: either one (or none with joint_states input)


def _imports(folder: str) -> set[str]:
    import ast

    names = set()
    for base, _dirs, files in os.walk(os.path.join(ROOT, folder)):
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(base, f), encoding="utf-8") as fh:
                    tree = ast.parse(fh.read())
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import):
                        names.update(a.name.split(".")[0] for a in node.names)
                    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                        names.add(node.module.split(".")[0])
    local = {"mcoe_ros", "conftest", "__future__"} | {f[:-3] for f in os.listdir(os.path.join(ROOT, "test"))}
    return {n for n in names if n not in sys.stdlib_module_names and n not in local}


@pytest.mark.quick
def test_package_xml_declares_every_import():
    import xml.etree.ElementTree as ET

    root = ET.parse(os.path.join(ROOT, "package.xml")).getroot()
    exec_deps = {e.text for e in root if e.tag in ("depend", "exec_depend")}
    test_deps = exec_deps | {e.text for e in root if e.tag == "test_depend"}
    with open(os.path.join(ROOT, "package.xml"), encoding="utf-8") as fh:
        text = fh.read()
    for folder, declared in (("mcoe_ros", exec_deps), ("launch", exec_deps), ("test", test_deps)):
        for name in sorted(_imports(folder)):
            if name in PIP_ONLY:
                assert name in text, f"pip-only {name} is not named in package.xml"
            elif name not in OPTIONAL:
                key = ROSDEP_KEYS.get(name, name)
                assert key in declared, f"{folder}/ imports {name}: package.xml lacks the dependency {key}"


@pytest.mark.quick
def test_setup_py_declares_the_test_runner_for_colcon_test():
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as fh:
        text = fh.read()
    assert 'extras_require={"test": TEST_REQUIRES}' in text and '"pytest"' in text
