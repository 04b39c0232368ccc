"""Leaf batching with virtual loss (``shared/search/vloss.py``) on toy problems with known
answers: one tree sends several leaves per evaluator call and still searches correctly."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.fakes import ARM_VALUES, TTT, Bandit, BanditEvaluator, ttt
from tests.unit.test_mcts import random_positions
from zeroforge.shared.games import make_game
from zeroforge.shared.search import MCTS, Evaluation, SearchConfig, UniformEvaluator, search_rounds


def deterministic(**kw) -> SearchConfig:
    """Evaluation-style search: no noise, most visited move, no rules-only shortcut."""
    return SearchConfig(**{"add_noise": False, "temperature": 0.0, "take_immediate_wins": False,
                           **kw})


class Recording:
    """Wraps an evaluator and records the batch size of every call."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.sizes: list[int] = []
        self.obs: list[np.ndarray] = []

    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        self.sizes.append(int(legal.shape[0]))
        self.obs.append(obs.copy())
        return self.inner.evaluate(obs, legal)


def assert_real_statistics(tree, b: int) -> None:
    """Tree b holds real statistics only: every running node's visits are its own
    evaluation plus its children's, its value sum its own value plus its children's (in
    its mover's view), and a terminal node's value sum is its exact value per visit."""
    n = int(tree.num_nodes[b])
    for i in range(n):
        kids = tree.children[b, i][tree.children[b, i] >= 0]
        if tree.terminal[b, i]:
            assert tree.value_sum[b, i] == pytest.approx(
                tree.visits[b, i] * tree.raw_value[b, i], abs=1e-9)
            continue
        assert tree.visits[b, i] == 1 + tree.visits[b, kids].sum()
        signs = np.where(tree.to_play[b, kids] == tree.to_play[b, i], 1.0, -1.0)
        expected = tree.raw_value[b, i] + (signs * tree.value_sum[b, kids]).sum()
        assert tree.value_sum[b, i] == pytest.approx(expected, abs=1e-9)


# --- leaf_batch = 1 is today's search --------------------------------------------------
def _via_rounds(self, tree, root_prior, halving, rollout_rng, sims, forced_k):
    """MCTS._simulate replaced by virtual-loss rounds (whatever the config's leaf_batch)."""
    assert halving is None
    search_rounds(tree, root_prior, sims, forced_k, self.config,
                  functools.partial(self._grow, tree, rollout_rng), self.timings)


@pytest.mark.parametrize("extra", [
    {},
    {"forced_playouts_k": 2.0},
    {"fpu": 0.2, "fpu_relative": True, "c_base": 10.0},
    {"rollout_mix": 0.5},
])
def test_rounds_of_one_leaf_are_the_lock_step_search_bit_for_bit(monkeypatch, extra):
    # One descent per round: its virtual loss is removed before anything reads it, so the
    # rounds must reproduce the lock-step search exactly, tree included, also with reuse.
    game = make_game("gomoku6")
    config = SearchConfig(num_simulations=48, reuse_tree=True, leaf_batch=1, **extra)

    def play(simulate):
        with monkeypatch.context() as patch:
            if simulate is not None:
                patch.setattr(MCTS, "_simulate", simulate)
            mcts = MCTS(game, UniformEvaluator(), config)
            states = random_positions(game, [0, 3, 5], seed=4)
            rngs = [np.random.default_rng(s) for s in (1, 2, 3)]
            out = []
            for _ in range(3):
                r = mcts.search(states, rngs)
                out.append((r.action, r.visit_counts, r.visit_policy, r.root_value,
                            mcts.tree.visits.copy(), mcts.tree.value_sum.copy()))
                mcts.advance(r.action)
                states = game.step(states, r.action)
            return out

    today = play(None)
    rounds = play(_via_rounds)
    for a, b in zip(today, rounds, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)


def test_leaf_batch_one_is_the_default_search():
    state = random_positions(make_game("gomoku6"), [4], seed=5)
    game = make_game("gomoku6")
    runs = [MCTS(game, UniformEvaluator(), config).search(state, np.random.default_rng(7))
            for config in (SearchConfig(num_simulations=64),
                           SearchConfig(num_simulations=64, leaf_batch=1, virtual_loss=3.0))]
    np.testing.assert_array_equal(runs[0].visit_counts, runs[1].visit_counts)
    np.testing.assert_array_equal(runs[0].visit_policy, runs[1].visit_policy)
    assert runs[0].root_value[0] == runs[1].root_value[0]


