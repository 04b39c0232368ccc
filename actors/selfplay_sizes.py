"""Self-play on several board sizes at once (``selfplay.board_sizes``).

A batched search runs one board shape per evaluator call, so a worker keeps one
``SelfPlayWorker`` per size, each with its own ``games_in_parallel`` games, trees and
evaluation cache (in front of the one shared network), and deals its moves out among
them: each move goes to the size furthest below its share of the moves played so far
(``board_size_weights``; ties to the first listed). Every move of a size adds B positions
of that size, so the positions of each size follow the weights exactly, not just in
expectation, and so do the replay window's parts and the training batches (the learner
draws a batch's size in proportion to the positions held).

Why a deal of moves and not a size drawn per game: a game's size fixes its slot's
arrays (board, tree, history), and one evaluator call must be of one shape; drawing
per game would need a batch per size anyway, with the number of games of each size
varying from call to call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from zeroforge.actors.selfplay import SelfPlayStats, SelfPlayWorker
from zeroforge.actors.selfplay_groups import InFlightWorker
from zeroforge.shared.games import Game


class MixedSizeWorker:
    """Several ``SelfPlayWorker``s, one per board size, played in their shares; what
    ``SelfPlayService`` asks of a worker (``play_moves``, ``stats``, ``run_id``,
    ``evaluator``), plus ``parts`` (size -> worker: their ``records`` and ``game``)."""

    def __init__(self, games: Sequence[Game], shares: Sequence[float],
                 make_worker: Callable[[Game, int], SelfPlayWorker | InFlightWorker]) -> None:
        """``make_worker(game, index)``: the worker of the ``index``-th size."""
        self.parts: dict[int, SelfPlayWorker | InFlightWorker] = {
            int(g.spec.board_shape[0]): make_worker(g, i) for i, g in enumerate(games)}
        """Board size -> its worker, in the order of ``board_sizes``."""
        self.shares = np.asarray(shares, np.float64)
        self.moves = np.zeros(len(self.parts), np.int64)
        """Moves played per size."""
        self.stats = SelfPlayStats()
        """Every size's counters summed (updated after each move)."""
        first = next(iter(self.parts.values()))
        self.run_id = first.run_id
        self.evaluator = first.evaluator

    def next_size(self) -> int:
        """Index of the size the next move goes to: the one furthest below its share."""
        return int(np.argmin(self.moves / self.shares))

    def play_moves(self, num_moves: int) -> list:
        """Play ``num_moves`` moves, each of one size's games; return the finished games
        (``GameSamples`` of their own board size)."""
        finished = []
        workers = list(self.parts.values())
        for _ in range(num_moves):
            k = self.next_size()
            worker = workers[k]
            finished.extend(worker.play_moves(1))
            self.moves[k] += 1
            self.stats.set_to_sum(w.stats for w in workers)
        return finished
