"""The ``Player`` protocol (anything that picks moves for a batch of games) and what a
searching player can show of its search (``Analyst``, ``SearchAnalysis``).

Kept apart from the players themselves so that code that only takes or returns a player
(matches, the ladder, engines) needs neither the spec parser nor any search module.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np

from zeroforge.shared.games import Game, State

__all__ = ["Player", "SearchAnalysis", "MoveInfo", "Analyst"]


class Player(Protocol):
    """Anything that picks moves for a batch of games."""

    name: str

    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        """[B] actions for ``states`` [B]: a legal action for every running game."""
        ...


@dataclasses.dataclass(frozen=True)
class MoveInfo:
    """One candidate move of a ``SearchAnalysis`` for one game."""

    action: int
    """The action."""
    visits: int
    """Search visits (UCT: playouts) through it."""
    share: float
    """``visits`` over all root visits, in [0, 1]."""
    prior: float | None
    """The net's prior probability of it; None for searches without a net (UCT)."""


@dataclasses.dataclass(frozen=True)
class SearchAnalysis:
    """What a searching player saw at B root positions (``MCTSPlayer.analyse``,
    ``UCTPlayer.analyse``)."""

    action: np.ndarray
    """[B] int: the move the player plays (what ``select`` would return)."""
    visits: np.ndarray
    """[B, A] int: root visit counts per action (0 for illegal or unvisited)."""
    policy: np.ndarray
    """[B, A] float: visit shares, summing to 1 over visited actions."""
    value: np.ndarray
    """[B] float in [-1, 1]: expected result for the player to move at each root."""
    prior: np.ndarray | None = None
    """[B, A] float: the net's prior at the roots; None for searches without a net."""

    def top(self, index: int, n: int = 5) -> list[MoveInfo]:
        """Up to ``n`` candidate moves of game ``index``: the move played first (a proven
        win can have fewer visits than others), then the most visited (ties by prior,
        then action); unvisited moves are left out."""
        visits = self.visits[index]
        prior = self.prior[index] if self.prior is not None else np.zeros(len(visits))
        actions = np.arange(len(visits))
        order = np.lexsort((actions, -prior, -visits, actions != self.action[index]))
        total = max(int(visits.sum()), 1)
        return [MoveInfo(int(a), int(visits[a]), float(visits[a]) / total,
                         None if self.prior is None else float(prior[a]))
                for a in order if visits[a] > 0 or a == self.action[index]][:n]


class Analyst(Protocol):
    """A player that can show what its search saw (``MCTSPlayer``, ``UCTPlayer``)."""

    name: str

    def analyse(self, game: Game, states: State, rng: np.random.Generator
                ) -> SearchAnalysis:
        """Search the running games ``states`` [B] (none may be over)."""
        ...
