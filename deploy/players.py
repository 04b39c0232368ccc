"""A person at the terminal as a player, and players by name for ``zeroforge play``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

import numpy as np

from shared.games.base import Game, IllegalMoveError, State


class HumanPlayer:
    """Reads moves in the game's notation from a text stream, re-asking after a bad one."""

    name = "human"

    def __init__(self, read: Callable[[], str] | None = None, out: TextIO | None = None) -> None:
        self._read = read or input
        self._out = out

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
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


def make_player(spec: str) -> object:
    """``human``, or an anchor name (``random``, ``minimax``, ``uct[:PLAYOUTS]``)."""
    if spec == "human":
        return HumanPlayer()
    from actors.evaluation import make_anchor  # pulls in the search only when needed

    return make_anchor(spec)
