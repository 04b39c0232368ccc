"""Batched matches between two players, anchor evaluation and Elo from a score.

``play_match`` plays G games of one game at once: each ply it calls each player once with
the sub-batch of running games where that player is to move, then steps all games
together. Player A moves first in the even-numbered games and second in the odd ones, so
both players get both colours equally often (A gets the extra game when G is odd).
The ``Player`` protocol is in ``player``, ``make_player`` in ``factory``.

Paired openings (``openings``; ``random_openings`` draws them): games 2k and 2k+1 both
begin with opening k's moves, A first in one and second in the other. A deterministic net
against a near-deterministic engine otherwise replays a few lines (40 games of go9 against
GnuGo were ~12 effective, and 120 games no more); an opening played from both sides gives
distinct games without making either player play worse moves than its own, and whatever
the opening's moves are worth goes to each player once.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from zeroforge.shared.games import Game
from zeroforge.shared.players.factory import make_player
from zeroforge.shared.players.player import Player


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
    def distinct_games(self) -> int:
        """Games that differ from every other in their moves or in who moved first. Two
        deterministic players replay one game a colour; an engine with some randomness
        against a deterministic searcher still repeats lines, and a repeated game adds no
        evidence: a score over G games with only D distinct is worth fewer than G."""
        return repeats(self._games())[0]

    @property
    def effective_games(self) -> float:
        """Kish's effective sample size of the match (``repeats``)."""
        return repeats(self._games())[1]

    def _games(self) -> list[tuple[bool, tuple[int, ...]]]:
        """Each game as (A moved first, its moves): equal only for a game played again."""
        return [(bool(first), tuple(moves))
                for first, moves in zip(self.a_first, self.moves, strict=True)]

    @property
    def score(self) -> float:
        """A's mean score: win 1, draw 1/2, loss 0."""
        return (self.wins + 0.5 * self.draws) / max(self.num_games, 1)

    def counts(self) -> dict[str, int | float]:
        """The match as a record's fields: ``wins``, ``draws``, ``losses``, ``score``,
        ``distinct_games`` and ``effective_games`` (the judges' rows, the evaluator's
        summaries)."""
        distinct, effective = repeats(self._games())
        return {"wins": self.wins, "draws": self.draws, "losses": self.losses,
                "score": self.score, "distinct_games": distinct, "effective_games": effective}

    def elo(self, confidence: float = 0.95) -> EloEstimate:
        """A's Elo advantage over B from this match, with a confidence interval as wide as
        its ``effective_games`` allow: a game played again is no new evidence, so 40 games
        in 15 lines do not give the interval of 40."""
        return elo_difference(self.score, self.effective_games,
                              self.draws / max(self.num_games, 1), confidence)

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
    openings: Sequence[Sequence[int]] | None = None,
) -> MatchResult:
    """Play ``num_games`` games of ``game`` between A and B, all at once, colours alternating.

    ``openings``: at least ``ceil(num_games / 2)`` move lists; game ``i`` begins with
    ``openings[i // 2]`` (the module doc). A player with a ``forced(game, states, index,
    action)`` method (a GTP engine, which must know the game's moves) is told of each
    opening move made for it. Raises ``ValueError`` if a player returns an illegal move
    or an opening has one.
    """
    if num_games < 1:
        raise ValueError(f"play_match: num_games must be >= 1, got {num_games}")
    if openings is not None and len(openings) < (num_games + 1) // 2:
        raise ValueError(f"play_match: {len(openings)} openings for {num_games} games "
                         f"(one a pair of games)")
    book = [list(map(int, openings[i // 2])) if openings is not None else []
            for i in range(num_games)]
    book_plies = np.array([len(b) for b in book])
    states = game.init(num_games)
    a_first = np.arange(num_games) % 2 == 0
    a_color = np.where(a_first, 0, 1)
    moves: list[list[int]] = [[] for _ in range(num_games)]
    while not states.terminal.all():
        running = ~states.terminal
        a_moves = running & (game.to_play(states) == a_color)
        booked = running & (states.ply < book_plies)
        actions = np.full(num_games, -1, np.int64)
        for i in np.flatnonzero(booked):
            actions[i] = book[i][int(states.ply[i])]
        for player, mask in ((player_a, a_moves), (player_b, running & ~a_moves)):
            forced = getattr(player, "forced", None)
            if forced is not None:
                for i in np.flatnonzero(mask & booked):
                    forced(game, states, int(i), int(actions[i]))
            idx = np.flatnonzero(mask & ~booked)
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


def random_openings(game: Game, count: int, plies: int, rng: np.random.Generator
                    ) -> list[list[int]]:
    """``count`` openings of ``plies`` uniformly random legal moves each (Go's pass only
    where nothing else is legal), none ending the game; for ``play_match``'s
    ``openings``."""
    states = game.init(count)
    out: list[list[int]] = [[] for _ in range(count)]
    for _ in range(plies):
        legal = game.legal_mask(states)
        actions = np.empty(count, np.int64)
        for i in range(count):
            choices = np.flatnonzero(legal[i])
            moves = [a for a in choices if game.format_action(int(a)) != "pass"]
            actions[i] = rng.choice(moves if moves else choices)
            out[i].append(int(actions[i]))
        states = game.step(states, actions)
        if states.terminal.any():
            raise ValueError(f"random_openings: {plies} plies can end a game of {game!r}")
    return out


def evaluate_against(game: Game, agent: Player, anchors: Sequence[str], games_each: int,
                     rng: np.random.Generator) -> dict[str, MatchResult]:
    """Play ``games_each`` games (colours alternating) against each anchor, a
    ``make_player`` spec (``random``, ``uct:1000``, ...); results by spec."""
    return {spec: play_match(game, agent, make_player(spec, game), games_each, rng)
            for spec in anchors}


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


def repeats(games: Iterable[Hashable]) -> tuple[int, float]:
    """(distinct, effective) of a match's games, each given as something equal only for
    the same game (its moves and who moved first). ``effective`` is Kish's effective sample
    size with each distinct game weighted by how often it was played, G²/Σ copies²: G for
    all-distinct games, the number of distinct games when each was played equally often,
    less when a few lines repeat many times. An upper bound: games that part late are not
    independent either. (0, 0.0) for no games."""
    copies = np.array(list(Counter(games).values()), dtype=np.float64)
    if not copies.size:
        return 0, 0.0
    return int(copies.size), float(copies.sum() ** 2 / (copies**2).sum())


def elo_difference(
    score: float,
    num_games: float | None = None,
    draw_fraction: float = 0.0,
    confidence: float = 0.95,
) -> EloEstimate:
    """Elo advantage implied by a mean ``score`` in [0, 1] over ``num_games`` games (an
    effective number, not always whole: ``MatchResult.effective_games``).

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


ELO_CLIP = 800.0
"""Charts of an implied Elo difference (``evaluator_elo_vs_anchor``, ``zeroforge curve``)
stay within +-this: a clean sweep implies an infinite difference, which no chart can draw."""


def clipped_elo(elo: float) -> float:
    """``elo`` clipped to +-``ELO_CLIP`` (NaN, which no score gives, reads as 0)."""
    if elo != elo:
        return 0.0
    return max(-ELO_CLIP, min(ELO_CLIP, float(elo)))
