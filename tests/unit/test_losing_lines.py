"""benchmarks/learn_tictactoe.py's ``losing_lines``: every opponent reply tried at once.
Perfect play (minimax) loses no line; a naive player's count matches a plain one-game-at-a-
time walk of the same tree."""

from __future__ import annotations

import numpy as np

from benchmarks.learn_tictactoe import losing_lines
from zeroforge.shared.games import make_game
from zeroforge.shared.players import make_player


class LowestMove:
    """Always the lowest-numbered legal point: beaten by many lines."""

    name = "lowest"

    def select(self, game, states, rng) -> np.ndarray:
        return np.argmax(game.legal_mask(states), axis=1)


def walk(game, agent, state, agent_color: int, rng) -> tuple[int, int]:
    """(lost, played) by a recursive walk, one position at a time."""
    if state.terminal[0]:
        view = state.outcome[0] if agent_color == 0 else -state.outcome[0]
        return int(view < 0), 1
    if state.to_play[0] == agent_color:
        replies = [int(agent.select(game, state, rng)[0])]
    else:
        replies = [int(a) for a in np.flatnonzero(game.legal_mask(state)[0])]
    lost = played = 0
    for action in replies:
        sub_lost, sub_played = walk(game, agent, game.step(state, np.array([action])),
                                    agent_color, rng)
        lost, played = lost + sub_lost, played + sub_played
    return lost, played


def test_perfect_play_loses_no_line():
    game = make_game("tictactoe")
    lost, played = losing_lines(game, make_player("minimax", game), np.random.default_rng(0))
    assert lost == 0 and played > 100


def test_a_naive_player_loses_lines_and_the_count_matches_a_plain_walk():
    game = make_game("tictactoe")
    agent, rng = LowestMove(), np.random.default_rng(0)
    expected = [walk(game, agent, game.init(1), colour, rng) for colour in (0, 1)]
    lost, played = losing_lines(game, agent, rng)
    assert (lost, played) == (sum(e[0] for e in expected), sum(e[1] for e in expected))
    assert lost > 0
