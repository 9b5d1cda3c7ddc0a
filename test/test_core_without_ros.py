"""The core package imports with every ROS module blocked (the robot's MPC side may not have ROS)."""

import subprocess
import sys

BLOCK_ROS = r"""
import importlib, pkgutil, sys
class Block:
    PREFIXES = ("rclpy", "rosidl", "rpyutils", "std_msgs", "sensor_msgs", "geometry_msgs", "nav_msgs",
                "diagnostic_msgs", "std_srvs", "builtin_interfaces", "unitree_legged_msgs", "tf2_ros")
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.PREFIXES:
            raise ImportError("blocked ROS module " + name)
sys.meta_path.insert(0, Block())
import mcoe_ros
core = [m.name for m in pkgutil.walk_packages(mcoe_ros.__path__, "mcoe_ros.")
        if not m.name.startswith(("mcoe_ros.ros", "mcoe_ros.interfaces"))]
for name in core:
    importlib.import_module(name)
assert not [m for m in sys.modules if m.split(".")[0] in Block.PREFIXES]
print(len(core))
"""


def test_core_imports_without_ros():
    out = subprocess.run([sys.executable, "-c", BLOCK_ROS], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) >= 4
