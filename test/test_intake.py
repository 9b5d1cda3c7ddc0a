"""Input accounting and present-tense health (mcoe_ros.io.intake, no rclpy), and the URDF plausibility limits."""

import numpy as np
import pytest

from mcoe_ros.estimation.diagnostics import ERROR, OK, WARN, Diagnostics
from mcoe_ros.estimation.samples import InvalidSample, SampleStats, validate_imu, validate_joint
from mcoe_ros.io.intake import HealthMonitor, StreamIntake


def test_sequence_gaps_are_declared_lost_with_their_cause():
    s = StreamIntake("low_state", period=0.002, queue_depth=500)
    for seq in (1, 2, 3):  # in order, no delay
        s.message(10.0 + seq * 0.002, 10.0 + seq * 0.002, seq, b"pub")
    s.message(11.0, 11.0 - 0.001, 10, b"pub")  # 6 missing, queue nearly empty: transport
    s.message(12.0, 12.0 - 0.9, 20, b"pub")  # 9 missing while the queue was full (0.9 s > 0.5 s): overflow
    s.message(12.1, 12.1, 1, b"other")  # a second publisher has its own numbering
    assert s.received == 6 and s.lost == {"transport": 6, "queue_overflow": 9} and s.n_lost == 15
    values = s.key_values()
    assert values["in_low_state_lost_queue_overflow"] == 9 and values["in_low_state_received"] == 6
    assert float(values["in_low_state_queue_delay_p99_ms"]) > 800
    assert values["in_low_state_before_match"] == 0


def test_messages_published_before_the_match_are_counted_apart_from_losses():
    s = StreamIntake("low_state", period=0.002)
    s.message(1.0, 1.0, 6, b"pub")  # numbering starts at 1: five went out before this subscription matched
    s.message(1.002, 1.002, 7, b"pub")
    assert s.before_match == 5 and s.n_lost == 0 and s.received == 2


def test_queue_delay_ignores_unsynchronised_clocks():
    s = StreamIntake("imu", period=0.002)
    assert s.message(100.0, 100.0 - 0.25) == pytest.approx(0.25)
    assert s.message(100.0, 100.0 + 3.0) == 0.0  # sender clock ahead: not a delay
    assert s.message(100.0, 100.0 - 3600.0) == 0.0  # an hour: another clock


def test_data_timing_counts_missing_samples_and_gaps():
    s = StreamIntake("joint_states", period=0.002, max_gap=0.1)
    t = 5.0
    for _ in range(10):
        t += 0.002
        s.data_time(t)
    s.data_time(t + 0.010)  # 4 samples missing in the data
    s.data_time(t + 0.5)  # a pause longer than max_gap
    s.data_time(t + 0.3)  # older than the newest: not a gap
    assert s.missing_in_data == 4 and s.gaps == 1


def _diag(rejected=None, held=0, message="ok", fill=(101, 101)):
    stats = SampleStats()
    for reason, n in (rejected or {}).items():
        for _ in range(n):
            stats.reject(reason, "detail")
    return Diagnostics(OK, message, 10, held, np.zeros(1), 3, 1.0, fill, stats, 0, None, ())


def test_health_is_about_the_recent_past_and_recovers():
    h = HealthMonitor(stale_timeout=2.0, recent=3.0)
    streams = [StreamIntake("low_state", 0.002)]
    h.input(0.0)
    h.output(0.0)
    assert h.assess(0.0, _diag(), streams)[:2] == (OK, "ok")
    h.input(1.0)
    h.output(1.0)
    level, message, recent = h.assess(1.0, _diag({"gap": 1, "non_finite": 3}), streams)
    assert level == WARN and "4 samples rejected" in message and "non_finite=3" in message
    assert recent["recent_rejected"] == 4
    for t in (2.0, 3.0, 4.0, 5.0):  # no new rejections: the warning ages out
        h.input(t)
        h.output(t)
        level, message, _ = h.assess(t, _diag({"gap": 1, "non_finite": 3}), streams)
    assert (level, message) == (OK, "ok")


def test_stale_output_and_stopped_input_are_errors():
    h = HealthMonitor(stale_timeout=2.0, recent=3.0)
    streams = [StreamIntake("low_state", 0.002)]
    h.assess(0.0, _diag(), streams)
    h.output(0.0)
    for t in np.arange(0.5, 5.0, 0.5):
        h.input(t)  # input flows, no estimate comes out
    level, message, _ = h.assess(5.0, _diag(), streams)
    assert level == ERROR and "no estimate published for 5 s" in message
    level, message, _ = h.assess(9.0, _diag(), streams)  # input stopped 4.5 s ago
    assert level == ERROR and "no input for" in message
    held = h.assess(9.5, _diag(held=2, message="holding last good estimate (cost outlier)"), streams)
    assert held[0] == ERROR and "holding last good estimate" in held[1]


def test_lost_messages_are_a_warning():
    h = HealthMonitor(stale_timeout=2.0, recent=3.0)
    s = StreamIntake("low_state", 0.002, 500)
    h.input(0.0)
    h.output(0.0)
    h.assess(0.0, _diag(), [s])
    s.message(1.0, 1.0, 1, b"p")
    s.message(1.0, 1.0, 50, b"p")
    h.input(1.0)
    h.output(1.0)
    level, message, _ = h.assess(1.0, _diag(), [s])
    assert level == WARN and "48 input messages lost" in message


def test_urdf_plausibility_limits_reject_absurd_joint_and_imu_values():
    from mcoe_ros.estimation.estimator import Estimator

    limits = Estimator().limits
    q = 0.5 * (np.clip(limits.q_low, -3, 3) + np.clip(limits.q_high, -3, 3))
    ok = validate_joint(0.0, q, np.zeros(12), np.zeros(12), 12, limits)
    assert np.allclose(ok.q, q)
    for kwargs, text in (
        ({"q": np.full(12, 1e6)}, r"^out_of_limits: q\[0\]"),
        ({"dq": np.full(12, 500.0)}, r"dq\[0\]"),
        ({"tau": np.full(12, 400.0)}, r"tau\[0\]"),
    ):
        args = {"q": q, "dq": np.zeros(12), "tau": np.zeros(12), **kwargs}
        with pytest.raises(InvalidSample, match=text) as err:
            validate_joint(0.0, args["q"], args["dq"], args["tau"], 12, limits)
        assert err.value.reason == "out_of_limits"
    quat = np.array([1.0, 0, 0, 0])
    validate_imu(0.0, quat, np.zeros(3), np.array([0, 0, 9.81]), limits)
    with pytest.raises(InvalidSample, match="gyro"):
        validate_imu(0.0, quat, np.array([0, 0, 100.0]), np.zeros(3), limits)
    with pytest.raises(InvalidSample, match="acc"):
        validate_imu(0.0, quat, np.zeros(3), np.array([500.0, 0, 0]), limits)
