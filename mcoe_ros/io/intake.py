"""Input accounting without rclpy: how many messages arrived, how many were lost and where, how late they were
handled, and the estimator's present health (what /diagnostics reports as level and message).

:class:`StreamIntake` follows one input stream. Per handled message the adapter passes what it knows:

* the publisher's sequence number (``MessageInfo.publication_sequence_number``, per publisher): a jump of ``n``
  means ``n - 1`` messages were published and never handed to the callback. They are *declared* lost, and
  attributed to the subscription queue (``queue_overflow``) when the queue was at least half full at the time
  (queueing delay above half the queue's span), else to the transport. Sequence numbers start at 1, so the first
  message seen from a publisher tells how many it published before this subscription matched it
  (``before_match``: counted, not lost — they were never addressed to this node);
* the publisher's send time (``MessageInfo.source_timestamp``, wall clock) and the handling time: the queueing
  delay, whose percentiles are reported and which corrects the reception stamps of headerless messages;
* the data's own time (header stamp, or the corrected reception stamp): samples the data itself lacks (its
  timing jumps by more than 1.5 nominal periods) are counted as ``missing_in_data``; longer pauses are gaps
  (declared from the data's timing only, never from the callback's).

:class:`HealthMonitor` turns the estimator's :class:`~mcoe_ros.estimation.diagnostics.Diagnostics`, the intake
counters and the output times into one present-tense level and message: ERROR when no estimate has been published
for ``stale_timeout`` s although input arrives, or when input stopped; WARN with the reasons when, within the last
``recent`` s, samples were rejected, messages were lost, or the estimator held its last good estimate; OK otherwise.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

import numpy as np

from mcoe_ros.estimation.diagnostics import ERROR, OK, WARN, Diagnostics

MAX_PLAUSIBLE_DELAY = 10.0  #: s; a larger (or negative) publisher-to-handler delay means unsynchronised clocks


@dataclass
class StreamIntake:
    """Counters of one input stream (see module docstring). Times in seconds; ``period`` the nominal one."""

    name: str
    period: float
    queue_depth: int = 0  #: subscription queue depth (0: unknown)
    received: int = 0
    before_match: int = 0  #: messages a publisher sent before this subscription matched it
    lost: Counter = field(default_factory=Counter)  #: by cause: 'queue_overflow', 'transport'
    missing_in_data: int = 0  #: samples absent from the data's own timing (never published)
    gaps: int = 0  #: pauses of the data longer than ``max_gap``
    max_gap: float = 0.1
    delays: deque = field(default_factory=lambda: deque(maxlen=2000))  #: recent queueing delays, s
    _seq: dict = field(default_factory=dict)  #: last sequence number per publisher
    _last_t: float | None = None

    def message(
        self,
        t_handled: float,
        t_sent: float | None = None,
        seq: int | None = None,
        publisher=None,
        t_data: float | None = None,
    ) -> float:
        """Account one handled message; returns its queueing delay in s (0 when unknown or implausible).

        ``t_handled`` and ``t_sent`` on one wall clock; ``t_data`` on the data's clock (any epoch)."""
        self.received += 1
        delay = 0.0
        if t_sent is not None and 0.0 <= t_handled - t_sent <= MAX_PLAUSIBLE_DELAY:
            delay = t_handled - t_sent
            self.delays.append(delay)
        if seq is not None:
            key = publisher if publisher is not None else ""
            last = self._seq.get(key)
            if last is None:
                self.before_match += max(0, seq - 1)
            elif seq > last + 1:
                full = self.queue_depth and delay > 0.5 * self.queue_depth * self.period
                self.lost["queue_overflow" if full else "transport"] += seq - last - 1
            if last is None or seq > last:
                self._seq[key] = seq
        if t_data is not None:
            self.data_time(t_data)
        return delay

    def data_time(self, t: float) -> None:
        """The data's own time of the newest message (header stamp, or corrected reception stamp), s."""
        if self._last_t is not None and t > self._last_t:
            step = t - self._last_t
            if step > self.max_gap:
                self.gaps += 1
            elif step > 1.5 * self.period:
                self.missing_in_data += int(round(step / self.period)) - 1
        self._last_t = t if self._last_t is None else max(self._last_t, t)

    @property
    def n_lost(self) -> int:
        return int(sum(self.lost.values()))

    def key_values(self) -> dict[str, str | int]:
        """Flat diagnostics entries, prefixed with the stream name."""
        d = np.asarray(self.delays) if self.delays else np.zeros(1)
        p = f"in_{self.name}_"
        out = {
            p + "received": self.received,
            p + "lost": self.n_lost,
            p + "before_match": self.before_match,
            p + "missing_in_data": self.missing_in_data,
            p + "gaps": self.gaps,
            p + "queue_delay_p50_ms": f"{1e3 * np.percentile(d, 50):.1f}",
            p + "queue_delay_p99_ms": f"{1e3 * np.percentile(d, 99):.1f}",
        }
        for cause, n in sorted(self.lost.items()):
            out[p + "lost_" + cause] = n
        return out


@dataclass
class _Snapshot:
    t: float
    rejected: Counter
    lost: int
    held: int


class HealthMonitor:
    """Present-tense level and message of the node (see module docstring). Wall-clock times in s."""

    def __init__(self, stale_timeout: float = 5.0, recent: float = 10.0):
        self.stale_timeout = float(stale_timeout)
        self.recent = float(recent)
        self.started: float | None = None
        self.last_input: float | None = None
        self.last_output: float | None = None
        self._history: deque[_Snapshot] = deque()

    def input(self, now: float) -> None:
        self.last_input = now

    def output(self, now: float) -> None:
        self.last_output = now

    def assess(self, now: float, diag: Diagnostics, streams: list[StreamIntake]) -> tuple[int, str, dict]:
        """(level, message, recent counts by reason) from the state now and over the last ``recent`` s."""
        if self.started is None:
            self.started = now
        snap = _Snapshot(now, Counter(diag.samples.rejected), sum(s.n_lost for s in streams), diag.held_ticks)
        self._history.append(snap)
        while len(self._history) > 1 and self._history[1].t <= now - self.recent:
            self._history.popleft()
        old = self._history[0]
        rejected = snap.rejected - old.rejected
        lost = snap.lost - old.lost
        held = snap.held - old.held
        errors, warnings = [], []
        if self.last_input is None:
            if now - self.started > self.stale_timeout:
                warnings.append("no input received yet")
        elif now - self.last_input > self.stale_timeout:
            errors.append(f"no input for {now - self.last_input:.0f} s")
        since_output = now - (self.last_output if self.last_output is not None else self.started)
        if self.last_input is not None and now - self.last_input <= self.stale_timeout:
            if since_output > self.stale_timeout and diag.window_fill[0] >= diag.window_fill[1]:
                errors.append(f"no estimate published for {since_output:.0f} s")
        if diag.message not in ("ok", "waiting for data"):
            warnings.append(diag.message)
        elif held:
            warnings.append(f"{held} solves held in the last {self.recent:.0f} s")
        if rejected:
            top = ", ".join(f"{k}={v}" for k, v in rejected.most_common(3))
            warnings.append(f"{sum(rejected.values())} samples rejected in the last {self.recent:.0f} s ({top})")
        if lost:
            warnings.append(f"{lost} input messages lost in the last {self.recent:.0f} s")
        recent = {"recent_rejected": int(sum(rejected.values())), "recent_lost": int(lost), "recent_held": int(held)}
        if errors:
            return ERROR, "; ".join(errors + warnings), recent
        if warnings:
            return WARN, "; ".join(warnings), recent
        return OK, "ok", recent
