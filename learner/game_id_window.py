"""The learner's window of recently received game ids, what ``LearnerService.game_ids``
reports (the ledgers of the chaos tests and the soak read it).

It used to be how the learner dropped a game's second copy; a copy that came more than a
window's worth of games late was trained twice. Duplicates are now caught by every id the
run received (``received_games.ReceivedGames``); the window is checkpointed still, and seeds
that record when a checkpoint written before it is restored.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator


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
