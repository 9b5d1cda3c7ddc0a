"""Launch the MCOE estimator on a Unitree Go1 (ROS 2 Humble/Jazzy).

    ros2 launch mcoe_ros go1_estimator.launch.py input_mode:=low_state use_sim_time:=false

Arguments: ``config`` (parameter YAML, default: the installed config/go1.yaml), ``input_mode``
(low_state | joint_states), ``use_sim_time`` (true when replaying a bag with ``ros2 bag play --clock``),
``namespace`` (outputs appear as <namespace>/odom, <namespace>/payload/inertia, ...).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue


def generate_launch_description():
    default_config = os.path.join(get_package_share_directory("mcoe_ros"), "config", "go1.yaml")
    return LaunchDescription(
        [
            DeclareLaunchArgument("config", default_value=default_config, description="parameter YAML"),
            DeclareLaunchArgument("input_mode", default_value="low_state", description="low_state | joint_states"),
            DeclareLaunchArgument("use_sim_time", default_value="false", description="use /clock (bag replay)"),
            DeclareLaunchArgument("namespace", default_value="mcoe", description="namespace of the outputs"),
            Node(
                package="mcoe_ros",
                executable="mcoe_estimator",
                name="mcoe_estimator",
                namespace=LaunchConfiguration("namespace"),
                output="screen",
                parameters=[
                    LaunchConfiguration("config"),
                    {
                        "use_sim_time": ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool),
                        "input.mode": LaunchConfiguration("input_mode"),
                    },
                ],
            ),
        ]
    )
