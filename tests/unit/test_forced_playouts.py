"""Forced playouts and policy-target pruning (KataGo) on toy problems with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fakes import TTT, Bandit, BanditEvaluator
from zeroforge.shared.games import make_game
from zeroforge.shared.search import (
    ILLEGAL,
    MCTS,
    UNEXPANDED,
    SearchConfig,
    UniformEvaluator,
    forced_root_pick,
    prune_forced_visits,
)

# Arm 0 is clearly bad (-0.9 against the best arm's 0.6) and has a small prior: PUCT alone
# gives it about one visit, forced playouts about sqrt(2 · 0.1 · 400) ≈ 9.
VALUES = [-0.9, 0.0, 0.3, 0.6, 0.1]
LOGITS = np.log([0.1, 0.2, 0.2, 0.3, 0.2])
BEST = 3


def bandit_search(k: float, prune: bool = True, noise_weight: float = 0.0, seed: int = 0,
                  batch: int = 1, **kw):
    """One noised search of the bandit. ``noise_weight`` 0 keeps root noise switched on
    (so forced playouts act) but weightless, so the root priors are exactly ``LOGITS``'."""
    game = Bandit(len(VALUES))
    config = SearchConfig(num_simulations=400, forced_playouts_k=k, prune_policy_target=prune,
                          dirichlet_fraction=noise_weight, take_immediate_wins=False, **kw)
    mcts = MCTS(game, BanditEvaluator(VALUES, LOGITS), config)
    result = mcts.search(game.init(batch), [np.random.default_rng([seed, b])
                                            for b in range(batch)])
    return result, mcts.root_prior


def target_counts(result, b: int = 0) -> np.ndarray:
    """The integer counts behind a pruned target: the most visited move keeps its visits."""
    best = result.visit_counts[b].argmax()
    return result.visit_policy[b] / result.visit_policy[b, best] * result.visit_counts[b, best]


# --- forced playouts -------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_noised_root_child_gets_its_forced_visits(seed):
    # Real Dirichlet noise here: P(c) in the bound is the noised prior the search used.
    result, prior = bandit_search(2.0, noise_weight=0.25, seed=seed, batch=4)
    total = result.visit_counts.sum(axis=1, keepdims=True)
    assert np.all(result.visit_counts >= np.floor(np.sqrt(2.0 * prior * total)))
    # Without forcing the bad arm stays far below that bound: the check above can fail.
    plain, prior = bandit_search(0.0, noise_weight=0.25, seed=seed, batch=4)
    total = plain.visit_counts.sum(axis=1, keepdims=True)
    assert np.all(plain.visit_counts[:, 0] < np.sqrt(2.0 * prior[:, 0] * total[:, 0]) - 4)


def test_many_forced_children_each_get_about_their_share_on_gomoku():
    # 36 moves, k = 8: the bound (up to ~15 visits) is above what the uniform evaluator's
    # flat values give each move on their own (~5), and several moves compete for it.
    game = make_game("gomoku6")
    config = SearchConfig(num_simulations=200, forced_playouts_k=8.0)
    mcts = MCTS(game, UniformEvaluator(), config)
    result = mcts.search(game.init(4), [np.random.default_rng(s) for s in range(4)])
    legal = mcts.root_prior > 0
    need = np.sqrt(8.0 * mcts.root_prior * result.visit_counts.sum(axis=1, keepdims=True))
    assert need[legal].max() > 1.5 * result.visit_counts.sum(axis=1).max() / 36
    assert np.all(result.visit_counts[legal] >= need[legal] - 2)


def root_with_children(child_visits: list[int | None]):
    """visits [1, N] and children [1, 1 + A, A] of a root whose action a leads to a node
    with ``child_visits[a]`` visits (None: unexpanded); the root's visits are 1 + their
    sum. The last action is illegal."""
    a = len(child_visits) + 1
    visits = np.zeros((1, a + 1), np.int32)
    children = np.full((1, a + 1, a), ILLEGAL, np.int32)
    for i, n in enumerate(child_visits):
        children[0, 0, i] = UNEXPANDED if n is None else i + 1
        visits[0, i + 1] = n or 0
    visits[0, 0] = 1 + visits[0, 1:].sum()
    return visits, children


