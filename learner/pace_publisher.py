"""How the learner tells self-play its pace without a Redis call per training step.

The learner offers its pace (``shared.pace.Pace``) often: after taking a turn's games in,
between training steps and at the turn's end. ``PacePublisher`` passes an offer on to the
run's ``PaceSignal`` only when the workers' pause decision changes, when ``PACE_PUBLISH_S``
has passed (the record expires unless renewed), or when forced; so workers resume as soon
as the ratio is back at the floor, and a busy learner costs Redis a few calls a second.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from zeroforge.shared.pace import PACE_PUBLISH_S, Pace, selfplay_should_pause
from zeroforge.shared.transport import PaceSignal, TransportError

log = logging.getLogger(__name__)


class PacePublisher:
    """Rate-limits a learner's pace publishes to one ``PaceSignal``. A Redis failure is
    logged in one line and handed to ``on_error`` (the service counts it), never raised:
    workers that cannot read a pace play on."""

    def __init__(self, signal: PaceSignal,
                 on_error: Callable[[TransportError], None] = lambda err: None) -> None:
        self.signal = signal
        self._on_error = on_error
        self._published_at: float | None = None
        self.pauses: bool | None = None
        """The pause decision of the last pace published (None: none yet)."""

    def offer(self, pace: Pace, force: bool = False) -> bool:
        """Publish ``pace`` if it changes the pause decision, ``PACE_PUBLISH_S`` passed
        since the last publish, or ``force``; returns whether it was published."""
        pauses = selfplay_should_pause(pace)
        now = time.monotonic()
        if (not force and pauses == self.pauses and self._published_at is not None
                and now - self._published_at < PACE_PUBLISH_S):
            return False
        try:
            self.signal.publish(pace)
        except TransportError as err:
            log.warning("learner: cannot publish its pace (workers play on unthrottled "
                        "once the last one expires): %s", err)
            self._on_error(err)
            return False
        self._published_at, self.pauses = now, pauses
        return True

    def clear(self) -> None:
        """Remove the pace (a stopping learner): workers still running play on at once
        rather than wait for the record to expire."""
        try:
            self.signal.clear()
        except TransportError as err:
            log.warning("learner: cannot clear its pace (it expires in %.0f s): %s",
                        self.signal.ttl_s, err)
            self._on_error(err)
