"""The players zeroforge has built in: ``RandomPlayer``, ``MinimaxPlayer`` (perfect
tic-tac-toe), ``UCTPlayer`` (pure MCTS with random rollouts, the yardstick), ``MCTSPlayer``
(the trained agent: PUCT with its network) and ``HumanPlayer`` (a person at the terminal).

Search modules are imported only by the players that need them, so a random or human
player costs no search.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

import numpy as np

from zeroforge.shared.games import Game, IllegalMoveError, State, sample_legal
from zeroforge.shared.players.player import SearchAnalysis

if TYPE_CHECKING:
    from zeroforge.shared.search import Evaluator, SearchConfig, UCTConfig

__all__ = ["RandomPlayer", "MinimaxPlayer", "UCTPlayer", "MCTSPlayer", "HumanPlayer"]


class RandomPlayer:
    """Uniformly random legal moves."""

    name = "random"

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        return sample_legal(game.legal_mask(states), rng)


class UCTPlayer:
    """The pure-MCTS baseline (``shared.search.uct``): ``select`` searches all running
    games at once."""

    def __init__(self, config: UCTConfig | None = None, name: str | None = None) -> None:
        from zeroforge.shared.search import UCTConfig

        self.config = config or UCTConfig()
        self.name = name or f"uct{self.config.playouts}"

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        """[B] int32 actions for ``states`` [B]; -1 for games that are already over."""
        from zeroforge.shared.search import uct_search

        actions = np.full(states.batch_size, -1, np.int32)
        running = np.flatnonzero(~states.terminal)
        if running.size:
            roots = states if running.size == states.batch_size else states.take(running)
            actions[running] = uct_search(game, roots, self.config, rng).action
        return actions

    def analyse(self, game: Game, states: State, rng: np.random.Generator
                ) -> SearchAnalysis:
        """The search's view of the running games ``states`` [B] (no prior: no net)."""
        from zeroforge.shared.search import uct_search

        result = uct_search(game, states, self.config, rng)
        visits = result.visits.astype(np.int64)
        return SearchAnalysis(action=result.action.astype(np.int64), visits=visits,
                              policy=visits / np.maximum(visits.sum(1, keepdims=True), 1),
                              value=result.value.astype(np.float64))


class MCTSPlayer:
    """The trained agent: PUCT search with its network, no noise, most-visited move.

    With ``opening_moves`` > 0 the first that many plies of a game are sampled in
    proportion to visit counts (temperature 1) instead: two deterministic searchers would
    otherwise play the same two games over and over."""

    def __init__(self, game: Game, evaluator: Evaluator, search: SearchConfig,
                 name: str = "agent", opening_moves: int = 0) -> None:
        from zeroforge.shared.search import MCTS

        self.name = name
        self.search_config = dataclasses.replace(
            search, add_noise=False, reuse_tree=False, temperature_moves=opening_moves,
            temperature=1.0 if opening_moves else search.temperature)
        self._mcts = MCTS(game, evaluator, self.search_config)

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        """[B] actions for ``states`` [B]."""
        return self._mcts.search(states, rng).action

    def analyse(self, game: Game, states: State, rng: np.random.Generator
                ) -> SearchAnalysis:
        """One search of the running games ``states`` [B], as ``select`` does it, with
        the root visits, visit shares, the net's prior and the root value."""
        from zeroforge.shared.search import ILLEGAL

        result = self._mcts.search(states, rng)
        tree = self._mcts.tree
        prior = None
        if tree is not None:  # the search leaves its trees: the root's prior is row 0
            prior = np.where(tree.children[:, 0, :] != ILLEGAL, tree.prior[:, 0, :], 0.0)
            prior = prior.astype(np.float64)
        visits = np.asarray(result.visit_counts, np.int64)
        # visit shares, not result.visit_policy: with Gumbel search that is the improved
        # policy, and a person reading "share" expects the fraction of the search
        return SearchAnalysis(action=np.asarray(result.action, np.int64), visits=visits,
                              policy=visits / np.maximum(visits.sum(1, keepdims=True), 1),
                              value=np.asarray(result.root_value, np.float64), prior=prior)


