"""Shared test set-up: isolate every test run's ROS 2 graph from other processes on the machine; load benchmark
scripts (benchmarks/ is no package) as modules."""

import importlib.util
import os
import sys

import pytest

# A private DDS domain per test process, discovery limited to this host: parallel runs and other
# ROS processes on the machine never see our topics (must be set before rclpy.init).
os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_LOCALHOST_ONLY", "1")


def pytest_configure(config):
    config.addinivalue_line("markers", "faults: fault injection on a real rclpy graph (test_fault_injection.py)")
    config.addinivalue_line("markers", "quick: a fast subset (run by the colcon workspace test of .ci/test)")


@pytest.fixture(scope="session")
def benchmark_module():
    """``benchmark_module(name)``: the module of ``benchmarks/<name>.py``, loaded once by path and registered under its
    name (dataclasses resolve their module by name)."""
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")

    def load(name: str):
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, os.path.join(root, f"{name}.py"))
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        return sys.modules[name]

    return load
