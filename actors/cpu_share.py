"""Holding a self-play worker to a share of one core (``selfplay.cpu_share``).

Ray reserves a worker's ``distributed.worker_cpus`` in its books only: a worker given 0.25
of a CPU still searches flat out on a whole core. A worker with a share sleeps between
moves for as long as keeps its own CPU time at or below ``share x`` the wall time, measured
over windows of ``WINDOW_S`` (a pause for the learner's pace does not bank credit for a
burst afterwards beyond one window).

The worker's CPU is its thread's (``time.thread_time``): hosted workers are threads of one
process, and each keeps to its own share. A worker's network runs in its thread (torch at
one thread a worker process); an inference server's time is the server's.
"""

from __future__ import annotations

import threading
import time

WINDOW_S = 5.0
"""Seconds of wall time over which the share is kept (then the count starts again)."""


class CpuShare:
    """``hold()`` after each piece of work: sleeps as long as needed to keep the calling
    thread's CPU time within ``share`` of the wall time since the window began."""

    def __init__(self, share: float) -> None:
        if not 0.0 < share <= 1.0:
            raise ValueError(f"a CPU share must be in (0, 1], got {share}")
        self.share = share
        self._restart()

    def _restart(self) -> None:
        self._cpu0 = time.thread_time()
        self._wall0 = time.monotonic()

    def hold(self, stop: threading.Event) -> float:
        """Sleep (woken early by ``stop``) until this thread is back within its share;
        returns the seconds slept."""
        cpu = time.thread_time() - self._cpu0
        wall = time.monotonic() - self._wall0
        due = cpu / self.share - wall
        slept = 0.0
        if due > 0:
            began = time.monotonic()
            stop.wait(due)
            slept = time.monotonic() - began
        if wall + slept >= WINDOW_S:
            self._restart()
        return slept
