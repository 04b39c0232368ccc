"""Gumbel AlphaZero search on toy problems with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fakes import ARM_VALUES, TTT, Bandit, BanditEvaluator, ttt
from zeroforge.shared.games import make_game
from zeroforge.shared.search import MCTS, SearchConfig, UniformEvaluator


def gumbel(**kw) -> SearchConfig:
    return SearchConfig(**{"gumbel": True, "take_immediate_wins": False, **kw})




# --- tactics at small budgets ------------------------------------------------------------
def test_sixteen_simulations_find_a_one_move_win():
    state = ttt("""X X .
                   O O .
                   . . .""")
    for seed in range(10):
        result = MCTS(TTT, UniformEvaluator(), gumbel(num_simulations=16)).search(
            state, np.random.default_rng(seed))
        assert result.action[0] == 2
        policy = result.visit_policy[0]
        assert policy.sum() == pytest.approx(1.0, abs=1e-6)
        assert np.all(policy[~state.legal[0]] == 0)
        assert policy.argmax() == 2


def test_sixty_four_simulations_block_a_one_move_loss():
    state = ttt("""X . .
                   O O .
                   . . X""")
    for seed in range(10):
        result = MCTS(TTT, UniformEvaluator(), gumbel(num_simulations=64)).search(
            state, np.random.default_rng(seed))
        assert result.action[0] == 5


# --- sequential halving -----------------------------------------------------------------
@pytest.mark.parametrize("sims, expected", [
    # m = 16 of 36 moves, 4 phases of 16 simulations: 16x1, 8x2, 4x4, 2x8 visits.
    (64, [15, 15, 7, 7, 3, 3, 3, 3] + [1] * 8),
    (16, [1] * 16),  # budget for one phase only: every considered move once
    (5, [1] * 5),  # fewer simulations than m: only that many moves are considered
    # 200: 3 visits each in phases of 48, 48, 48, and the last phase takes the other 56.
    (200, [49, 49, 21, 21, 9, 9, 9, 9] + [3] * 8),
])
def test_sequential_halving_spends_the_budget_by_phases(sims, expected):
    game = make_game("gomoku6")
    result = MCTS(game, UniformEvaluator(), gumbel(num_simulations=sims)).search(
        game.init(1), np.random.default_rng(0))
    visits = np.sort(result.visit_counts[0])[::-1]
    assert visits.sum() == sims
    assert visits[visits > 0].tolist() == expected


def test_considered_actions_respect_max_considered():
    game = make_game("gomoku6")
    result = MCTS(game, UniformEvaluator(), gumbel(num_simulations=64, gumbel_max_considered=4)
                  ).search(game.init(1), np.random.default_rng(0))
    assert (result.visit_counts[0] > 0).sum() == 4


# --- the bandit: known values -------------------------------------------------------------
def test_bandit_winner_and_policy_target_follow_the_values():
    game = Bandit(len(ARM_VALUES))
    result = MCTS(game, BanditEvaluator(ARM_VALUES), gumbel(num_simulations=32, add_noise=False)
                  ).search(game.init(1), np.random.default_rng(0))
    assert result.action[0] == 3
    assert list(np.argsort(result.visit_policy[0])) == list(np.argsort(ARM_VALUES))


def test_search_overrules_a_misleading_prior():
    game = Bandit(len(ARM_VALUES))
    logits = [0.0, 0.0, 0.0, 0.0, 3.0]  # the net loves arm 4, worth only 0.1
    prior = np.exp(logits) / np.exp(logits).sum()
    result = MCTS(game, BanditEvaluator(ARM_VALUES, logits), gumbel(num_simulations=32)).search(
        game.init(1), np.random.default_rng(0))
    assert result.action[0] == 3
    assert result.visit_policy[0, 3] > prior[3]
    assert result.visit_policy[0, 4] < prior[4]


def test_completed_q_of_unvisited_moves_is_the_mixed_value():
    # Two simulations, two considered arms (0 and 1: equal logits, no noise, index order).
    # Unvisited arms get v_mix = (v̂ + ΣN · Σπq / Σπ) / (1 + ΣN) with v̂ = 0 at the root.
    game = Bandit(len(ARM_VALUES))
    config = gumbel(num_simulations=2, gumbel_max_considered=2, add_noise=False)
    result = MCTS(game, BanditEvaluator(ARM_VALUES), config).search(
        game.init(1), np.random.default_rng(0))
    np.testing.assert_array_equal(result.visit_counts[0], [1, 1, 0, 0, 0])
    q = np.array(ARM_VALUES[:2])
    v_mix = (0.0 + 2 * (0.2 * q).sum() / 0.4) / 3
    completed = np.array([q[0], q[1], v_mix, v_mix, v_mix])
    sigma = (50 + 1) * 1.0 * (completed + 1) / 2
    expected = np.exp(sigma - sigma.max()) / np.exp(sigma - sigma.max()).sum()
    np.testing.assert_allclose(result.visit_policy[0], expected, rtol=1e-5, atol=1e-7)
    assert result.action[0] == 1  # the better of the two considered


def test_without_noise_the_search_is_deterministic_with_noise_it_samples():
    game = make_game("gomoku6")
    quiet = {int(MCTS(game, UniformEvaluator(), gumbel(num_simulations=16, add_noise=False))
                 .search(game.init(1), np.random.default_rng(s)).action[0]) for s in range(6)}
    noisy = {int(MCTS(game, UniformEvaluator(), gumbel(num_simulations=16))
                 .search(game.init(1), np.random.default_rng(s)).action[0]) for s in range(6)}
    assert len(quiet) == 1
    assert len(noisy) > 1


def test_gumbel_with_tree_reuse_keeps_working():
    config = gumbel(num_simulations=32, reuse_tree=True)
    mcts = MCTS(TTT, UniformEvaluator(), config)
    state = TTT.init(1)
    rng = np.random.default_rng(0)
    while not state.terminal[0]:
        result = mcts.search(state, rng)
        assert result.visit_policy[0].sum() == pytest.approx(1.0, abs=1e-6)
        assert state.legal[0, result.action[0]]
        mcts.advance(result.action)
        state = TTT.step(state, result.action)
