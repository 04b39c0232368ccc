"""The distributed driver's copy of its run: the controller's status and merged metrics
snapshot, fetched about once a second on a thread, so that the run server answers at
once (from the copy) and keeps answering while the controller is slow, restarting or
gone (the last copy, its age in ``stale_s``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from zeroforge.deploy.runtime.status import RunStatus


class RunMirror:
    """``handle()`` gives the run's current ``RunHandle`` (a callable, so that a driver
    that replaces its handle after a controller restart is followed)."""

    def __init__(self, handle: Callable[[], Any], first: RunStatus,
                 every_s: float = 1.0) -> None:
        self._handle = handle
        self._status = first
        self._merged: dict | None = None
        self._at = time.monotonic()
        self.every_s = every_s
        self.errors = 0
        """Fetches that failed (the controller busy, restarting or gone)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="run-mirror", daemon=True)

    def start(self) -> RunMirror:
        self.refresh()
        self._thread.start()
        return self

    def refresh(self) -> None:
        try:
            status, merged = self._handle().status_and_metrics()
        except Exception:  # keep the last copy; the driver's own loop reports failures
            self.errors += 1
            return
        self._status, self._merged, self._at = status, merged, time.monotonic()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.refresh()

    @property
    def stale_s(self) -> float:
        """Seconds since the last successful fetch."""
        return time.monotonic() - self._at

    def status(self) -> RunStatus:
        return self._status

    def set_status(self, status: RunStatus) -> None:
        """The driver's own newest status (e.g. the final one ``stop`` returned)."""
        self._status, self._at = status, time.monotonic()

    def merged(self) -> dict | None:
        return self._merged

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
