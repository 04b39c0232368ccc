"""What a sample sink's appends cost their writer: waits for room, games sent twice,
games sent to another shard, counted per writing thread.

One sink object is shared by all the worker threads of a host (a thread host's transport,
or a process host's, serving each hosted worker's pipe in a thread of its own), so a
sink-wide total cannot say which worker waited. Each sink keeps a ``ThreadTallies``
instead: what the appends made by the calling thread cost, which that thread's worker
reports as its own metrics (``selfplay_backpressure_seconds_total``...). Summed over the
workers, the tallies are the sink's totals.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class WriterCounts:
    """Running totals of one writer thread's appends to one sink (never decrease)."""

    backpressure_wait_s: float = 0.0
    """Seconds its appends and waits for room waited because the stream (a shard) held
    ``max_backlog`` entries: the learner behind."""
    resent: int = 0
    """Games it appended again because a restarted Redis had lost them (the last
    ``resend_window_s`` of its appends, checked against the new server)."""
    rerouted: int = 0
    """Games it appended to another stream shard than their own, theirs refusing them
    (down, or full past the wait)."""

    def __add__(self, other: WriterCounts) -> WriterCounts:
        return WriterCounts(*(a + b for a, b in zip(dataclasses.astuple(self),
                                                   dataclasses.astuple(other), strict=True)))

    def to_wire(self) -> list[float]:
        """The fields in order, for a msgpack reply (``actors.worker_relay``)."""
        return list(dataclasses.astuple(self))

    @classmethod
    def from_wire(cls, values: list) -> WriterCounts:
        """Inverse of ``to_wire``; ValueError for a list of another length."""
        fields = dataclasses.fields(cls)
        if not isinstance(values, list | tuple) or len(values) != len(fields):
            raise ValueError(f"writer counts: expected {len(fields)} numbers, got {values!r}")
        return cls(float(values[0]), int(values[1]), int(values[2]))


class ThreadTallies:
    """A ``WriterCounts`` per thread of one sink: ``add`` counts for the calling thread,
    ``mine`` reads the calling thread's totals. (A thread only ever touches its own
    slot, so no lock is needed.)"""

    def __init__(self) -> None:
        self._local = threading.local()

    def mine(self) -> WriterCounts:
        """The calling thread's totals (zeros before its first append)."""
        counts: WriterCounts = getattr(self._local, "counts", WriterCounts())
        return counts

    def add(self, *, backpressure_wait_s: float = 0.0, resent: int = 0,
            rerouted: int = 0) -> None:
        """Count what an append of the calling thread cost."""
        self._local.counts = self.mine() + WriterCounts(backpressure_wait_s, resent, rerouted)