# --- several leaves per call ------------------------------------------------------------
def test_a_round_spreads_its_descents_over_different_moves():
    # Empty tic-tac-toe board, uniform priors and values: without virtual loss all eight
    # descents of the first round would take the same move; with it they take eight.
    evaluator = Recording(UniformEvaluator())
    MCTS(TTT, evaluator, deterministic(num_simulations=8, leaf_batch=8)).search(
        TTT.init(1), np.random.default_rng(0))
    assert evaluator.sizes == [1, 8]
    boards = {evaluator.obs[1][i].tobytes() for i in range(8)}
    assert len(boards) == 8


def test_each_call_carries_up_to_leaf_batch_leaves_per_game():
    # Gomoku 6x6 from early positions: no terminal leaf and, with uniform values, no two
    # descents of a round meet, so every round fills all 3 x 8 slots: 64 / 8 rounds.
    game = make_game("gomoku6")
    evaluator = Recording(UniformEvaluator())
    mcts = MCTS(game, evaluator, deterministic(num_simulations=64, leaf_batch=8))
    mcts.search(random_positions(game, [0, 1, 2], seed=6), np.random.default_rng(0))
    assert evaluator.sizes == [3] + [24] * 8
    np.testing.assert_array_equal(mcts.tree.visits[:, 0], 65)


@pytest.mark.parametrize("leaf_batch", [8, 16])
def test_the_bandit_still_finds_the_best_arm_and_spends_the_budget(leaf_batch):
    game = Bandit(len(ARM_VALUES))
    mcts = MCTS(game, BanditEvaluator(ARM_VALUES),
                deterministic(num_simulations=400, leaf_batch=leaf_batch))
    result = mcts.search(game.init(1), np.random.default_rng(0))
    visits = result.visit_counts[0]
    assert result.action[0] == 3
    assert visits[3] > 0.5 * 400
    assert visits.sum() == 400
    assert mcts.tree.visits[0, 0] == 401
    assert list(np.argsort(visits)) == list(np.argsort(ARM_VALUES))
    # Q(root, a) is exactly the arm value: no virtual loss may be left in the means.
    expected = (visits * np.array(ARM_VALUES)).sum() / (visits.sum() + 1)
    assert result.root_value[0] == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("leaf_batch", [8, 16])
def test_tic_tac_toe_tactics_with_leaf_batches(leaf_batch):
    win = MCTS(TTT, UniformEvaluator(), deterministic(num_simulations=100, leaf_batch=leaf_batch)
               ).search(ttt("""X X .
                               O O .
                               . . ."""), np.random.default_rng(0))
    assert win.action[0] == 2
    # Less concentrated than the lock-step search's 92: every round's virtual losses send
    # a few descents to the other moves, more of them the larger the round.
    assert win.visit_counts[0, 2] > 0.6 * 100
    assert win.root_value[0] > 0.5
    block = MCTS(TTT, UniformEvaluator(),
                 deterministic(num_simulations=200, leaf_batch=leaf_batch)).search(
        ttt("""X . .
               O O .
               . . X"""), np.random.default_rng(0))
    assert block.action[0] == 5
    assert abs(block.root_value[0]) < 0.2
    lost = MCTS(TTT, UniformEvaluator(),
                deterministic(num_simulations=300, leaf_batch=leaf_batch)).search(
        ttt("""X . X
               . O .
               X . O"""), np.random.default_rng(0))
    assert lost.root_value[0] < -0.5


class Liar:
    """Uniform priors and a value that always says the mover is winning."""

    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        b, a = legal.shape
        return Evaluation(np.zeros((b, a), np.float32), np.ones(b, np.float32))


@pytest.mark.parametrize("lam", [0.0, 1.0])
def test_leaves_of_a_round_mix_in_rollouts(lam):
    # Every way to finish this game is a draw, so every random playout scores 0: with
    # λ = 1 every leaf is worth exactly 0 whatever the lying network says; with λ = 0 the
    # lie shows in the root value.
    state = ttt("""X O X
                   . . .
                   O X O""")
    result = MCTS(TTT, Liar(), deterministic(num_simulations=30, rollout_mix=lam,
                                             leaf_batch=8)).search(state, np.random.default_rng(0))
    if lam == 1.0:
        assert result.root_value[0] == 0.0
    else:
        assert result.root_value[0] != 0.0