def test_the_child_furthest_below_its_forced_count_is_picked():
    # Σ N = 100, k = 2: n_forced = sqrt(200 · P) = 10, 7.75, 6.32, 4.47, for visits
    # 86, 2, 0 (unexpanded) and 12: arms 1 and 2 are owed 5.75 and 6.32 visits.
    visits, children = root_with_children([86, 2, None, 12])
    prior = np.array([0.5, 0.3, 0.2, 0.1, 0.4])  # the illegal move's prior is not read
    assert forced_root_pick(visits, children, 0, prior, 2.0) == 2
    children[0, 0, 2] = ILLEGAL
    assert forced_root_pick(visits, children, 0, prior, 2.0) == 1
    # k = 0.04 makes every n_forced at most 1.4: arm 2 alone was below (now illegal).
    assert forced_root_pick(visits, children, 0, prior, 0.04) == -1


def test_forced_playouts_need_root_noise():
    # Evaluation-style searches (no noise) are exactly those without the feature.
    quiet = {"add_noise": False, "temperature": 0.0}
    off, _ = bandit_search(0.0, **quiet)
    on, _ = bandit_search(2.0, **quiet)
    np.testing.assert_array_equal(on.visit_counts, off.visit_counts)
    np.testing.assert_array_equal(on.visit_policy, off.visit_policy)


# --- policy-target pruning -------------------------------------------------------------
def test_pruning_removes_the_forced_visits_of_a_clearly_bad_arm():
    forced, prior = bandit_search(2.0)
    total = forced.visit_counts[0].sum()
    assert forced.visit_counts[0, 0] >= np.floor(np.sqrt(2.0 * prior[0, 0] * total))
    assert forced.visit_policy[0, 0] == 0.0  # gone from the training target
    counts = target_counts(forced)
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-3)  # whole visits
    assert counts[BEST] == forced.visit_counts[0, BEST]
    assert np.all(counts <= forced.visit_counts[0] + 1e-3)
    # Taking the forced visits out gives back what the search does without them, give
    # or take a visit (the bad arm's lone unforced visit is pruned too).
    plain, _ = bandit_search(0.0)
    others = [a for a in range(len(VALUES)) if a != BEST]
    np.testing.assert_allclose(counts[others], plain.visit_counts[0, others], atol=1.001)


def test_without_pruning_the_target_keeps_the_forced_visits():
    unpruned, _ = bandit_search(2.0, prune=False)
    counts = unpruned.visit_counts[0]
    np.testing.assert_allclose(unpruned.visit_policy[0], counts / counts.sum(), rtol=1e-6)
    assert unpruned.visit_policy[0, 0] > 0


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_move_played_follows_the_unpruned_visits(temperature):
    for seed in range(6):
        pruned, _ = bandit_search(2.0, prune=True, seed=seed, temperature=temperature)
        kept, _ = bandit_search(2.0, prune=False, seed=seed, temperature=temperature)
        np.testing.assert_array_equal(pruned.visit_counts, kept.visit_counts)
        assert pruned.action[0] == kept.action[0]


