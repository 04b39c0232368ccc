"""Random rollouts and the pure-UCT baseline on toy positions with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from zeroforge.shared.games import Game, State, make_game
from zeroforge.shared.players import MinimaxPlayer, RandomPlayer, UCTPlayer, play_match
from zeroforge.shared.search import (
    UCTConfig,
    policy_rollout_values,
    random_rollout_values,
    sample_from_policy,
    uct_search,
    winning_actions,
)

TTT = make_game("tictactoe")
GOMOKU6 = make_game("gomoku6")


def position(game: Game, xs: list[int], os: list[int]) -> State:
    """One game where X played ``xs`` and O played ``os``, alternately from X."""
    assert len(xs) in (len(os), len(os) + 1)
    state = game.init(1)
    for i in range(len(xs) + len(os)):
        move = xs[i // 2] if i % 2 == 0 else os[i // 2]
        state = game.step(state, np.array([move]))
    assert not state.terminal[0]
    return state


# --- rollouts ---------------------------------------------------------------------------

# X: 0 1 3 8, O: 4 5 7, O to move; empty 2 and 6 each complete an X line, and O's move
#   X X .
#   X O O
#   . O X
O_LOSES_ANYWAY = ([0, 1, 3, 8], [4, 5, 7])


def test_rollout_values_are_from_the_movers_view():
    rng = np.random.default_rng(0)
    o_to_move = position(TTT, *O_LOSES_ANYWAY)  # whatever O plays, X wins next
    x_to_move = TTT.step(o_to_move, np.array([2]))  # only 6 is left and it wins for X
    x_won = TTT.step(x_to_move, np.array([6]))  # finished: X won, O "to move"
    batch = State.concat([o_to_move, x_to_move, x_won])
    values = random_rollout_values(TTT, batch.repeat(20), rng)
    assert values.dtype == np.float32 and values.shape == (60,)
    np.testing.assert_array_equal(values.reshape(3, 20), [[-1] * 20, [1] * 20, [-1] * 20])


def test_random_rollouts_from_empty_tictactoe_match_the_known_odds():
    # Uniformly random tic-tac-toe: X wins 737/1260, O wins 121/420, so E[z] = 0.29683
    # for the mover X; 20,000 rollouts have a standard error of about 0.006.
    states = TTT.init(20_000)
    values = random_rollout_values(TTT, states, np.random.default_rng(1))
    assert abs(values.mean() - (737 / 1260 - 121 / 420)) < 0.03
    assert not states.terminal.any() and (states.ply == 0).all()  # input left alone
    # From O's side after X's first move the mover is behind on average.
    after = TTT.step(states, np.full(20_000, 4))
    assert random_rollout_values(TTT, after, np.random.default_rng(2)).mean() < -0.2


def test_policy_rollouts_follow_the_policy():
    def lowest_legal(obs: np.ndarray, legal: np.ndarray) -> np.ndarray:
        assert obs.shape[0] == legal.shape[0] and legal.any(axis=1).all()  # running only
        probs = np.zeros(legal.shape)
        probs[np.arange(legal.shape[0]), np.argmax(legal, axis=1)] = 1.0
        return probs

    # X 0, O 1, X 2, O 3, X 4, O 5, X 6: X completes the 2-4-6 diagonal.
    values = policy_rollout_values(TTT, TTT.init(3), np.random.default_rng(0), lowest_legal)
    np.testing.assert_array_equal(values, [1.0, 1.0, 1.0])
    # A batch whose games end at different plies: O (to move) is lost in one of them.
    mixed = State.concat([TTT.init(2), position(TTT, *O_LOSES_ANYWAY)])
    values = policy_rollout_values(TTT, mixed, np.random.default_rng(0), lowest_legal)
    np.testing.assert_array_equal(values, [1.0, 1.0, -1.0])


def test_a_policy_with_no_mass_on_legal_moves_falls_back_to_uniform():
    def nothing(obs: np.ndarray, legal: np.ndarray) -> np.ndarray:
        return np.zeros(legal.shape)

    values = policy_rollout_values(TTT, TTT.init(4000), np.random.default_rng(3), nothing)
    assert abs(values.mean() - (737 / 1260 - 121 / 420)) < 0.07


def test_sample_from_policy_only_picks_legal_actions_in_proportion():
    rng = np.random.default_rng(4)
    legal = np.array([[True, False, True, True]] * 20_000)
    probs = np.array([[0.2, 5.0, 0.6, 0.0]] * 20_000)  # mass on an illegal action ignored
    picks = sample_from_policy(probs, legal, rng)
    counts = np.bincount(picks, minlength=4) / picks.size
    np.testing.assert_allclose(counts, [0.25, 0.0, 0.75, 0.0], atol=0.02)
    assert (sample_from_policy(probs[:1], np.zeros((1, 4), bool), rng) == -1).all()


# --- UCT tactics ------------------------------------------------------------------------

# Tic-tac-toe (points 0..8 row-major): (X stones, O stones, moves that must be played).
TTT_TACTICS = [
    ([0, 1], [3, 4], {2}),  # X wins on the top row (and ignores O's threat)
    ([0, 8], [3, 4], {5}),  # X blocks the middle row
    ([0, 1, 8], [4, 5], {3}),  # O wins on the middle row rather than blocking
    ([0, 1], [4], {2}),  # O blocks the top row
]


@pytest.mark.parametrize("solver", [True, False])
def test_uct_wins_and_blocks_at_tictactoe(solver):
    positions = State.concat([position(TTT, xs, os) for xs, os, _ in TTT_TACTICS])
    copies = 4
    result = uct_search(TTT, positions.repeat(copies), UCTConfig(playouts=1000, solver=solver),
                        np.random.default_rng(5))
    for i, (_, _, good) in enumerate(TTT_TACTICS):
        assert set(result.action[i * copies:(i + 1) * copies].tolist()) <= good, i


# Gomoku 6x6, k=4 (point = row * 6 + col, row 0 on top).
GOMOKU_TACTICS = [
    # X has an open three on row 1 (cols 1-3), O one on row 4: X completes four.
    ([7, 8, 9], [25, 26, 27], {6, 10}),
    # O has three on row 2 from the edge (cols 0-2): X must take col 3.
    ([30, 35, 5], [12, 13, 14], {15}),
    # O has a split three on row 3 (cols 1, 3, 4): X must fill the gap at col 2.
    ([0, 5, 30], [19, 21, 22], {20}),
    # X's edge three on row 2 wins at once, although O has an open three too.
    ([12, 13, 14], [25, 26, 27], {15}),
]


def test_uct_wins_and_blocks_at_gomoku():
    positions = State.concat([position(GOMOKU6, xs, os) for xs, os, _ in GOMOKU_TACTICS])
    copies = 4
    result = uct_search(GOMOKU6, positions.repeat(copies), UCTConfig(playouts=1000),
                        np.random.default_rng(6))
    for i, (_, _, good) in enumerate(GOMOKU_TACTICS):
        assert set(result.action[i * copies:(i + 1) * copies].tolist()) <= good, i


def test_a_won_position_is_proven_at_once():
    won = position(GOMOKU6, *GOMOKU_TACTICS[3][:2])
    result = uct_search(GOMOKU6, won, UCTConfig(playouts=1000), np.random.default_rng(7))
    assert result.action.tolist() == [15]
    assert result.proven.tolist() == [True] and result.value.tolist() == [1.0]
    assert result.playouts.tolist() == [1]  # proof ends the search early


def test_a_lost_position_is_proven_lost():
    # O to move, and X wins next whatever O does: every root move is a proven loss.
    result = uct_search(TTT, position(TTT, *O_LOSES_ANYWAY), UCTConfig(playouts=200),
                        np.random.default_rng(8))
    assert result.proven.tolist() == [True] and result.value.tolist() == [-1.0]
    assert result.action[0] in (2, 6)


def test_winning_actions_finds_immediate_wins_for_either_side():
    states = State.concat([
        position(TTT, [0, 1], [3, 4]),  # X wins at 2
        position(TTT, [0, 1, 8], [4, 5]),  # O wins at 3
        TTT.init(1),  # nothing to win
    ])
    assert winning_actions(TTT, states).tolist() == [2, 3, -1]


def test_replaying_paths_gives_the_same_search_as_stored_states():
    roots = State.concat([GOMOKU6.init(2), position(GOMOKU6, [14], [21])])
    runs = [uct_search(GOMOKU6, roots, UCTConfig(playouts=150, store_states=store),
                       np.random.default_rng(9)) for store in (True, False)]
    np.testing.assert_array_equal(runs[0].visits, runs[1].visits)
    np.testing.assert_array_equal(runs[0].action, runs[1].action)
    assert runs[0].visits.sum(axis=1).tolist() == [150, 150, 150]


def test_player_skips_finished_games_and_plays_legal_moves():
    finished = TTT.step(position(TTT, [0, 1], [3, 4]), np.array([2]))
    states = State.concat([TTT.init(1), finished, position(TTT, [4], [])])
    actions = UCTPlayer(UCTConfig(playouts=50)).select(TTT, states, np.random.default_rng(10))
    assert actions[1] == -1
    assert states.legal[0, actions[0]] and states.legal[2, actions[2]]


def test_search_rejects_finished_roots_and_bad_configs():
    finished = TTT.step(position(TTT, [0, 1], [3, 4]), np.array([2]))
    with pytest.raises(ValueError, match="running"):
        uct_search(TTT, finished, UCTConfig(playouts=10), np.random.default_rng(0))
    with pytest.raises(ValueError, match="playouts"):
        UCTConfig(playouts=0)
    with pytest.raises(ValueError, match="c must"):
        UCTConfig(c=-1.0)


# --- UCT in matches ---------------------------------------------------------------------

def test_uct_beats_random_at_tictactoe():
    result = play_match(TTT, UCTPlayer(UCTConfig(playouts=1000)), RandomPlayer(), 20,
                        np.random.default_rng(11))
    assert result.score >= 0.9 and result.losses == 0, result.summary()


def test_uct_holds_the_perfect_player_to_draws_at_tictactoe():
    result = play_match(TTT, UCTPlayer(UCTConfig(playouts=1000)), MinimaxPlayer(), 10,
                        np.random.default_rng(12))
    assert result.draws >= 8 and result.losses <= 1, result.summary()
