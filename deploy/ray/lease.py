"""Leases: a run's actor ends itself when no controller has called it for a while.

A run's actors are detached, so that they outlive a controller killed with kill -9 and
its successor adopts them. Without a lease, a driver killed on a cluster it joined (its
controller dies with it) would leave them running for ever. Every call a controller makes
(the monitor asks each actor for its metrics every ``distributed.monitor_interval_s``)
renews the actor's lease; after ``distributed.lease_s`` without one, the actor stops its
service cleanly (a worker's last appends, the learner's checkpoint) and exits. A new
driver that re-attaches within the lease finds the run as it was.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Lease:
    """Calls ``on_expiry(idle_s)`` once, from its own thread, when ``renew`` was not called
    for ``lease_s`` seconds (``lease_s`` = 0: never). ``clock`` is monotonic seconds."""

    def __init__(self, lease_s: float, on_expiry: Callable[[float], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.lease_s = lease_s
        self._on_expiry = on_expiry
        self._clock = clock
        self._renewed = clock()
        self.expired = False
        """``on_expiry`` has been called."""
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def renew(self) -> None:
        """A controller called: the lease runs ``lease_s`` from now."""
        self._renewed = self._clock()

    def idle_s(self) -> float:
        """Seconds since the last renewal."""
        return self._clock() - self._renewed

    def start(self) -> Lease:
        """Watch the lease from a daemon thread (checks ten times a lease, at most once a
        second); without a lease (``lease_s`` = 0) nothing is started."""
        if self.lease_s > 0:
            self._thread = threading.Thread(target=self._watch, name="lease", daemon=True)
            self._thread.start()
        return self

    def check(self) -> bool:
        """Expire the lease if it is due (``on_expiry`` once); True once it has expired."""
        if not self.expired and self.lease_s > 0 and self.idle_s() >= self.lease_s:
            self.expired = True
            self._on_expiry(self.idle_s())
        return self.expired

    def _watch(self) -> None:
        tick = min(1.0, self.lease_s / 10)
        while not self._closed.wait(tick):
            try:
                if self.check():
                    return
            except Exception:  # the actor must not keep running because its exit failed
                log.exception("lease expiry failed")
                return

    def close(self) -> None:
        """Stop watching (the actor is ending anyway)."""
        self._closed.set()