def test_prune_forced_visits_by_hand():
    # c = 1, N = 100 at the root: c·sqrt(N) = 10, Σ N(c) = 99, k = 2.
    # Best (arm 0): 0.5 + 10 · 0.5 / 81 = 0.5617.
    # Arm 1: n_forced = sqrt(2·0.2·99) = 6.29, so 10 may drop to 3.71 at the lowest; its
    #   score 2 / (1 + n) stays below 0.5617 down to n = 3: the forced bound stops it at 4.
    # Arm 2: 0.3 + 1 / (1 + n) reaches 0.633 at n = 2: the PUCT bound stops it at 3.
    # Arm 3: -0.5 + 1 / (1 + n) is 0.5 even at n = 0: all 4 go.
    # Arm 4: one visit, already scored above the best: nothing subtracted, but pruned.
    counts = np.array([[80, 10, 4, 4, 1, 0],
                       # A tie for most visited: the first keeps its visits; the second,
                       # scored as well as the first, loses nothing (nor does arm 3,
                       # whose 2 visits score 0.34 > 0.086 after one subtraction).
                       [0, 7, 7, 2, 0, 0]])
    q = np.array([[0.5, 0.0, 0.3, -0.5, 0.9, 0.0],
                  [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    prior = np.array([[0.5, 0.2, 0.1, 0.1, 0.05, 0.05],
                      np.full(6, 1 / 6)])
    out = prune_forced_visits(counts, q, prior, np.array([100, 17]), c_puct=1.0, c_base=None,
                              forced_k=2.0)
    np.testing.assert_array_equal(out, [[80, 4, 3, 0, 0, 0], [0, 7, 7, 2, 0, 0]])
    assert out.dtype == np.int32


def test_a_growing_c_prunes_less():
    # c_base makes c (and every exploration bonus) larger, so the rivals' scores reach
    # the best's sooner: the PUCT bound keeps more of arm 2's visits.
    counts = np.array([[80, 0, 12]])
    q = np.array([[0.5, 0.0, 0.3]])
    prior = np.array([[0.5, 0.2, 0.3]])
    flat = prune_forced_visits(counts, q, prior, np.array([93]), 1.0, None, 8.0)
    grown = prune_forced_visits(counts, q, prior, np.array([93]), 1.0, 10.0, 8.0)
    assert grown[0, 2] > flat[0, 2] > 1


# --- unchanged when off; config ---------------------------------------------------------
def test_with_the_features_off_searches_are_bit_for_bit_as_before():
    config = SearchConfig(num_simulations=60)
    explicit = SearchConfig(num_simulations=60, forced_playouts_k=0.0, prune_policy_target=False)
    results = [MCTS(TTT, UniformEvaluator(), c).search(
        TTT.init(2), [np.random.default_rng(7), np.random.default_rng(8)])
        for c in (config, explicit)]
    for r in results:
        # Recorded with the search before forced playouts existed (dev at 5f6cca5), with
        # numpy's Dirichlet and uniform streams of these seeds.
        np.testing.assert_array_equal(r.visit_counts, [[7, 7, 6, 7, 6, 8, 7, 7, 5],
                                                       [5, 5, 9, 8, 9, 6, 6, 5, 7]])
        np.testing.assert_array_equal(r.action, [5, 3])
    np.testing.assert_array_equal(results[0].visit_policy, results[1].visit_policy)


def test_forced_playouts_are_refused_with_gumbel_search():
    with pytest.raises(ValueError, match="forced_playouts_k > 0 is for PUCT search"):
        SearchConfig(gumbel=True, forced_playouts_k=2.0)


def test_gumbel_search_ignores_prune_policy_target():
    game = Bandit(len(VALUES))
    results = [MCTS(game, BanditEvaluator(VALUES, LOGITS),
                    SearchConfig(num_simulations=50, gumbel=True, prune_policy_target=p)
                    ).search(game.init(1), np.random.default_rng(0)) for p in (True, False)]
    np.testing.assert_array_equal(results[0].visit_policy, results[1].visit_policy)
    np.testing.assert_array_equal(results[0].visit_counts, results[1].visit_counts)


@pytest.mark.parametrize("k", [-1.0, float("inf"), float("nan")])
def test_forced_playouts_k_must_be_finite_and_not_negative(k):
    with pytest.raises(ValueError, match="forced_playouts_k must be finite and >= 0"):
        SearchConfig(forced_playouts_k=k)
