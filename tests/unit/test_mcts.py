"""Batched PUCT search on toy problems with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fakes import ARM_VALUES, TTT, Bandit, BanditEvaluator, ttt
from zeroforge.shared.games import Game, State, make_game
from zeroforge.shared.search import (
    MCTS,
    Evaluation,
    EvaluationError,
    SearchConfig,
    UniformEvaluator,
    dirichlet_noise,
    same_states,
    sample_actions,
)


def deterministic(**kw) -> SearchConfig:
    """Evaluation-style search: no noise, most visited move, no rules-only shortcut (so the
    tests see what the search itself finds)."""
    return SearchConfig(**{"add_noise": False, "temperature": 0.0, "take_immediate_wins": False,
                           **kw})




# --- tic-tac-toe: tactics --------------------------------------------------------------
def test_takes_a_one_move_win():
    state = ttt("""X X .
                   O O .
                   . . .""")
    result = MCTS(TTT, UniformEvaluator(), deterministic(num_simulations=100)).search(
        state, np.random.default_rng(0))
    assert result.action[0] == 2
    assert result.visit_counts[0, 2] > 0.8 * 100
    assert result.root_value[0] > 0.8  # the mover's view: X is winning


def test_blocks_a_one_move_loss():
    state = ttt("""X . .
                   O O .
                   . . X""")
    result = MCTS(TTT, UniformEvaluator(), deterministic(num_simulations=200)).search(
        state, np.random.default_rng(0))
    assert result.action[0] == 5
    assert abs(result.root_value[0]) < 0.2  # blocked, the game goes on about even


def test_the_loser_sees_a_negative_value():
    # O to move cannot block both of X's open lines (B3 and A2), nor win first.
    state = ttt("""X . X
                   . O .
                   X . O""")
    assert state.to_play[0] == 1
    result = MCTS(TTT, UniformEvaluator(), deterministic(num_simulations=300)).search(
        state, np.random.default_rng(0))
    assert result.root_value[0] < -0.5


def test_finished_games_are_refused():
    state = ttt("""X X X
                   O O .
                   . . .""")
    with pytest.raises(ValueError, match="already over"):
        MCTS(TTT, UniformEvaluator(), deterministic(num_simulations=4)).search(
            state, np.random.default_rng(0))


# --- the bandit: visits follow known values --------------------------------------------
def test_visits_concentrate_on_the_best_arm_and_follow_the_values():
    game = Bandit(len(ARM_VALUES))
    result = MCTS(game, BanditEvaluator(ARM_VALUES), deterministic(num_simulations=400)).search(
        game.init(1), np.random.default_rng(0))
    visits = result.visit_counts[0]
    assert result.action[0] == 3
    assert visits[3] > 0.5 * 400
    assert list(np.argsort(visits)) == list(np.argsort(ARM_VALUES))
    # Q(root, a) is exactly the arm value, so the root value is a visit-weighted mean.
    expected = (visits * np.array(ARM_VALUES)).sum() / (visits.sum() + 1)
    assert result.root_value[0] == pytest.approx(expected, abs=1e-5)


def test_one_evaluator_call_per_simulation_round_for_the_whole_batch():
    game = Bandit(len(ARM_VALUES))
    evaluator = BanditEvaluator(ARM_VALUES)
    MCTS(game, evaluator, deterministic(num_simulations=50)).search(
        game.init(8), np.random.default_rng(0))
    assert evaluator.calls == 1 + 50  # the roots, then one batch per round


def test_growing_c_explores_more():
    game = Bandit(len(ARM_VALUES))
    flat = MCTS(game, BanditEvaluator(ARM_VALUES), deterministic(num_simulations=400))
    grow = MCTS(game, BanditEvaluator(ARM_VALUES),
                deterministic(num_simulations=400, c_base=10.0))
    best_flat = flat.search(game.init(1), np.random.default_rng(0)).visit_counts[0, 3]
    best_grow = grow.search(game.init(1), np.random.default_rng(0)).visit_counts[0, 3]
    assert best_grow < best_flat  # c = 1.25 + log((1 + N + 10) / 10) > 1.25


def test_relative_fpu_tries_fewer_new_moves_when_things_look_bad():
    # Every arm loses a bit. FPU = 0 makes each untried arm look better than any tried
    # one, so all get tried at once; FPU = parent mean - 1 makes untried arms look
    # worse than the tried ones, so the search stays with fewer arms.
    values = [-0.5, -0.4, -0.6, -0.3, -0.45]
    game = Bandit(len(values))
    absolute = MCTS(game, BanditEvaluator(values), deterministic(num_simulations=10)).search(
        game.init(1), np.random.default_rng(0)).visit_counts[0]
    relative = MCTS(game, BanditEvaluator(values),
                    deterministic(num_simulations=10, fpu=1.0, fpu_relative=True)).search(
        game.init(1), np.random.default_rng(0)).visit_counts[0]
    assert np.all(absolute > 0)
    assert (relative > 0).sum() < len(values)


# --- randomness: per-game, reproducible, batch-independent -----------------------------
def random_positions(game: Game, plies: list[int], seed: int) -> State:
    rng = np.random.default_rng(seed)
    states = []
    for n in plies:
        s = game.init(1)
        for _ in range(n):
            s = game.step(s, [rng.choice(np.flatnonzero(s.legal[0]))])
        assert not s.terminal[0]
        states.append(s)
    return State.concat(states)


@pytest.mark.parametrize("gumbel", [False, True])
def test_batched_search_equals_per_game_search(gumbel):
    game = make_game("gomoku6")
    states = random_positions(game, [0, 3, 6, 9], seed=1)
    config = SearchConfig(num_simulations=48, gumbel=gumbel, add_noise=True, temperature=1.0)
    seeds = [11, 12, 13, 14]
    batched = MCTS(game, UniformEvaluator(), config).search(
        states, [np.random.default_rng(s) for s in seeds])
    for i, seed in enumerate(seeds):
        alone = MCTS(game, UniformEvaluator(), config).search(
            states.take([i]), [np.random.default_rng(seed)])
        np.testing.assert_array_equal(alone.visit_counts[0], batched.visit_counts[i])
        np.testing.assert_array_equal(alone.visit_policy[0], batched.visit_policy[i])
        assert alone.action[0] == batched.action[i]
        assert alone.root_value[0] == batched.root_value[i]


def test_same_seed_same_result_and_other_seeds_differ():
    game = make_game("gomoku6")
    states = random_positions(game, [2, 4], seed=2)
    config = SearchConfig(num_simulations=64)
    runs = [MCTS(game, UniformEvaluator(), config).search(states, np.random.default_rng(s))
            for s in (5, 5, 6)]
    np.testing.assert_array_equal(runs[0].visit_counts, runs[1].visit_counts)
    np.testing.assert_array_equal(runs[0].action, runs[1].action)
    assert not np.array_equal(runs[0].visit_counts, runs[2].visit_counts)


def test_generator_count_must_match_the_batch():
    game = make_game("gomoku6")
    with pytest.raises(ValueError, match="2 generators for 3 games"):
        MCTS(game, UniformEvaluator(), SearchConfig(num_simulations=2)).search(
            game.init(3), [np.random.default_rng(0)] * 2)


# --- evaluator output is checked -------------------------------------------------------
class BadEvaluator:
    def __init__(self, fault: str) -> None:
        self.fault = fault

    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        b, a = legal.shape
        logits, value = np.zeros((b, a), np.float32), np.zeros(b, np.float32)
        if self.fault == "nan value":
            value[-1] = np.nan
        elif self.fault == "nan logits":
            logits[0, 0] = np.nan
        elif self.fault == "logits shape":
            logits = np.zeros((b, a - 1), np.float32)
        elif self.fault == "value shape":
            value = np.zeros((b, 1), np.float32)
        return Evaluation(logits, value)


@pytest.mark.parametrize("fault, message", [
    ("nan value", "non-finite value"),
    ("nan logits", "non-finite policy logits"),
    ("logits shape", "policy_logits of shape"),
    ("value shape", "value of shape"),
])
def test_bad_evaluator_output_raises_evaluation_error(fault, message):
    with pytest.raises(EvaluationError, match=message):
        MCTS(TTT, BadEvaluator(fault), deterministic(num_simulations=8)).search(
            TTT.init(2), np.random.default_rng(0))


# --- root noise -----------------------------------------------------------------------
def test_dirichlet_noise_touches_only_legal_moves():
    legal = np.zeros((3, 9), bool)
    legal[0, [1, 4, 7]] = True
    legal[1, :] = True
    legal[2, [8]] = True
    prior = np.where(legal, 1.0, 0.0) / legal.sum(1, keepdims=True)
    rngs = [np.random.default_rng(i) for i in range(3)]
    noisy = dirichlet_noise(prior, legal, rngs, alpha=None, fraction=0.25)
    assert np.all(noisy[~legal] == 0)
    np.testing.assert_allclose(noisy.sum(axis=1), 1.0, rtol=1e-6)
    assert not np.allclose(noisy[0], prior[0])
    assert noisy[2, 8] == pytest.approx(1.0)  # a forced move stays forced


def test_noise_changes_the_visit_distribution_but_not_the_illegal_moves():
    game = make_game("gomoku6")
    state = random_positions(game, [5], seed=3)
    quiet = MCTS(game, UniformEvaluator(), deterministic(num_simulations=100)).search(
        state, np.random.default_rng(0))
    noisy = MCTS(game, UniformEvaluator(), SearchConfig(num_simulations=100, temperature=0.0)
                 ).search(state, np.random.default_rng(0))
    assert not np.array_equal(quiet.visit_counts, noisy.visit_counts)
    assert np.all(noisy.visit_counts[~state.legal] == 0)
    assert np.all(noisy.visit_policy[~state.legal] == 0)
    assert noisy.visit_policy.sum() == pytest.approx(1.0)


# --- playing the move: temperature ------------------------------------------------------
def test_temperature_zero_plays_the_most_visited_move():
    counts = np.array([[3, 9, 1, 0], [0, 0, 2, 5]])
    actions = sample_actions(counts, np.zeros(2), np.array([0.99, 0.01]))
    np.testing.assert_array_equal(actions, [1, 3])


@pytest.mark.parametrize("temperature, power", [(1.0, 1.0), (0.5, 2.0)])
def test_temperature_samples_in_proportion_to_visits(temperature, power):
    counts = np.array([10, 0, 30, 60])
    n = 20_000
    rng = np.random.default_rng(123)
    actions = sample_actions(np.tile(counts, (n, 1)), np.full(n, temperature), rng.random(n))
    freq = np.bincount(actions, minlength=4) / n
    expected = counts**power / (counts**power).sum()
    assert freq[1] == 0
    # 4.5 standard errors of a binomial share: a correct sampler essentially never fails.
    tolerance = 4.5 * np.sqrt(expected * (1 - expected) / n) + 1e-9
    assert np.all(np.abs(freq - expected) <= tolerance)


def test_temperature_applies_only_to_the_first_plies():
    game = Bandit(len(ARM_VALUES))
    evaluator = BanditEvaluator(ARM_VALUES)
    early = SearchConfig(num_simulations=60, add_noise=False, temperature=1.0,
                         temperature_moves=1)
    late = SearchConfig(num_simulations=60, add_noise=False, temperature=1.0,
                        temperature_moves=0)
    seeds = range(40)
    sampled = {int(MCTS(game, evaluator, early).search(game.init(1), np.random.default_rng(s))
                   .action[0]) for s in seeds}
    played = {int(MCTS(game, evaluator, late).search(game.init(1), np.random.default_rng(s))
                  .action[0]) for s in seeds}
    assert played == {3}
    assert len(sampled) > 1


# --- tree reuse -----------------------------------------------------------------------
def assert_consistent(game: Game, tree, b: int) -> None:
    """Links, visit counts and stored states of game b's tree agree with each other."""
    n = int(tree.num_nodes[b])
    nodes = np.arange(1, n)
    parents, actions = tree.parent[b, nodes], tree.action[b, nodes]
    np.testing.assert_array_equal(tree.children[b, parents, actions], nodes)
    for i in range(n):
        kids = tree.children[b, i][tree.children[b, i] >= 0]
        assert np.all(kids < n)
        if not tree.terminal[b, i]:
            assert tree.visits[b, i] == 1 + tree.visits[b, kids].sum()
    stepped = game.step(tree.states.take(tree.flat(np.full(n - 1, b), parents)), actions)
    assert same_states(stepped, tree.states.take(tree.flat(np.full(n - 1, b), nodes))).all()


