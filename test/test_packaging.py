"""The package builds a wheel that carries what a ROS 2 install needs (launch, config, ament marker, msgs, data)."""

import os
import shutil
import subprocess
import sys
import zipfile

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
