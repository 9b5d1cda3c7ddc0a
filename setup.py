"""ament_python / pip build script for mcoe_ros.

The compiled hot path ``mcoe_ros._mcoe`` (sources in ``cpp/``) is built by CMake from ``build_ext``: pybind11 from
pip, Pinocchio through ``find_package(pinocchio)`` — in a virtualenv from the ``pin`` wheel's ``cmeel.prefix``, on a
ROS 2 machine from the distribution (``CMAKE_PREFIX_PATH`` / ``AMENT_PREFIX_PATH``). Environment:
``MCOE_BUILD_EXTENSION=0`` skips it (the Python reference is then used), ``MCOE_REQUIRE_EXTENSION=1`` turns a failed
build into an error (otherwise a warning: the package stays usable with the Python backend),
``MCOE_BUILD_JOBS`` sets the parallel compile jobs (default 2).
"""

import os
import subprocess
import sys
from glob import glob

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

PACKAGE = "mcoe_ros"
TEST_REQUIRES = ["pytest", "hypothesis"]
HERE = os.path.dirname(os.path.abspath(__file__))


def _prefix_path() -> list:
    """CMake prefixes where Pinocchio, Eigen, Boost and pybind11 are found (venv cmeel prefix, ROS prefixes)."""
    paths = []
    try:
        import cmeel  # the pin wheel's prefix (headers, libraries, CMake configs)

        paths.append(cmeel.__path__[0] + ".prefix")
    except ImportError:
        pass
    try:
        import pybind11

        paths.append(pybind11.get_cmake_dir())
    except ImportError:
        pass
    for var in ("CMAKE_PREFIX_PATH", "AMENT_PREFIX_PATH"):
        paths += [p for p in os.environ.get(var, "").split(os.pathsep) if p]
    return paths


class CMakeExtension(Extension):
    """An extension module built by the CMake project in ``sourcedir``."""

    def __init__(self, name: str, sourcedir: str):
        super().__init__(name, sources=[])
        self.sourcedir = os.path.abspath(sourcedir)


class CMakeBuild(build_ext):
    """build_ext that configures and builds the CMake project of each CMakeExtension."""

    def run(self):
        if os.environ.get("MCOE_BUILD_EXTENSION", "1") == "0":
            print("mcoe_ros: MCOE_BUILD_EXTENSION=0, compiled hot path not built")
            self.extensions = [e for e in self.extensions if not isinstance(e, CMakeExtension)]
        super().run()

    def build_extensions(self):
        failed = []
        for ext in self.extensions:
            if not isinstance(ext, CMakeExtension):
                self.build_extension(ext)
                continue
            try:
                self._cmake(ext)
            except (OSError, subprocess.CalledProcessError) as err:
                if os.environ.get("MCOE_REQUIRE_EXTENSION", "0") == "1":
                    raise
                print(f"mcoe_ros: WARNING: compiled hot path not built ({err}); the Python reference is used")
                failed.append(ext)
        for ext in failed:  # nothing to install for it
            self.extensions.remove(ext)

    def _cmake(self, ext):
        out = os.path.dirname(os.path.abspath(self.get_ext_fullpath(ext.name)))
        build = os.path.join(os.path.abspath(self.build_temp), "cmake-" + ext.name)
        os.makedirs(build, exist_ok=True)
        configure = [
            "cmake",
            ext.sourcedir,
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={out}",
            f"-DPython3_EXECUTABLE={sys.executable}",
            "-DCMAKE_PREFIX_PATH=" + ";".join(_prefix_path()),
        ]
        subprocess.run(configure, cwd=build, check=True)
        jobs = os.environ.get("MCOE_BUILD_JOBS", "2")
        subprocess.run(["cmake", "--build", build, "--parallel", jobs], cwd=build, check=True)


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
    ext_modules=[CMakeExtension(PACKAGE + "._mcoe", os.path.join(HERE, "cpp"))],
    cmdclass={"build_ext": CMakeBuild},
    install_requires=["numpy", "scipy", "setuptools"],
    # `colcon test` runs pytest on test/ when setup.py declares it as the test runner's requirement
    extras_require={"test": TEST_REQUIRES},
    zip_safe=False,
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