def test_reuse_keeps_the_played_subtree():
    config = deterministic(num_simulations=200, reuse_tree=True)
    mcts = MCTS(TTT, UniformEvaluator(), config)
    root = TTT.init(1)
    first = mcts.search(root, np.random.default_rng(0))
    a = int(first.action[0])
    kept = int(first.visit_counts[0, a])
    assert_consistent(TTT, mcts.tree, 0)
    mcts.advance(first.action)
    assert mcts.tree.visits[0, 0] == kept
    assert mcts.tree.parent[0, 0] == -1
    assert_consistent(TTT, mcts.tree, 0)
    child = TTT.step(root, first.action)
    assert same_states(mcts.tree.states.take([0]), child)[0]
    second = mcts.search(child, np.random.default_rng(1))
    assert mcts.tree.visits[0, 0] == kept + 200
    assert_consistent(TTT, mcts.tree, 0)
    assert second.visit_counts.sum() == kept - 1 + 200


def test_reused_tree_gives_the_same_answers_as_a_fresh_one_on_the_bandit():
    game = Bandit(len(ARM_VALUES))
    config = deterministic(num_simulations=300, reuse_tree=True)
    mcts = MCTS(game, BanditEvaluator(ARM_VALUES), config)
    first = mcts.search(game.init(1), np.random.default_rng(0))
    mcts.advance(first.action)
    # Below arm 3 every position is worth values[3] to the root player, i.e. -0.6 to the
    # opponent now to move: the reused and extended tree must still say exactly that.
    second = mcts.search(game.step(game.init(1), first.action), np.random.default_rng(0))
    assert second.root_value[0] == pytest.approx(-ARM_VALUES[3], abs=1e-5)
    assert mcts.tree.num_nodes[0] == first.visit_counts[0, 3] + 300  # no node lost


