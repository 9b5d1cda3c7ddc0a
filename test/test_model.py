"""Robot model: URDF loading, joint map, frames, armature and the payload body."""

import numpy as np
import pinocchio as pin
import pytest

from mcoe_ros.multibody.inertia import pi_from_com, transform_matrix
from mcoe_ros.multibody.robot import GO1_UNITREE_JOINT_ORDER, JointMap, RobotModel, RobotSpec


@pytest.fixture(scope="module")
def robot():
    return RobotModel()


def test_go1_loads_with_free_flyer(robot):
    assert (robot.nq, robot.nv, robot.nj) == (19, 18, 12)
    assert robot.joint_names[:3] == ["FL_hip_joint", "FL_thigh_joint", "FL_calf_joint"]
    assert robot.model.names[1] == "root_joint"
    assert abs(robot.total_mass - 13.1005) < 1e-3  # URDF total incl. rotors and sensors
    for name in ("base", "imu_link", "FL_foot", "FR_foot", "RL_foot", "RR_foot"):
        assert robot.model.existFrame(name)


def test_joint_map_round_trip_by_name(robot):
    jm = robot.joint_map
    hw = np.arange(12.0)  # value i at Unitree motor index i
    model_order = jm.to_model(hw)
    # Unitree index 3 is FL_hip, the model's first actuated joint
    assert model_order[0] == GO1_UNITREE_JOINT_ORDER.index("FL_hip_joint") == 3
    for k, name in enumerate(robot.joint_names):
        assert model_order[k] == GO1_UNITREE_JOINT_ORDER.index(name)
    np.testing.assert_array_equal(jm.to_hw(model_order), hw)
    rng = np.random.default_rng(0)
    batch = rng.normal(size=(5, 12))
    np.testing.assert_array_equal(jm.to_hw(jm.to_model(batch)), batch)
    np.testing.assert_array_equal(jm.to_model(jm.to_hw(batch)), batch)


def test_joint_map_rejects_mismatched_names():
    with pytest.raises(ValueError, match="differ"):
        JointMap(["a", "b"], ["a", "c"])
    with pytest.raises(ValueError):
        JointMap(["a", "b"], ["a", "a"])


def test_unknown_frame_is_a_clear_error():
    with pytest.raises(ValueError, match="frame 'nope'"):
        RobotModel(RobotSpec(imu_frame="nope"))


def test_armature_is_a_parameter():
    r = RobotModel(RobotSpec(armature=0.01))
    assert np.all(r.model.armature[:6] == 0.0) and np.allclose(r.model.armature[6:], 0.01)
    q = r.neutral()
    m_arm = pin.crba(r.model, r.create_data(), q)
    m_nom = pin.crba(RobotModel().model, pin.Data(RobotModel().model), q)
    np.testing.assert_allclose(np.diag(m_arm - m_nom)[6:], 0.01, atol=1e-12)


def test_payload_changes_rnea_exactly_as_a_body_added_to_the_trunk(robot):
    """Independent route: Pinocchio's own appendBodyToJoint on a freshly loaded model."""
    rng = np.random.default_rng(1)
    rot = pin.rpy.rpyToMatrix(0.3, -0.2, 0.5)
    inertia_c = rot @ np.diag([0.03, 0.05, 0.06]) @ rot.T  # non-diagonal
    pi = pi_from_com(7.2, np.array([0.02, -0.01, 0.05]), inertia_c)
    robot.set_payload(pi)
    ref = pin.buildModelFromUrdf(robot.spec.resolved_urdf(), pin.JointModelFreeFlyer())
    frame = ref.frames[ref.getFrameId("trunk")]
    ref.appendBodyToJoint(frame.parentJoint, pin.Inertia.FromDynamicParameters(pi), frame.placement)
    nominal = pin.buildModelFromUrdf(robot.spec.resolved_urdf(), pin.JointModelFreeFlyer())
    for _ in range(5):
        q = pin.randomConfiguration(ref, -np.ones(19), np.ones(19))
        v, a = rng.normal(size=18), rng.normal(size=18)
        tau = pin.rnea(robot.model, robot.create_data(), q, v, a)
        np.testing.assert_allclose(tau, pin.rnea(ref, ref.createData(), q, v, a), rtol=0, atol=1e-10)
        # and the payload really matters (7.2 kg on a 13 kg robot)
        assert np.abs(tau - pin.rnea(nominal, nominal.createData(), q, v, a)).max() > 1.0
    assert abs(robot.total_mass - (13.100529 + 7.2)) < 1e-9
    robot.set_payload(np.zeros(10))
    assert abs(robot.total_mass - 13.100529) < 1e-9


def test_payload_in_an_offset_frame_uses_the_frame_change():
    """A payload expressed in imu_link (offset from the trunk) maps through transform_matrix."""
    r = RobotModel(RobotSpec(payload_frame="imu_link"))
    pi = pi_from_com(2.0, np.array([0.1, 0.0, 0.0]), np.diag([0.01, 0.02, 0.02]))
    r.set_payload(pi)
    placement = r.model.frames[r.model.getFrameId("imu_link")].placement
    expected = placement.act(pin.Inertia.FromDynamicParameters(pi))
    got = r.model.inertias[1] - r.nominal_inertias[1]
    np.testing.assert_allclose(got.toDynamicParameters(), expected.toDynamicParameters(), atol=1e-12)
    np.testing.assert_allclose(
        transform_matrix(placement.rotation, placement.translation) @ pi, expected.toDynamicParameters(), atol=1e-12
    )


def test_foot_map_follows_the_unitree_leg_order(robot):
    assert robot.foot_map.hw_names == ["FR_foot", "FL_foot", "RR_foot", "RL_foot"]
    raw = np.array([10.0, 20.0, 30.0, 40.0])  # LowState.foot_force: FR, FL, RR, RL
    np.testing.assert_array_equal(robot.foot_map.to_model(raw), [20.0, 10.0, 40.0, 30.0])  # FL, FR, RL, RR


def test_combined_inertia_frame_is_the_parent_joint_frame(robot):
    assert robot.payload_parent_frame in ("base", "trunk")
    frame = robot.model.frames[robot.model.getFrameId(robot.payload_parent_frame)]
    assert frame.parentJoint == robot.payload_joint and frame.placement.isIdentity()
