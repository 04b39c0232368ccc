"""Players for the terminal: people typing moves, and built-in players by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

import numpy as np

from shared.games.base import Game, IllegalMoveError, State
from shared.games.sampling import sample_legal


class RandomMover:
    """Uniformly random legal moves."""

    name = "random"

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        return sample_legal(states.legal, rng)


class HumanPlayer:
    """Reads moves in the game's notation from a text stream, re-asking after a bad one."""

    name = "human"

    def __init__(self, read: Callable[[], str] | None = None, out: TextIO | None = None) -> None:
        self._read = read or input
        self._out = out

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        moves = np.empty(states.batch_size, np.int64)
        for i in range(states.batch_size):
            moves[i] = self._ask(game, states, i)
        return moves

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


def make_player(spec: str) -> object:
    """A player from its name: ``human``, ``random``, ``uct`` or ``uct:PLAYOUTS``."""
    name, _, arg = spec.partition(":")
    if name == "human":
        return HumanPlayer()
    if name == "random":
        return RandomMover()
    if name == "uct":
        from shared.search.uct import UCTConfig, UCTPlayer

        playouts = int(arg) if arg else 1000
        return UCTPlayer(UCTConfig(playouts=playouts))
    raise ValueError(f"unknown player {spec!r}; use human, random or uct[:PLAYOUTS]")
