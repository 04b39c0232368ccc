"""Known answers on small trees: visit counts and Q after N simulations, for PUCT, Gumbel
and UCT, computed by hand (small N, arithmetic in the comments) and by independent
reference loops (larger N). A change of the value convention (values in [-1, 1] from the
view of the node's player to move) or a backup bug changes these numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from tests.fakes import ARM_VALUES, TTT, Bandit, BanditEvaluator, ttt
from zeroforge.shared.search import (
    MCTS,
    SearchConfig,
    TreeArrays,
    UCTConfig,
    UniformEvaluator,
    uct_search,
)

C_PUCT = 1.25


def puct(**kw) -> SearchConfig:
    """No noise, most visited move, no rules-only shortcut: the search alone decides."""
    return SearchConfig(**{"add_noise": False, "temperature": 0.0, "take_immediate_wins": False,
                           "c_puct": C_PUCT, **kw})


def root_q(mcts: MCTS) -> np.ndarray:
    """[A] Q of game 0's root actions from the root mover's view (nan if unvisited)."""
    t: TreeArrays = mcts.tree.arrays
    q = np.full(t.children.shape[2], np.nan)
    for a, child in enumerate(t.children[0, 0]):
        if child >= 0 and t.visits[0, child] > 0:
            sign = 1.0 if t.to_play[0, child] == t.to_play[0, 0] else -1.0
            q[a] = sign * t.value_sum[0, child] / t.visits[0, child]
    return q


# --- PUCT on the bandit: Q(root, a) is exactly ARM_VALUES[a] -----------------------------
def bandit_puct_reference(values: list[float], sims: int, c: float) -> list[int]:
    """Root visit counts of PUCT on the bandit: uniform priors, FPU 0, first index wins ties.

    Every node below arm a is worth values[a] to the root player, so Q(a) = values[a] as
    soon as the arm was visited; the root's own evaluation (0) is its first visit.
    """
    prior = 1.0 / len(values)
    n = [0] * len(values)
    for _ in range(sims):
        scale = c * math.sqrt(1 + sum(n))
        scores = [(values[a] if n[a] else 0.0) + scale * prior / (1 + n[a])
                  for a in range(len(values))]
        n[scores.index(max(scores))] += 1
    return n


def test_puct_bandit_six_simulations_by_hand():
    # P = 0.2, c = 1.25, score = Q + c * 0.2 * sqrt(N) / (1 + n), unvisited Q = 0:
    # sim 1 (N=1): all unvisited tie at 0.25 -> arm 0 (Q -0.5)
    # sim 2 (N=2): arm0 -0.5+0.177 = -0.32, unvisited 0.354 -> arm 1 (Q 0)
    # sim 3 (N=3): arm1 0.217, unvisited 0.433 -> arm 2 (Q 0.3)
    # sim 4 (N=4): arm2 0.3+0.25 = 0.55 > unvisited 0.5 -> arm 2 again
    # sim 5 (N=5): arm2 0.3+0.186 = 0.486 < unvisited 0.559 -> arm 3 (Q 0.6)
    # sim 6 (N=6): arm3 0.6+0.306 = 0.906 > arm2 0.504, unvisited 0.612 -> arm 3
    game = Bandit(len(ARM_VALUES))
    mcts = MCTS(game, BanditEvaluator(ARM_VALUES), puct(num_simulations=6))
    result = mcts.search(game.init(1), np.random.default_rng(0))
    assert result.visit_counts[0].tolist() == [1, 1, 2, 2, 0]
    assert result.action[0] == 2  # the first of the most visited
    np.testing.assert_allclose(root_q(mcts)[:4], ARM_VALUES[:4], rtol=1e-6)
    assert np.isnan(root_q(mcts)[4])
    # Root value: the root's own 0 plus the backed-up arm values, over 7 visits.
    assert result.root_value[0] == pytest.approx((-0.5 + 0.0 + 0.6 + 1.2) / 7, rel=1e-6)
    # Stored from each node's mover's view: arm nodes belong to the second player.
    t = mcts.tree.arrays
    arm3 = t.children[0, 0, 3]
    assert t.to_play[0, arm3] == 1 and t.value_sum[0, arm3] == pytest.approx(-1.2, rel=1e-6)
    assert t.raw_value[0, arm3] == pytest.approx(-0.6, rel=1e-6)
    assert t.visits[0, 0] == 7 and t.num_nodes[0] == 7


@pytest.mark.parametrize("sims", [25, 200])
def test_puct_bandit_visits_match_the_reference(sims):
    game = Bandit(len(ARM_VALUES))
    mcts = MCTS(game, BanditEvaluator(ARM_VALUES), puct(num_simulations=sims))
    result = mcts.search(game.init(3), np.random.default_rng(0))
    expected = bandit_puct_reference(ARM_VALUES, sims, C_PUCT)
    assert result.visit_counts.tolist() == [expected] * 3
    visited = np.array(expected) > 0
    np.testing.assert_allclose(root_q(mcts)[visited], np.array(ARM_VALUES)[visited], rtol=1e-6)
    root = (np.array(expected) * ARM_VALUES).sum() / (1 + sims)
    np.testing.assert_allclose(result.root_value, root, rtol=1e-5)


# --- PUCT on a two-move tic-tac-toe tree --------------------------------------------------
# O to move with two empty cells: 7 completes O's middle column (win); 6 blocks X's left
# column, after which X's forced 7 fills the board (draw).
TWO_LEFT = """X O X
              X O O
              . . X"""


@dataclass
class Node:
    """A node of an explicit game tree for the reference search (mover's-view values)."""

    to_play: int
    value: float
    terminal: bool = False
    children: dict[int, Node] = field(default_factory=dict)
    visits: int = 0
    value_sum: float = 0.0


def two_left_tree() -> Node:
    """The whole game tree of TWO_LEFT, values from each node's mover's view."""
    draw = Node(to_play=1, value=0.0, terminal=True)  # O "to move" on a full board
    block = Node(to_play=0, value=0.0, children={7: draw})  # uniform evaluator: 0
    win = Node(to_play=0, value=-1.0, terminal=True)  # X to move, O has won
    return Node(to_play=1, value=0.0, children={6: block, 7: win})


def reference_puct(root: Node, sims: int, c: float) -> None:
    """Textbook PUCT over an explicit tree (uniform priors, FPU 0, first action wins ties)."""
    root.visits, root.value_sum = 1, root.value
    for _ in range(sims):
        path = [root]
        node = root
        while not node.terminal:
            scale = c * math.sqrt(node.visits) / len(node.children)
            best, best_score = None, -math.inf
            for a in sorted(node.children):
                child = node.children[a]
                q = 0.0
                if child.visits:
                    q = child.value_sum / child.visits
                    q = q if child.to_play == node.to_play else -q
                score = q + scale / (1 + child.visits)
                if score > best_score:
                    best, best_score = child, score
            path.append(best)
            node = best
            if node.visits == 0:
                break
        v = node.value
        for i in range(len(path) - 1, -1, -1):
            path[i].visits += 1
            path[i].value_sum += v
            if i > 0 and path[i - 1].to_play != path[i].to_play:
                v = -v


def test_puct_two_left_three_simulations_by_hand():
    # P = 0.5. sim 1 (N=1): both unvisited, 0.625 each -> 6 (blocks; value 0).
    # sim 2 (N=2): 6 scores 0 + 1.768*0.5/2 = 0.44, 7 unvisited 0.88 -> 7: O wins, stored
    #   as -1 for X (to move there), +1 for O at the root.
    # sim 3 (N=3): 7 scores 1 + 0.54 > 6's 0.54 -> 7 again (a terminal leaf, backed up again).
    mcts = MCTS(TTT, UniformEvaluator(), puct(num_simulations=3))
    result = mcts.search(ttt(TWO_LEFT), np.random.default_rng(0))
    assert result.visit_counts[0, [6, 7]].tolist() == [1, 2]
    np.testing.assert_array_equal(root_q(mcts)[[6, 7]], [0.0, 1.0])
    t = mcts.tree.arrays
    win = t.children[0, 0, 7]
    assert t.terminal[0, win] and t.raw_value[0, win] == -1.0 and t.value_sum[0, win] == -2.0
    assert t.visits[0, 0] == 4 and t.value_sum[0, 0] == 2.0
    assert result.root_value[0] == 0.5 and result.action[0] == 7


@pytest.mark.parametrize("sims", [10, 60])
def test_puct_two_left_matches_the_reference(sims):
    root = two_left_tree()
    reference_puct(root, sims, C_PUCT)
    mcts = MCTS(TTT, UniformEvaluator(), puct(num_simulations=sims))
    result = mcts.search(ttt(TWO_LEFT), np.random.default_rng(0))
    for a in (6, 7):
        child = root.children[a]
        assert result.visit_counts[0, a] == child.visits, a
        assert root_q(mcts)[a] == pytest.approx(-child.value_sum / child.visits)
    assert result.root_value[0] == pytest.approx(root.value_sum / root.visits)
    block = mcts.tree.children[0, 0, 6]
    assert mcts.tree.visits[0, block] == root.children[6].visits


# --- Gumbel on the bandit -----------------------------------------------------------------
def test_gumbel_bandit_eight_simulations_by_hand():
    # No noise, m = 5 arms, ceil(log2 5) = 3 phases. Phase 0: max(1, 8 // 15) = 1 visit
    # each (5 sims). Halving keeps the 3 best by log prior + σ(q): arms 3, 2, 4 (Q 0.6, 0.3,
    # 0.1). Phase 1: max(1, 8 // 9) = 1 visit each, in index order (equal bases): 8 sims.
    game = Bandit(len(ARM_VALUES))
    config = SearchConfig(num_simulations=8, gumbel=True, add_noise=False,
                          take_immediate_wins=False)
    mcts = MCTS(game, BanditEvaluator(ARM_VALUES), config)
    result = mcts.search(game.init(1), np.random.default_rng(0))
    assert result.visit_counts[0].tolist() == [1, 1, 2, 2, 2]
    assert result.action[0] == 3
    np.testing.assert_allclose(root_q(mcts), ARM_VALUES, rtol=1e-6)
    # Every arm visited: completed Q = Q, σ(q) = (c_visit + max N) * c_scale * (q + 1) / 2.
    sigma = (50.0 + 2) * 1.0 * (np.array(ARM_VALUES) + 1) / 2
    expected = np.exp(sigma - sigma.max()) / np.exp(sigma - sigma.max()).sum()
    np.testing.assert_allclose(result.visit_policy[0], expected, rtol=1e-5, atol=1e-7)
    assert result.root_value[0] == pytest.approx(
        (-0.5 + 0.0 + 2 * 0.3 + 2 * 0.6 + 2 * 0.1) / 9, rel=1e-6)


# --- UCT on the two-move tree: rollouts there are forced, so the search is exact ----------
def uct_reference(sims: int, c: float = math.sqrt(2.0)) -> tuple[int, int]:
    """Visits of moves 6 (draw: win rate 1/2 for O) and 7 (win: 1) after ``sims`` playouts.

    The first two playouts try each move once (random order, same counts); then UCB1
    rate + c * sqrt(ln N / n), ties to the lower action.
    """
    n6, n7 = 1, 1
    for _ in range(sims - 2):
        log_n = math.log(n6 + n7)
        if 0.5 + c * math.sqrt(log_n / n6) >= 1.0 + c * math.sqrt(log_n / n7):
            n6 += 1
        else:
            n7 += 1
    return n6, n7


def test_uct_two_left_six_playouts_by_hand():
    # After one try each (6: 1/2, 7: 1), with c = 1.414:
    # p3 (N=2): 6: 0.5+1.177 = 1.68, 7: 1+1.177 = 2.18 -> 7
    # p4 (N=3): 6: 0.5+1.482 = 1.98, 7: 1+1.048 = 2.05 -> 7
    # p5 (N=4): 6: 0.5+1.665 = 2.17, 7: 1+0.961 = 1.96 -> 6
    # p6 (N=5): 6: 0.5+1.269 = 1.77, 7: 1+1.035 = 2.04 -> 7
    for seed in range(3):
        result = uct_search(TTT, ttt(TWO_LEFT), UCTConfig(playouts=6, solver=False),
                            np.random.default_rng(seed))
        assert result.visits[0, [6, 7]].tolist() == [2, 4]
        assert result.action[0] == 7 and result.value[0] == 1.0
        assert not result.proven[0]  # without the solver only the finished games are proven


@pytest.mark.parametrize("playouts", [20, 300])
def test_uct_two_left_matches_the_reference(playouts):
    result = uct_search(TTT, ttt(TWO_LEFT).repeat(2), UCTConfig(playouts=playouts, solver=False),
                        np.random.default_rng(1))
    assert result.visits[:, [6, 7]].tolist() == [list(uct_reference(playouts))] * 2


def test_uct_solver_proves_the_win_after_one_playout():
    # The decisive-move check expands 7 first; a child that is a proven win for the root's
    # mover proves the root, which ends the search.
    result = uct_search(TTT, ttt(TWO_LEFT), UCTConfig(playouts=100), np.random.default_rng(0))
    assert result.visits[0].tolist() == [0] * 7 + [1, 0]
    assert result.proven[0] and result.value[0] == 1.0 and result.playouts[0] == 1


def test_uct_solver_proves_a_draw_through_two_plies():
    # O to move; X threatens 8 (right column). O's 6 loses (X plays 8), O's 8 leaves X
    # only 6, a draw. Both children proven: the root is a proven draw, played at 8.
    state = ttt("""X O X
                   O O X
                   . X .""")
    result = uct_search(TTT, state, UCTConfig(playouts=500), np.random.default_rng(0))
    assert result.action[0] == 8
    assert result.proven[0] and result.value[0] == 0.0
    assert result.playouts[0] < 500  # the proof ended the search
