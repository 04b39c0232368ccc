"""Players for matches (the trained agent and the fixed anchors) and anchor evaluation."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from shared.arena import MatchResult, MinimaxPlayer, RandomPlayer, play_match
from shared.games.base import Game, State
from shared.search.config import SearchConfig
from shared.search.evaluator import Evaluator
from shared.search.mcts import MCTS


class MCTSPlayer:
    """The trained agent: PUCT search with its network, no noise, most-visited move.

    With ``opening_moves`` > 0 the first that many plies of a game are sampled in
    proportion to visit counts (temperature 1) instead: two deterministic searchers would
    otherwise play the same two games over and over."""

    def __init__(self, game: Game, evaluator: Evaluator, search: SearchConfig,
                 name: str = "agent", opening_moves: int = 0) -> None:
        self.name = name
        self.search_config = dataclasses.replace(
            search, add_noise=False, reuse_tree=False, temperature_moves=opening_moves,
            temperature=1.0 if opening_moves else search.temperature)
        self._mcts = MCTS(game, evaluator, self.search_config)

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        return self._mcts.search(states, rng).action


def make_anchor(spec: str) -> object:
    """A fixed opponent by name: ``random``, ``minimax`` (tic-tac-toe), ``uct:PLAYOUTS``
    (textbook pure MCTS with random rollouts: the yardstick "pure MCTS with N playouts")
    or ``uctsolver:PLAYOUTS`` (the same plus immediate-win checks and MCTS-Solver proofs)."""
    name, _, arg = spec.partition(":")
    if name == "random":
        return RandomPlayer()
    if name == "minimax":
        return MinimaxPlayer()
    if name in ("uct", "uctsolver"):
        from shared.search.uct import UCTConfig, UCTPlayer

        try:
            playouts = int(arg) if arg else 1000
        except ValueError:
            raise ValueError(f"player {spec!r}: playouts must be an integer") from None
        config = UCTConfig(playouts=playouts, solver=name == "uctsolver")
        return UCTPlayer(config, name=f"{name}{playouts}")
    raise ValueError(f"unknown player {spec!r}; use random, minimax, uct[:PLAYOUTS] or "
                     "uctsolver[:PLAYOUTS]")


def evaluate_against(game: Game, agent: object, anchors: Sequence[str], games_each: int,
                     rng: np.random.Generator) -> dict[str, MatchResult]:
    """Play ``games_each`` games (colours alternating) against each anchor."""
    return {spec: play_match(game, agent, make_anchor(spec), games_each, rng)
            for spec in anchors}
