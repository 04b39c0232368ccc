"""The learner's window of recently received game ids: how it drops a game's second copy.

Copies come from a worker resending a batch whose append failed part-way (or was retried
whole by the Redis client). The resend follows the failure within seconds, so the copy
lands at most ``max_backlog`` entries (plus one batch per worker, plus what the learner
reads during the retry delay) after the original; a window of at least twice
``max_backlog`` ids, checkpointed with the learner, covers that across restarts too.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Iterator


class GameIdWindow:
    """The last ``size`` received game ids, oldest first, each once, with an O(1) lookup
    (a deque and a set kept in step)."""

    def __init__(self, size: int) -> None:
        self._ids: collections.deque[str] = collections.deque(maxlen=size)
        self._members: set[str] = set()

    @property
    def maxlen(self) -> int:
        """How many ids the window holds at most."""
        return int(self._ids.maxlen or 0)

    @property
    def members(self) -> set[str]:
        """The ids as a set (for checks that deque and set agree)."""
        return self._members

    def __contains__(self, game_id: object) -> bool:
        return game_id in self._members

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def remember(self, game_id: str) -> None:
        """Add ``game_id`` as the newest (nothing if it is known), dropping the oldest when
        full."""
        if game_id in self._members:
            return
        if len(self._ids) == self._ids.maxlen:
            self._members.discard(self._ids[0])
        self._ids.append(game_id)
        self._members.add(game_id)

    def split(self, game_ids: Iterable[str]) -> tuple[list[int], list[int]]:
        """Positions in ``game_ids`` of the fresh games and of the copies: an id already in
        the window, or seen earlier in the same batch, is a copy; an empty id is fresh."""
        fresh: list[int] = []
        copies: list[int] = []
        batch: set[str] = set()
        for i, game_id in enumerate(game_ids):
            if game_id and (game_id in self._members or game_id in batch):
                copies.append(i)
                continue
            if game_id:
                batch.add(game_id)
            fresh.append(i)
        return fresh, copies
