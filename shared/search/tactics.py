"""Rules-only tactics shared by the searches."""

from __future__ import annotations

import numpy as np

from zeroforge.shared.games import Game, State


def winning_actions(game: Game, states: State) -> np.ndarray:
    """[B] int32: an action that wins on the spot for the player to move, -1 if none.

    All legal actions of all B games are tried in one batched ``step``.
    """
    out = np.full(states.batch_size, -1, np.int32)
    rows, acts = np.nonzero(game.legal_mask(states))
    if rows.size == 0:
        return out
    after = game.step(states.take(rows), acts)
    sign = np.where(states.to_play[rows] == 0, 1, -1)
    wins = game.terminal(after) & (game.outcome(after) * sign > 0)
    out[rows[wins]] = acts[wins]
    return out
