"""The controller's state in the run's store (``shared.transport.control_state``): saved by
the controller every ``SAVE_EVERY_S``, loaded by a new driver that re-attaches to a run
whose driver died (``deploy/ray/handle.py``, ``start_run``)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from zeroforge.shared.run_context import RunContext
from zeroforge.shared.transport import (
    FencedError,
    SavedControlState,
    TransportError,
    open_transport,
)

log = logging.getLogger(__name__)

SAVE_EVERY_S = 2.0
"""Seconds between the controller's saves: what a re-attaching driver's controller may
miss of its predecessor's last changes (counter floors catch up with the actors' next
reports)."""


class StateSaver:
    """The controller's side: ``tick`` saves the state at most every ``every_s``; a store
    that cannot be reached is said once per outage (the run goes on without saves). The
    saver claims the store before its first save, so a newer controller's claim fences it
    off: it then says so once and saves nothing more (``fenced_by``)."""

    def __init__(self, ctx: RunContext, every_s: float = SAVE_EVERY_S) -> None:
        self.ctx = ctx
        self.every_s = every_s
        self.saves = 0
        self.failures = 0
        self._store: Any = None
        self._last = float("-inf")
        self._failing = False
        self._claimed = False
        self.fenced_by: int | None = None
        """A newer controller's epoch once this one's writes were refused."""

    def _open(self) -> Any:
        if self._store is None:
            self._transport = open_transport(self.ctx.transport, self.ctx.run_id,
                                             role="controller",
                                             auth_dir=self.ctx.redis_auth_dir or None)
            self._store = self._transport.control_state()
        if not self._claimed:
            self._store.claim()
            self._claimed = True
        return self._store

    def tick(self, state: Callable[[], dict]) -> None:
        """Save ``state()`` if ``every_s`` has passed since the last save."""
        now = time.monotonic()
        if now - self._last < self.every_s or self.fenced_by is not None:
            return
        self._last = now
        try:
            self._open().save(state())
        except FencedError as err:
            self.fenced_by = err.newer
            log.error("controller state: %s; this controller saves nothing more", err)
            return
        except TransportError as err:
            self.failures += 1
            if not self._failing:
                log.warning("controller state not saved (%s); a driver that re-attaches "
                            "meanwhile adopts the actors from an older state", err)
            self._failing = True
            return
        self.saves += 1
        self._failing = False

    def clear(self) -> None:
        """The run ended: nothing to re-attach to (a fenced-off saver leaves the newer
        controller's state alone)."""
        with contextlib.suppress(Exception):
            if self.fenced_by is None:
                self._open().clear()
        with contextlib.suppress(Exception):
            if self._store is not None:
                self._transport.close()


def load_saved_state(ctx: RunContext) -> SavedControlState | None:
    """The state the run's last controller saved, or None (never saved, cleared, not
    readable: the caller adopts the live actors without it)."""
    transport = open_transport(ctx.transport, ctx.run_id, role="controller",
                               auth_dir=ctx.redis_auth_dir or None)
    try:
        return transport.control_state().load()
    finally:
        transport.close()