def test_a_kept_tree_that_outgrows_its_arrays_is_moved_to_larger_ones():
    # One arm: the tree is a chain, so advancing keeps all but the root and it keeps growing.
    game = Bandit(1)
    mcts = MCTS(game, BanditEvaluator([0.5]), deterministic(num_simulations=10, reuse_tree=True))
    state = game.init(2)
    kept = np.zeros(2, int)
    for _ in range(4):
        mcts.search(state, np.random.default_rng(0))
        np.testing.assert_array_equal(mcts.tree.visits[:, 0], kept + 11 - (kept > 0))
        for b in range(2):
            assert_consistent(game, mcts.tree, b)
        mcts.advance(np.zeros(2, int))
        state = game.step(state, np.zeros(2, int))
        kept = mcts.tree.visits[:, 0].copy()
    assert mcts.tree.capacity > 21
    assert kept[0] == 37  # 4 searches of 10 plus the first root's visit, minus 4 roots


def test_reuse_over_several_moves_of_a_batch_keeps_trees_consistent():
    game = make_game("gomoku6")
    mcts = MCTS(game, UniformEvaluator(), SearchConfig(num_simulations=40, reuse_tree=True))
    state = game.init(3)
    rngs = [np.random.default_rng(i) for i in range(3)]
    for _ in range(4):
        result = mcts.search(state, rngs)
        kept = result.visit_counts[np.arange(3), result.action]
        mcts.advance(result.action)
        np.testing.assert_array_equal(mcts.tree.visits[:, 0], kept)
        for b in range(3):
            assert_consistent(game, mcts.tree, b)
        state = game.step(state, result.action)


