"""One game at a time, for people and protocols (terminal play, GTP, Gomocup, SGF).

A ``GameSession`` wraps a batch of one and checks every move, so a bad move raises
``IllegalMoveError`` naming the move and the reason and leaves the game as it was.
"""

from __future__ import annotations

import numpy as np

from zeroforge.shared.games.base import Game, IllegalMoveError, State


class GameSession:
    """A single game with move validation, history and undo."""

    def __init__(self, game: Game, state: State | None = None) -> None:
        self.game = game
        self.state = game.init(1) if state is None else state
        self.history: list[State] = []
        self.moves: list[int] = []

    @property
    def over(self) -> bool:
        return bool(self.state.terminal[0])

    @property
    def outcome(self) -> int:
        """+1 first player won, -1 second player won, 0 draw (or not over)."""
        return int(self.state.outcome[0])

    @property
    def to_play(self) -> int:
        """0 if the first player is to move."""
        return int(self.state.to_play[0])

    def legal_actions(self) -> list[int]:
        return np.flatnonzero(self.state.legal[0]).tolist()

    def to_action(self, move: str | int) -> int:
        """Action for a move given as notation text or as an action number."""
        if isinstance(move, str):
            return self.game.parse_action(move)
        return int(move)

    def play(self, move: str | int) -> int:
        """Play one move; returns the action. Raises IllegalMoveError with the reason."""
        action = self.to_action(move)
        reason = self.game.illegal_reason(self.state, 0, action)
        if reason is not None:
            shown = move if isinstance(move, str) else self._name(action)
            raise IllegalMoveError(f"illegal move {shown}: {reason}")
        self.history.append(self.state)
        self.state = self.game.step(self.state, np.array([action]))
        self.moves.append(action)
        return action

    def undo(self) -> int:
        """Take back the last move; returns it. IllegalMoveError if there is none."""
        if not self.history:
            raise IllegalMoveError("nothing to undo")
        self.state = self.history.pop()
        return self.moves.pop()

    def render(self) -> str:
        return self.game.render(self.state, 0)

    def _name(self, action: int) -> str:
        if 0 <= action < self.game.spec.num_actions:
            return self.game.format_action(action)
        return str(action)
