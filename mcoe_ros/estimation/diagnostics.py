"""The estimator's health as data (no strings formatted in the core): what /diagnostics and summaries report."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mcoe_ros.estimation.samples import SampleStats

OK, WARN, ERROR, STALE = 0, 1, 2, 3  #: diagnostic_msgs/DiagnosticStatus levels


@dataclass
class Diagnostics:
    """Snapshot of the estimator's state (times in seconds, masses in kg)."""

    level: int  #: OK / WARN / ERROR
    message: str
    ticks: int
    held_ticks: int
    solve_times: np.ndarray  #: recent solve wall times, s
    iterations_last: int
    cost_last: float | None
    window_fill: tuple[int, int]  #: (knots in the window, knots of a full window)
    samples: SampleStats
    window_restarts: int
    rls_mass: float | None
    contact_phase: tuple[bool, ...]
    extra: dict = field(default_factory=dict)  #: adapter-specific values appended by I/O layers

    def key_values(self) -> dict[str, str | int | float]:
        """Flat key/value pairs for a diagnostic_msgs/DiagnosticStatus (stable keys and formats)."""
        times = self.solve_times if self.solve_times.size else np.zeros(1)
        values = {
            "ticks": self.ticks,
            "held_ticks": self.held_ticks,
            "solve_time_p50_ms": f"{1e3 * np.percentile(times, 50):.2f}",
            "solve_time_p99_ms": f"{1e3 * np.percentile(times, 99):.2f}",
            "iterations_last": self.iterations_last,
            "cost_last": f"{self.cost_last:.6g}" if self.cost_last is not None else "n/a",
            "window_fill": f"{self.window_fill[0]}/{self.window_fill[1]}",
            "samples_accepted": int(sum(self.samples.accepted.values())),
            "samples_rejected": self.samples.n_rejected,
            "samples_repaired": self.samples.n_repaired,
            "window_restarts": self.window_restarts,
            "rls_mass_kg": f"{self.rls_mass:.3f}" if self.rls_mass is not None else "n/a",
            "contact_phase": "".join("1" if c else "0" for c in self.contact_phase),
            "last_error": self.samples.last_error,
        }
        for reason, count in sorted(self.samples.rejected.items()):
            values[f"rejected_{reason}"] = count
            if reason in self.samples.details:
                values[f"last_{reason}"] = self.samples.details[reason][1]
        values.update(self.extra)
        return values
