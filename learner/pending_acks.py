"""The learner's unacknowledged stream entries, and how they are acked.

An entry is acked only once the checkpoint that holds it is on disk (``LearnerService``).
What an ack cannot reach stays here for the next checkpoint: the whole rest of the list when
the stream's Redis is down, only the failed shard's ids when one stream shard of several is
(``PartialAckError``), so a shard that stays down for minutes neither keeps the other
shards' entries pending (their backlog would fill and block every worker) nor makes every
turn checkpoint early (``due_early`` counts only entries taken since the last ack).
"""

from __future__ import annotations

import logging

from zeroforge.shared.transport import PartialAckError, SampleSource, TransportError

log = logging.getLogger(__name__)

ACK_CHUNK = 1000
"""Ids per XACK: one huge command would stall Redis for everyone else."""


class PendingAcks:
    """Entry ids taken into the replay window and not yet acknowledged."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.carried = 0
        """Of ``ids``, those the last ``ack_all`` could not ack (kept for the next)."""

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, entry_id: str) -> None:
        self.ids.append(entry_id)

    def due_early(self, limit: int) -> bool:
        """At least ``limit`` entries taken since the last ack: checkpoint (and ack) before
        the workers' backlog bound blocks them."""
        return len(self.ids) - self.carried >= limit

    def ack_all(self, stream: SampleSource) -> int:
        """Ack every held id; what fails is kept for the next call. Returns how many were
        kept (0: every ack went through)."""
        self.ids = ack(stream, self.ids)
        self.carried = len(self.ids)
        return self.carried


def ack(stream: SampleSource, ids: list[str]) -> list[str]:
    """Ack ``ids`` in chunks; returns those not acked, none unless an ack failed (one log
    line for them). A partial failure (one shard of several) keeps only that shard's ids
    and goes on; a failed Redis keeps the rest of the list (the next chunk would fail the
    same way)."""
    kept: list[str] = []
    failure: TransportError | None = None
    for start in range(0, len(ids), ACK_CHUNK):
        try:
            stream.ack(ids[start:start + ACK_CHUNK])
        except PartialAckError as err:
            kept += err.failed
            failure = err
        except TransportError as err:
            kept += ids[start:]
            failure = err
            break
    if failure is not None:
        log.warning("ack of %d sample entries failed, retrying later: %s", len(kept), failure)
    return kept
