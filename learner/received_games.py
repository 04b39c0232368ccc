"""Every game the run's learner has received, for the whole run, in little memory.

A game's id is ``<producer>-<n>``: the producer is one incarnation of a self-play worker
(its worker id and a random prefix), ``n`` counts that producer's games from 0. Games reach
the learner nearly in order per producer, so the ids received are kept per producer as the
count ``n`` below which every game has come, plus the few above it that came early (a
stream shard's games rerouted while an earlier batch waits on a dead shard). A copy is
caught however late it comes (a shard that returns after an hour with the partial pipeline
it held), which a window of the last ids could not promise. Ids of another form are kept
whole.

Size: about a hundred bytes per producer that ever played plus one integer per game still
out of order; checkpointed with the learner (``to_state``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator


class ReceivedGames:
    """The set of received game ids, kept per producer as a count plus exceptions."""

    def __init__(self) -> None:
        self._complete: dict[str, int] = {}
        """Producer -> n: every game numbered below n was received."""
        self._ahead: dict[str, set[int]] = {}
        """Producer -> numbers received above its count (out of order)."""
        self._others: set[str] = set()
        """Ids not of the form ``<producer>-<n>``."""
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[str]:
        """Every id received, by producer (numbers in order), then the others."""
        for producer in sorted(self._complete.keys() | self._ahead.keys()):
            numbers = itertools.chain(range(self._complete.get(producer, 0)),
                                      sorted(self._ahead.get(producer, ())))
            yield from (f"{producer}-{n}" for n in numbers)
        yield from sorted(self._others)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReceivedGames) and self.to_state() == other.to_state()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __contains__(self, game_id: object) -> bool:
        if not isinstance(game_id, str):
            return False
        producer, n = _parse(game_id)
        if producer is None:
            return game_id in self._others
        return n < self._complete.get(producer, 0) or n in self._ahead.get(producer, ())

    def remember(self, game_id: str) -> None:
        """Add ``game_id`` (nothing if it is known; an empty id is never kept)."""
        if not game_id or game_id in self:
            return
        self._count += 1
        producer, n = _parse(game_id)
        if producer is None:
            self._others.add(game_id)
            return
        complete = self._complete.get(producer, 0)
        ahead = self._ahead.setdefault(producer, set())
        if n != complete:
            ahead.add(n)
            return
        complete += 1
        while complete in ahead:
            ahead.remove(complete)
            complete += 1
        self._complete[producer] = complete
        if not ahead:
            del self._ahead[producer]

    def split(self, game_ids: Iterable[str]) -> tuple[list[int], list[int]]:
        """Positions in ``game_ids`` of the fresh games and of the copies: an id already
        received, or seen earlier in the same batch, is a copy; an empty id is fresh."""
        fresh: list[int] = []
        copies: list[int] = []
        batch: set[str] = set()
        for i, game_id in enumerate(game_ids):
            if game_id and (game_id in self or game_id in batch):
                copies.append(i)
                continue
            if game_id:
                batch.add(game_id)
            fresh.append(i)
        return fresh, copies

    def to_state(self) -> dict[str, list]:
        """Plain data for a checkpoint: ``{producer: [count, [numbers ahead...]]}``, and the
        other ids under the key ``""`` (no producer is named so)."""
        state: dict[str, list] = {p: [n, sorted(self._ahead.get(p, ()))]
                                  for p, n in self._complete.items()}
        for p, ahead in self._ahead.items():
            state.setdefault(p, [0, sorted(ahead)])
        if self._others:
            state[""] = sorted(self._others)
        return state

    @classmethod
    def from_state(cls, state: dict[str, list]) -> ReceivedGames:
        """The set ``to_state`` wrote; ValueError if it is not of that form."""
        received = cls()
        for producer, value in state.items():
            if producer == "":
                received._others = {str(g) for g in value}
                received._count += len(received._others)
                continue
            try:
                count, ahead = int(value[0]), {int(n) for n in value[1]}
            except (TypeError, ValueError, IndexError) as err:
                raise ValueError(f"received games of {producer!r}: {value!r} is not "
                                 f"[count, [numbers]] ({err})") from None
            if count < 0 or any(n <= count for n in ahead):
                raise ValueError(f"received games of {producer!r}: {count} then {sorted(ahead)}")
            if count:
                received._complete[producer] = count
            if ahead:
                received._ahead[producer] = ahead
            received._count += count + len(ahead)
        return received


def _parse(game_id: str) -> tuple[str | None, int]:
    """``(producer, n)`` of ``<producer>-<n>``; ``(None, -1)`` for another form."""
    producer, _, number = game_id.rpartition("-")
    canonical = number.isascii() and number.isdigit() and (number == "0" or number[0] != "0")
    if not producer or not canonical:
        return None, -1
    return producer, int(number)