class HumanPlayer:
    """Reads moves in the game's notation from a text stream, re-asking after a bad one."""

    name = "human"

    def __init__(self, read: Callable[[], str] | None = None, out: TextIO | None = None) -> None:
        self._read = read or input
        self._out = out

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        """[B] actions for ``states`` [B], one question per game."""
        return np.array([self._ask(game, states, i) for i in range(states.batch_size)])

    def _ask(self, game: Game, states: State, index: int) -> int:
        while True:
            try:
                text = self._read()
            except EOFError:
                raise IllegalMoveError("input ended before the game did") from None
            try:
                action = game.parse_action(text)
                reason = game.illegal_reason(states, index, action)
                if reason is None:
                    return action
                print(f"illegal move {text.strip()}: {reason}", file=self._out)
            except IllegalMoveError as err:
                print(err, file=self._out)


class MinimaxPlayer:
    """A perfect player for tic-tac-toe (any m,n,k gomoku of at most 12 points).

    Exhaustive negamax over the whole game tree, memoised on (board, player to move). It
    prefers faster wins and slower losses, and picks uniformly among equally good moves
    (``randomize=True``) so that matches against it are not one game repeated.
    """

    MAX_POINTS = 12  # 3^12 positions at most: the memo stays small and the solve fast

    def __init__(self, randomize: bool = True, name: str = "minimax") -> None:
        self.randomize = randomize
        self.name = name
        self._memo: dict[tuple[bytes, int], int] = {}
        self._shape: tuple[int, int, int] | None = None
        self._lines: list[list[tuple[int, ...]]] = []

    def _setup(self, game: Game) -> None:
        width, height, k = (getattr(game, attr, None) for attr in ("width", "height", "k"))
        if width is None or height is None or k is None or getattr(game, "exact", False):
            raise ValueError(f"MinimaxPlayer plays free-style m,n,k games, not {game!r}")
        if width * height > self.MAX_POINTS:
            raise ValueError(f"MinimaxPlayer: {width}x{height} has more than "
                             f"{self.MAX_POINTS} points")
        if self._shape != (height, width, k):
            self._shape = (height, width, k)
            self._memo.clear()
            self._lines = _lines_through(height, width, k)

    def values(self, game: Game, board: np.ndarray, to_play: int) -> np.ndarray:
        """[A] int: exact value of every action on ``board`` [A] of ``game`` for ``to_play``.

        A win in ``m`` more moves of the mover is worth ``points + 1 - m`` > 0, a loss the
        negative of that, a draw 0; an occupied point a very low number.
        """
        self._setup(game)
        cells = bytearray(board.astype(np.int8).tobytes())
        color = to_play + 1
        out = np.full(len(cells), -10**6, np.int64)
        for a in range(len(cells)):
            if cells[a] == 0:
                out[a] = self._move_value(cells, a, color)
        return out

    def _move_value(self, cells: bytearray, a: int, color: int) -> int:
        """Value for ``color`` of playing ``a`` (memo lookups on the position after it)."""
        cells[a] = color
        empties = cells.count(0)
        if self._wins(cells, a, color):
            value = empties + 1
        elif empties == 0:
            value = 0
        else:
            value = -self._negamax(cells, 3 - color)
        cells[a] = 0
        return value

    def _negamax(self, cells: bytearray, color: int) -> int:
        key = (bytes(cells), color)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        best = -(10**6)
        for a in range(len(cells)):
            if cells[a] == 0:
                best = max(best, self._move_value(cells, a, color))
        self._memo[key] = best
        return best

    def _wins(self, cells: bytearray, a: int, color: int) -> bool:
        return any(all(cells[p] == color for p in line) for line in self._lines[a])

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        board = getattr(states, "board", None)
        if board is None:
            raise ValueError(f"MinimaxPlayer needs a board in the state of {game!r}")
        actions = np.full(states.batch_size, -1, np.int32)
        for i in np.flatnonzero(~states.terminal):
            v = self.values(game, board[i], int(states.to_play[i]))
            best = np.flatnonzero(v == v.max())
            actions[i] = rng.choice(best) if self.randomize else best[0]
        return actions


def _lines_through(height: int, width: int, k: int) -> list[list[tuple[int, ...]]]:
    """For each point, the k-long lines (as point tuples) that contain it."""
    lines = []
    for r in range(height):
        for c in range(width):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                end_r, end_c = r + dr * (k - 1), c + dc * (k - 1)
                if 0 <= end_r < height and 0 <= end_c < width:
                    lines.append(tuple((r + dr * i) * width + c + dc * i for i in range(k)))
    through: list[list[tuple[int, ...]]] = [[] for _ in range(height * width)]
    for line in lines:
        for p in line:
            through[p].append(line)
    return through
