"""Where a learner process sits in the run's replica group (``replica_group.py``).

Apart from the group itself so that what places learners (the Ray runtime's hosts, which
the controller imports) names a seat without importing torch: a controller process that
imported torch took seconds longer to start, and a successor controller is on the clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class GroupAddress:
    """Where rank 0 serves the group's store: what the other replicas connect to."""

    host: str
    port: int


@dataclass(frozen=True)
class GroupSeat:
    """Where one learner process sits in the run's group: its ``rank`` (0: the learner
    that reads the stream), the ``host`` other replicas reach it at (rank 0's matters) and,
    for ranks 1.., how to learn rank 0's ``GroupAddress`` (it exists once rank 0 does)."""

    rank: int = 0
    host: str = "127.0.0.1"
    address: Callable[[], GroupAddress] | None = None