def test_reuse_starts_fresh_for_an_unexpanded_move_or_another_position():
    game = make_game("gomoku6")
    config = deterministic(num_simulations=5, reuse_tree=True)
    mcts = MCTS(game, UniformEvaluator(), config)
    root = game.init(2)
    result = mcts.search(root, np.random.default_rng(0))
    unvisited = np.flatnonzero(result.visit_counts[0] == 0)[0]
    assert result.action[1] != 35
    actions = np.array([unvisited, result.action[1]])
    mcts.advance(actions)
    np.testing.assert_array_equal(mcts.tree.num_nodes > 0, [False, True])
    # Game 1 is then replaced by another position without reset(): its tree is not reused.
    other = game.step(game.init(2), np.array([unvisited, 35]))
    mcts.search(other, np.random.default_rng(0))
    np.testing.assert_array_equal(mcts.tree.visits[:, 0], [6, 6])


def test_reset_forgets_trees():
    game = Bandit(3)
    mcts = MCTS(game, BanditEvaluator([0.1, 0.2, 0.3]),
                deterministic(num_simulations=10, reuse_tree=True))
    result = mcts.search(game.init(2), np.random.default_rng(0))
    mcts.advance(result.action)
    mcts.reset([0])
    np.testing.assert_array_equal(mcts.tree.num_nodes == 0, [True, False])
    mcts.reset()
    assert np.all(mcts.tree.num_nodes == 0)


