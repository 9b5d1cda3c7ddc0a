"""Locations of the data shipped with the package (the sample bag), for tests, benchmarks and the README job."""

from __future__ import annotations

import os

#: the committed 10 s simulator bag (6 s squat-sway then 4 s trot, 7.2 kg payload; see its metadata.yaml)
SAMPLE_BAG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "go1_sample")
#: overrides that switch the errors-in-variables defaults off (the frozen torque-noise weight, the model's
#: accelerometer): for options they do not support (robust losses, soft contact, a leg mass scale)
EIV_OFF = {"noise.joint_torque_weight": "frozen", "noise.accelerometer_realised": False}


def first_estimates(feed, count: int, bag: str = SAMPLE_BAG) -> list:
    """Feed ``bag``'s ``low_state`` messages to ``feed`` (a :class:`mcoe_ros.io.feed.SensorFeed`), polling after
    each, until it has produced ``count`` estimates (or the bag ends); returns them."""
    from mcoe_ros.io.bag import iter_messages

    out = []
    for _, t_ns, msg in iter_messages(bag, ["low_state"]):
        feed.low_state(msg, t_ns * 1e-9)
        out += feed.poll()
        if len(out) >= count:
            break
    return out


def play_low_states(feed, seconds: float, bag: str = SAMPLE_BAG) -> None:
    """Feed the first ``seconds`` of ``bag``'s LowState stream to ``feed`` (a :class:`mcoe_ros.io.feed.SensorFeed`)
    in real-time order, polling after every message (grid advance, due solves), as the replay does."""
    from mcoe_ros.io.bag import bag_topics, iter_messages

    topic = next(name for name, info in bag_topics(bag).items() if info.msgtype.endswith("LowState"))
    t_first = None
    for _, t_ns, msg in iter_messages(bag, [topic]):
        t_first = t_ns if t_first is None else t_first
        if (t_ns - t_first) * 1e-9 > seconds:
            break
        feed.low_state(msg, t_ns * 1e-9)
        feed.poll()
