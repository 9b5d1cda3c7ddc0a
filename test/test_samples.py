"""Sample validation, ordering and interpolation."""

import numpy as np
import pytest

from mcoe_ros.estimation.samples import (
    InvalidSample,
    SampleStats,
    StampedBuffer,
    interp_imu,
    interp_joint,
    validate_imu,
    validate_joint,
)


def test_validate_joint_rejects_nan_inf_and_sizes():
    ok = validate_joint(1.0, np.zeros(12), np.ones(12), np.ones(12), 12)
    assert ok.q.shape == (12,)
    with pytest.raises(InvalidSample) as err:
        validate_joint(1.0, np.zeros(11), np.ones(12), np.ones(12), 12)
    assert err.value.reason == "wrong_size" and "q has 11" in str(err.value)
    bad = np.ones(12)
    bad[4] = np.nan
    with pytest.raises(InvalidSample, match="dq contains NaN"):
        validate_joint(1.0, np.zeros(12), bad, np.ones(12), 12)
    bad[4] = np.inf
    with pytest.raises(InvalidSample, match="tau contains"):
        validate_joint(1.0, np.zeros(12), np.ones(12), bad, 12)
    with pytest.raises(InvalidSample, match="stamp"):
        validate_joint(np.nan, np.zeros(12), np.ones(12), np.ones(12), 12)


def test_validate_imu_normalises_near_unit_and_rejects_far():
    s, repaired = validate_imu(0.0, [1.05, 0, 0, 0], np.zeros(3), [0, 0, 9.81])
    assert repaired and np.isclose(np.linalg.norm(s.quat), 1.0)
    s, repaired = validate_imu(0.0, [1.0, 0, 0, 0], np.zeros(3), [0, 0, 9.81])
    assert not repaired
    with pytest.raises(InvalidSample) as err:
        validate_imu(0.0, [0.1, 0, 0, 0], np.zeros(3), [0, 0, 9.81])
    assert err.value.reason == "bad_quaternion"


def test_buffer_rejects_out_of_order_and_duplicates_and_counts():
    stats = SampleStats()
    buf = StampedBuffer("joint", 1.0, stats)
    mk = lambda t: validate_joint(t, np.full(2, t), np.zeros(2), np.zeros(2), 2)  # noqa: E731
    assert buf.push(mk(0.0)) and buf.push(mk(0.1))
    assert not buf.push(mk(0.1))
    assert not buf.push(mk(0.05))
    assert stats.rejected["duplicate_stamp"] == 1 and stats.rejected["out_of_order"] == 1
    assert stats.accepted["joint"] == 2 and len(buf.items) == 2
    for t in np.arange(0.2, 3.0, 0.1):
        buf.push(mk(t))
    assert buf.items[0].t >= buf.items[-1].t - 1.0 - 1e-12  # horizon kept


def test_interpolation_is_linear_and_quaternion_nlerp():
    stats = SampleStats()
    jb = StampedBuffer("joint", 10, stats)
    jb.push(validate_joint(0.0, [0.0], [0.0], [1.0], 1))
    jb.push(validate_joint(1.0, [2.0], [4.0], [3.0], 1))
    s = interp_joint(jb, 0.25)
    assert np.allclose([s.q[0], s.dq[0], s.tau[0]], [0.5, 1.0, 1.5])
    assert interp_joint(jb, 1.5) is None and interp_joint(jb, -0.1) is None
    ib = StampedBuffer("imu", 10, stats)
    half = np.array([np.cos(0.25), 0, 0, np.sin(0.25)])  # 0.5 rad about z
    ib.push(validate_imu(0.0, [1, 0, 0, 0], np.zeros(3), np.zeros(3))[0])
    ib.push(validate_imu(1.0, -half, np.ones(3), np.ones(3))[0])  # opposite hemisphere, same rotation
    s = interp_imu(ib, 0.5)
    angle = 2 * np.arctan2(np.linalg.norm(s.quat[1:]), abs(s.quat[0]))
    assert abs(angle - 0.25) < 1e-3 and np.allclose(s.gyro, 0.5)
