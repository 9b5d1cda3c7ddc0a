"""Shared test set-up: isolate every test run's ROS 2 graph from other processes on the machine; load benchmark
scripts (benchmarks/ is no package) as modules."""

import os

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
    """``benchmark_module(name)``: ``benchmarks/<name>.py`` as a module (``testing.scripts.load_benchmark``)."""
    from mcoe_ros.testing.scripts import load_benchmark

    return load_benchmark
