"""Batched matches between two players, Elo from a score, and reference players.

``play_match`` plays G games of one game at once: each ply it calls each player once with
the sub-batch of running games where that player is to move, then steps all games
together. Player A moves first in the even-numbered games and second in the odd ones, so
both players get both colours equally often (A gets the extra game when G is odd).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Protocol

import numpy as np

from shared.games.base import Game, State
from shared.games.sampling import sample_legal


class Player(Protocol):
    """Anything that picks moves for a batch of games."""

    name: str

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        """[B] actions for ``states`` [B]: a legal action for every running game."""
        ...


class RandomPlayer:
    """Uniformly random legal moves."""

    name = "random"

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        return sample_legal(game.legal_mask(states), rng)


@dataclass(frozen=True)
class MatchResult:
    """A finished match, counted from player A's side."""

    player_a: str
    """Name of player A."""
    player_b: str
    """Name of player B."""
    wins: int
    """Games A won."""
    losses: int
    """Games A lost."""
    draws: int
    """Drawn games."""
    a_first: np.ndarray
    """[G] bool: A moved first in that game."""
    outcomes: np.ndarray
    """[G] int8: +1 A won, -1 A lost, 0 draw."""
    moves: list[list[int]]
    """Actions of each game in the order played."""

    @property
    def num_games(self) -> int:
        return int(self.outcomes.shape[0])

    @property
    def score(self) -> float:
        """A's mean score: win 1, draw 1/2, loss 0."""
        return (self.wins + 0.5 * self.draws) / max(self.num_games, 1)

    def elo(self, confidence: float = 0.95) -> EloEstimate:
        """A's Elo advantage over B from this match, with a confidence interval."""
        return elo_difference(self.score, self.num_games, self.draws / max(self.num_games, 1),
                              confidence)

    def summary(self) -> str:
        e = self.elo()
        return (f"{self.player_a} vs {self.player_b}: +{self.wins} ={self.draws} "
                f"-{self.losses} of {self.num_games}, score {self.score:.3f}, "
                f"Elo {e.elo:+.0f} [{e.low:+.0f}, {e.high:+.0f}]")


def play_match(
    game: Game,
    player_a: Player,
    player_b: Player,
    num_games: int,
    rng: np.random.Generator,
) -> MatchResult:
    """Play ``num_games`` games of ``game`` between A and B, all at once, colours alternating.

    Raises ``ValueError`` (from ``game.step``) if a player returns an illegal move.
    """
    if num_games < 1:
        raise ValueError(f"play_match: num_games must be >= 1, got {num_games}")
    states = game.init(num_games)
    a_first = np.arange(num_games) % 2 == 0
    a_color = np.where(a_first, 0, 1)
    moves: list[list[int]] = [[] for _ in range(num_games)]
    while not states.terminal.all():
        running = ~states.terminal
        a_moves = running & (game.to_play(states) == a_color)
        actions = np.full(num_games, -1, np.int64)
        for player, mask in ((player_a, a_moves), (player_b, running & ~a_moves)):
            idx = np.flatnonzero(mask)
            if idx.size:
                chosen = np.asarray(player.select(game, states.take(idx), rng)).reshape(-1)
                if chosen.shape[0] != idx.size:
                    raise ValueError(f"player {player.name} returned {chosen.shape[0]} "
                                     f"actions for {idx.size} games")
                actions[idx] = chosen
        states = game.step(states, actions)
        for i in np.flatnonzero(running):
            moves[i].append(int(actions[i]))
    first_view = game.outcome(states).astype(np.int8)
    outcomes = np.where(a_first, first_view, -first_view).astype(np.int8)
    return MatchResult(
        player_a=player_a.name,
        player_b=player_b.name,
        wins=int(np.count_nonzero(outcomes > 0)),
        losses=int(np.count_nonzero(outcomes < 0)),
        draws=int(np.count_nonzero(outcomes == 0)),
        a_first=a_first,
        outcomes=outcomes,
        moves=moves,
    )


@dataclass(frozen=True)
class EloEstimate:
    """An Elo difference with a confidence interval (±inf at a score of 0 or 1)."""

    elo: float
    """Point estimate: ``-400 log10(1/score - 1)``."""
    low: float
    """Lower end of the interval."""
    high: float
    """Upper end of the interval."""


def _score_to_elo(score: float) -> float:
    if score <= 0.0:
        return -math.inf
    if score >= 1.0:
        return math.inf
    return -400.0 * math.log10(1.0 / score - 1.0) + 0.0  # + 0.0: no "-0" at an even score


def elo_difference(
    score: float,
    num_games: int | None = None,
    draw_fraction: float = 0.0,
    confidence: float = 0.95,
) -> EloEstimate:
    """Elo advantage implied by a mean ``score`` in [0, 1] over ``num_games`` games.

    The interval is a Wilson score interval for the mean score, mapped through the logistic
    Elo curve. Wilson rather than the plain normal interval, because a 20-0 sweep is common
    in evaluations and the normal interval collapses to a point there. A game's score has
    variance ``s(1-s) - d/4`` for a draw fraction ``d`` (a draw is less spread than a win or
    a loss), so giving ``draw_fraction`` narrows the interval. Without ``num_games`` the
    interval is the point itself.
    """
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"elo_difference: score must be in [0, 1], got {score}")
    elo = _score_to_elo(score)
    if not num_games:
        return EloEstimate(elo, elo, elo)
    n = float(num_games)
    variance = max(score * (1.0 - score) - draw_fraction / 4.0, 0.0)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    shrink = 1.0 + z * z / n
    center = (score + z * z / (2.0 * n)) / shrink
    half = z / shrink * math.sqrt(variance / n + z * z / (4.0 * n * n))
    return EloEstimate(elo, _score_to_elo(max(center - half, 0.0)),
                       _score_to_elo(min(center + half, 1.0)))


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
