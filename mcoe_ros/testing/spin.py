"""An rclpy executor spun in a background thread that stops cleanly (tests and benchmarks)."""

from __future__ import annotations

import threading


class SpinThread:
    """Spins ``executor`` (an rclpy executor) with ``spin_once(period)`` in a daemon thread until :meth:`stop`, which
    joins the thread and then shuts the executor down: shutting an executor down under a running ``spin()`` races with
    its guard condition (rclpy's InvalidHandle raised in the spinning thread)."""

    def __init__(self, executor, period: float = 0.05):
        self.executor, self.period = executor, period
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=self.period)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop spinning (waits up to ``timeout`` s for the thread), then shut the executor down."""
        self._stop.set()
        self.thread.join(timeout)
        self.executor.shutdown()