# --- duplicates and terminal leaves -----------------------------------------------------
def test_descents_that_meet_at_a_new_leaf_are_dropped_not_counted():
    # One arm: the tree is a chain, so every descent of a round after the first reaches
    # the leaf the first one created. They are dropped: each round adds one simulation
    # and one evaluated leaf, and visits stay one per evaluation along the chain.
    game = Bandit(1)
    evaluator = BanditEvaluator([0.5])
    mcts = MCTS(game, evaluator, deterministic(num_simulations=10, leaf_batch=4))
    result = mcts.search(game.init(1), np.random.default_rng(0))
    assert evaluator.calls == 1 + 10
    assert result.visit_counts[0, 0] == 10
    assert mcts.tree.num_nodes[0] == 11
    node, chain = 0, []
    while node >= 0:
        chain.append(int(mcts.tree.visits[0, node]))
        node = int(mcts.tree.children[0, node, 0])
    assert chain == list(range(11, 0, -1))


def test_terminal_leaves_are_backed_up_without_evaluation():
    # X's only move fills the board: a draw. The first round creates that leaf (the other
    # descents meet it and are dropped); from then on every descent ends at the known
    # terminal node, which is backed up each time and never sent to the evaluator.
    state = ttt("""X O X
                   X O O
                   O X .""")
    evaluator = Recording(UniformEvaluator())
    mcts = MCTS(TTT, evaluator, deterministic(num_simulations=10, leaf_batch=4))
    result = mcts.search(state, np.random.default_rng(0))
    assert evaluator.sizes == [1]  # the root only
    assert result.visit_counts[0, 8] == 10
    assert mcts.tree.visits[0, 0] == 11
    assert result.root_value[0] == 0.0


# --- the tree holds real statistics after a search --------------------------------------
class HashEvaluator:
    """Uneven, position-dependent priors and values (a hash of the board), so that the
    statistics differ from node to node and a left-over virtual loss would show."""

    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        flat = obs.reshape(obs.shape[0], -1).astype(np.float64)
        weights = np.sin(np.arange(flat.shape[1]) * 1.7 + 0.3)
        value = np.tanh(flat @ weights / 3.0).astype(np.float32)
        logits = np.cos(np.arange(legal.shape[1])[None, :] * 0.9 + value[:, None] * 5.0)
        return Evaluation(logits.astype(np.float32), value)


@pytest.mark.parametrize("extra", [
    {},
    {"virtual_loss": 3.0},
    {"virtual_loss": 0.0},
    {"forced_playouts_k": 2.0, "add_noise": True},
    {"fpu": 0.3, "fpu_relative": True, "c_base": 20.0},
])
def test_virtual_losses_are_fully_removed(extra):
    game = make_game("gomoku6")
    config = SearchConfig(**{"num_simulations": 60, "leaf_batch": 8, "reuse_tree": True,
                             "add_noise": False, **extra})
    mcts = MCTS(game, HashEvaluator(), config)
    states = random_positions(game, [6, 9], seed=8)
    rngs = [np.random.default_rng(s) for s in (1, 2)]
    for _ in range(3):
        # A fresh root starts with its own evaluation, a kept one with its kept visits.
        kept = (np.ones(2, np.int64) if mcts.tree is None
                else np.where(mcts.tree.num_nodes > 0, mcts.tree.visits[:, 0], 1))
        result = mcts.search(states, rngs)
        np.testing.assert_array_equal(mcts.tree.visits[:, 0], kept + 60)
        for b in range(2):
            assert_real_statistics(mcts.tree, b)
        mcts.advance(result.action)
        states = game.step(states, result.action)
        if states.terminal.any():
            break


@pytest.mark.parametrize("leaf_batch", [1, 8])
def test_batched_games_equal_games_searched_alone(leaf_batch):
    game = make_game("gomoku6")
    states = random_positions(game, [0, 3, 6, 9], seed=1)
    config = SearchConfig(num_simulations=48, add_noise=True, temperature=1.0,
                          leaf_batch=leaf_batch)
    seeds = [11, 12, 13, 14]
    batched = MCTS(game, HashEvaluator(), config).search(
        states, [np.random.default_rng(s) for s in seeds])
    for i, seed in enumerate(seeds):
        alone = MCTS(game, HashEvaluator(), config).search(
            states.take([i]), [np.random.default_rng(seed)])
        np.testing.assert_array_equal(alone.visit_counts[0], batched.visit_counts[i])
        assert alone.action[0] == batched.action[i]


def test_config_refuses_bad_leaf_batches():
    with pytest.raises(ValueError, match="leaf_batch must be >= 1"):
        SearchConfig(leaf_batch=0)
    with pytest.raises(ValueError, match="virtual_loss"):
        SearchConfig(virtual_loss=-1.0)
    with pytest.raises(ValueError, match="leaf_batch > 1 is for PUCT"):
        SearchConfig(gumbel=True, leaf_batch=8)
    SearchConfig(gumbel=True, leaf_batch=1)  # the lock-step search suits Gumbel's rules