def test_without_reuse_advance_is_a_no_op_and_every_search_is_fresh():
    mcts = MCTS(TTT, UniformEvaluator(), deterministic(num_simulations=20))
    result = mcts.search(TTT.init(1), np.random.default_rng(0))
    mcts.advance(result.action)
    mcts.search(TTT.step(TTT.init(1), result.action), np.random.default_rng(0))
    assert mcts.tree.visits[0, 0] == 21


# --- AlphaGo's leaf mixing with rollouts ------------------------------------------------
class LiarEvaluator:
    """Uniform priors and a value that always says the mover is winning."""

    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        b, a = legal.shape
        return Evaluation(np.zeros((b, a), np.float32), np.ones(b, np.float32))


# Every way to finish this game is a draw, so every random playout scores 0.
DEAD_DRAW = """X O X
               . . .
               O X O"""


@pytest.mark.parametrize("lam, root_eval", [(0.0, 1.0), (0.5, 0.5), (1.0, 0.0)])
def test_leaf_values_mix_network_and_rollout(lam, root_eval):
    mcts = MCTS(TTT, LiarEvaluator(), deterministic(num_simulations=30, rollout_mix=lam))
    result = mcts.search(ttt(DEAD_DRAW), np.random.default_rng(0))
    assert mcts.tree.raw_value[0, 0] == pytest.approx(root_eval)
    if lam == 1.0:
        assert result.root_value[0] == 0.0  # nothing but rollouts and drawn endings
    else:
        assert result.root_value[0] != 0.0


def test_rollouts_find_a_forced_win_despite_a_lying_network():
    # X to move: A2 or A1 makes two threats at once (a fork) and wins; nothing wins at once.
    state = ttt("""X O .
                   . X .
                   . . O""")
    for seed in range(5):
        result = MCTS(TTT, LiarEvaluator(), deterministic(num_simulations=200, rollout_mix=1.0)
                      ).search(state, np.random.default_rng(seed))
        assert result.action[0] in (3, 6)


def test_config_rejects_nonsense():
    with pytest.raises(ValueError, match="num_simulations"):
        SearchConfig(num_simulations=0)
    with pytest.raises(ValueError, match="rollout_mix"):
        SearchConfig(rollout_mix=1.5)


class _LyingPrior:
    """All prior mass on one move and a flat value: search alone is led astray."""

    def __init__(self, favourite: int) -> None:
        self.favourite = favourite

    def evaluate(self, obs, legal):
        from zeroforge.shared.search import Evaluation

        logits = np.full(legal.shape, -20.0, np.float32)
        logits[:, self.favourite] = 20.0
        return Evaluation(logits, np.zeros(legal.shape[0], np.float32))


def test_take_immediate_wins_overrides_a_misled_search():
    # X to move can win at 2 (top row); the prior pushes every visit towards 8
    state = ttt("""X X .
                   O O .
                   . . .""")
    misled = MCTS(TTT, _LyingPrior(8), deterministic(num_simulations=4)).search(
        state, np.random.default_rng(0))
    assert misled.action[0] == 8
    fixed = MCTS(TTT, _LyingPrior(8),
                 deterministic(num_simulations=4, take_immediate_wins=True)).search(
        state, np.random.default_rng(0))
    assert fixed.action[0] == 2
    # the training target is still the search's own visit distribution
    np.testing.assert_array_equal(fixed.visit_policy, misled.visit_policy)
