"""The learner's final drain (``LearnerService.drain``): every game already in the stream
read into the replay window before the final checkpoint, riding out a Redis that restarts
meanwhile, and never taking an empty read while a stream shard is unreadable for the end
of the stream."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from zeroforge.shared.samples import GameSamples
from zeroforge.shared.transport import SampleSource, TransportError

log = logging.getLogger(__name__)


def drain_stream(stream: SampleSource, take: Callable[[list[tuple[str, GameSamples]]], int],
                 grace_s: float, max_read: int, failed: Callable[[], None]) -> tuple[int, bool]:
    """Read ``stream`` to its end, handing each batch to ``take`` (returns the games it
    added); ``failed`` is called at each failed read. Returns the games taken and whether
    the end was reached (False: reads still failed after ``grace_s``)."""
    taken = 0
    deadline = time.monotonic() + grace_s
    delay = 0.1
    # Deliveries whose reply a dropped connection lost sit in our pending list: look.
    stream.recover_pending()
    while True:
        try:
            entries = stream.read(max_read, 0)
            unread = getattr(stream, "unread_shards", ())
            if not entries and unread:
                # empty, but a shard could not be read: not the end of the stream
                raise TransportError(f"stream shard(s) {', '.join(unread)} unreadable")
        except TransportError as err:
            # Redis restarting (the supervisor brings it back in a second or so): wait
            # for it rather than stop with games left unread in the stream.
            failed()
            if time.monotonic() >= deadline:
                log.warning("learner: could not drain the stream within %.0f s before "
                            "stopping (%s); games left in it wait for a --resume",
                            grace_s, err)
                return taken, False
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
            continue
        if not entries:
            return taken, True
        taken += take(entries)
