"""ament_python / pip build script for mcoe_ros."""

import os
from glob import glob

from setuptools import find_packages, setup

PACKAGE = "mcoe_ros"
TEST_REQUIRES = ["pytest", "hypothesis"]


def _msg_files() -> list:
    """The Unitree interface package sources shipped as package data (for rosbags type registration)."""
    base = os.path.join(PACKAGE, "interfaces")
    out = []
    for root, _dirs, files in os.walk(base):
        for name in files:
            out.append(os.path.relpath(os.path.join(root, name), PACKAGE))
    return out


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    package_data={PACKAGE: _msg_files() + ["data/go1_sample/*"]},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        ("share/" + PACKAGE + "/launch", glob("launch/*.launch.py")),
        ("share/" + PACKAGE + "/config", glob("config/*.yaml")),
    ],
    install_requires=["numpy", "scipy", "setuptools"],
    # `colcon test` runs pytest on test/ when setup.py declares it as the test runner's requirement
    extras_require={"test": TEST_REQUIRES},
    zip_safe=True,
    maintainer="mcoe_ros maintainers",
    maintainer_email="maintainers@mcoe-ros.org",
    description="Multi-contact optimal estimation (MCOE) of base state and payload inertia for legged robots, ROS 2.",
    license="BSD-3-Clause",
    python_requires=">=3.10",
    entry_points={
        "console_scripts": [
            "mcoe_estimator = mcoe_ros.ros.node:main",
            "mcoe_replay = mcoe_ros.apps.replay:main",
            "mcoe_sim = mcoe_ros.sim.cli:main",
        ],
    },
)
