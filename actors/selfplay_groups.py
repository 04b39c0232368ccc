"""Leaf batches in flight: one worker's games searched in groups, a request out for one
group while another searches (``selfplay.batches_in_flight``).

A worker behind inference servers sends one leaf batch per simulation round and, with one
group, waits for the round trip (the Ray call, the server's queue and network) doing
nothing: on a GPU node about half of each worker's core idled (docs/benchmarks.md, "The
GPU path end to end"). Split into G groups of B/G games, each with its own trees, searched
in a thread of its own, the worker has a group's request in flight while another group
descends its trees: the remote call releases the GIL while it waits, so the search of one
group fills the other's wait. The worker's rate becomes the slower of its search's own
rate and the servers', not their sum.

Why threads over a search rewritten as a coroutine that yields its leaf batches: the
search, its leaf-batch (virtual loss) rounds and the evaluator seam stay the synchronous
code the rest of the project uses and tests, and the overlap needs only that the wait
release the GIL, which a Ray ``get`` does. Only the Python between two kernel calls is
serialised, which is the worker's one core anyway.

Every group plays its slots' games exactly as the one-group worker would: the noise and
move choices come from a generator per game slot (``SelfPlayWorker``), and the playout
cap's draws are the same sequence in every group, so with a deterministic evaluator the
games and their results do not depend on G (tests/unit/test_selfplay_groups.py). The
groups meet at the end of every ``play_moves`` call: the service's loop between moves
(pace, appends, weights) sees one worker.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from zeroforge.actors.selfplay import GameIds, SelfPlayStats, SelfPlayWorker
from zeroforge.shared.samples import GameSamples

__all__ = ["InFlightWorker", "group_slots"]


def group_slots(games: int, groups: int) -> list[range]:
    """The slots ``0 .. games - 1`` in ``groups`` consecutive ranges, sizes differing by at
    most one (the larger first)."""
    if not 1 <= groups <= games:
        raise ValueError(f"batches_in_flight must be between 1 and games_in_parallel "
                         f"({games}), got {groups}")
    size, extra = divmod(games, groups)
    bounds, start = [], 0
    for g in range(groups):
        end = start + size + (1 if g < extra else 0)
        bounds.append(range(start, end))
        start = end
    return bounds


class InFlightWorker:
    """A worker's ``games_in_parallel`` slots in ``groups`` ``SelfPlayWorker``s, each
    played in its own thread; what ``SelfPlayService`` asks of a worker (``play_moves``,
    ``stats``, ``records``, ``game``, ``run_id``, ``evaluator``)."""

    def __init__(self, games: int, groups: int,
                 make_group: Callable[[range, GameIds], SelfPlayWorker]) -> None:
        """``make_group(slots, game_ids)``: the worker of one group's slots, taking its
        game ids from the shared ``game_ids``."""
        ids = GameIds()
        self.groups = [make_group(slots, ids) for slots in group_slots(games, groups)]
        first = self.groups[0]
        self.game = first.game
        self.run_id = first.run_id
        self.evaluator = first.evaluator
        self.stats = SelfPlayStats()
        """Every group's counters summed (updated after each ``play_moves``)."""
        self._threads = ThreadPoolExecutor(len(self.groups), thread_name_prefix="selfplay-group")
        self._held: list[GameSamples] = []
        """Games finished in a call that raised (another group failed): returned by the
        next call, never dropped."""

    @property
    def records(self) -> list[tuple[str, list[int]]]:
        """The groups' sampled game records (see ``SelfPlayWorker.records``)."""
        return [r for g in self.groups for r in g.records]

    @records.setter
    def records(self, value: list[tuple[str, list[int]]]) -> None:
        # The service takes the records and sets an empty list: clear every group's.
        if value:
            raise ValueError("InFlightWorker.records can only be cleared")
        for g in self.groups:
            g.records = []

    def play_moves(self, num_moves: int) -> list[GameSamples]:
        """Advance every group ``num_moves`` moves, concurrently; return the finished games.
        A group's error is raised once every group has stopped (its finished games are
        kept for the next call)."""
        futures = [self._threads.submit(g.play_moves, num_moves) for g in self.groups]
        error: BaseException | None = None
        for future in futures:
            try:
                self._held.extend(future.result())
            except BaseException as err:  # noqa: BLE001 - raised below, after the others
                error = error or err
        self.stats.set_to_sum(g.stats for g in self.groups)
        if error is not None:
            raise error
        finished, self._held = self._held, []
        return finished
