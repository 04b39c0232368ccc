"""Pure UCT: Monte Carlo tree search with UCB1 and uniformly random rollouts, no network.

This is the baseline player and the fixed yardstick "pure MCTS with N playouts". Each move
builds a fresh tree; each playout selects by UCB1 down to a node with an untried legal
action, expands that one action, plays a uniformly random rollout to the end of the game
and backs the result up the path. The most visited root action is played.

The trees are ``shared.search.tree.Tree`` (the same arrays as PUCT and Gumbel) with the
same value convention: values in [-1, 1] from the view of the node's player to move.
UCB1 is used in its textbook form on win rates: a child with parent-view value sum s over
n playouts has win rate (n + s) / (2n) in [0, 1] (win 1, draw 1/2, loss 0), and the score
is ``rate + c * sqrt(ln N_parent / n)`` with ``c = sqrt(2)`` by default.

Solver (``UCTConfig.solver``, on by default; off gives textbook UCT). Random rollouts
alone do not see a one-move threat reliably: on gomoku 6x6 a move that ignores the
opponent's three gets about as many visits as the block, because each of ~30 replies gets
~30 visits and the refutation is found only by chance. Two rule-only additions fix that
without any game knowledge:

- decisive moves: the first time a node is expanded, all its legal actions are tried with
  one batched ``step``; if one wins on the spot it is expanded first;
- MCTS-Solver: finished games are proven results, and a node is proven once one child is a
  proven win for its mover or all its children are proven. Proven losses are never
  selected again, a proven node is scored as proven, and the root plays a proven win.

Batching: B games are searched together and each tree is a set of arrays with the tree
axis first (``visits [B, N]``, ``children [B, N, A]``, ...: ``TreeArrays``). One playout
round advances all B trees at once: one numba kernel descends every tree, one
``game.step`` expands all B leaves, one batched rollout plays all new positions out, one
numba kernel backs up.
Nearly all the time goes to the rollouts: a game's compiled ``random_playout`` (Go,
gomoku, five-stone chess: every game of the registry) plays them in one kernel call (7
times the playouts/s of stepping on gomoku 6x6, 15-18 on five-stone chess,
docs/lab/time-to-strength.md); a game without one steps them a ply at a time.
Memory per search: about 4 * B * (playouts + 1) * A bytes for the trees (the priors'
pages are allocated but never touched), plus, with ``store_states``, B * (playouts + 1)
copies of a game state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from zeroforge.shared.games import Game, State
from zeroforge.shared.search.rollout import mover_view, random_outcomes
from zeroforge.shared.search.tactics import winning_actions
from zeroforge.shared.search.tree import ILLEGAL, UNEXPANDED, Tree, TreeArrays, backup_kernel, flip


@dataclass(frozen=True)
class UCTConfig:
    """Settings of the pure-UCT player."""

    playouts: int = 1000
    """Playouts (selection + expansion + rollout + backup) per move, per game."""
    c: float = math.sqrt(2.0)
    """UCB1 exploration constant, for win-rate values in [0, 1]."""
    solver: bool = True
    """Decisive-move check on first expansion plus MCTS-Solver proofs (see module doc);
    False gives textbook UCT."""
    store_states: bool = True
    """Keep every tree node's game state (one State of batch B*N) and take the leaf's; if
    False, re-derive a leaf's state by replaying its path from the root through ``step``
    (less memory, for games with large states; slower: see benchmarks/bench_uct.py)."""

    def __post_init__(self) -> None:
        if self.playouts < 1:
            raise ValueError(f"UCTConfig.playouts must be >= 1, got {self.playouts}")
        if not self.c >= 0.0:
            raise ValueError(f"UCTConfig.c must be >= 0, got {self.c}")


@dataclass(frozen=True)
class UCTResult:
    """What one search returns for B root positions."""

    action: np.ndarray
    """[B] int32: the root action to play."""
    visits: np.ndarray
    """[B, A] int32: visit counts of the root's children (0 for unexpanded or illegal)."""
    value: np.ndarray
    """[B] float32 in [-1, 1]: expected result of ``action`` for the player to move."""
    proven: np.ndarray
    """[B] bool: the root's result is proven (``value`` is then exactly -1, 0 or +1)."""
    playouts: np.ndarray
    """[B] int32: playouts run (fewer than configured when every root got proven early)."""


@numba.njit(cache=True)
def _descend(tree, c, solver, uniforms, path, depth, expand, fresh):
    """Walk every tree of ``tree`` (``Tree.packed``) from the root by UCB1 to a proven node
    or one with an untried action.

    Writes ``path [B, D]`` (nodes from the root), ``depth [B]`` (index of the leaf in
    ``path``), ``expand [B]`` (a uniformly chosen untried legal action at the leaf, -1 if
    the leaf is proven) and ``fresh [B]`` (the leaf has no child yet).
    """
    t = TreeArrays(*tree)
    visits, value_sum, raw_value, children, to_play, proven = (
        t.visits, t.value_sum, t.raw_value, t.children, t.to_play, t.proven)
    num_actions = children.shape[2]
    for b in range(children.shape[0]):
        node = 0
        d = 0
        path[b, 0] = 0
        expand[b] = -1
        fresh[b] = False
        while not proven[b, node]:
            untried = 0
            num_legal = 0
            for a in range(num_actions):
                child = children[b, node, a]
                if child != ILLEGAL:
                    num_legal += 1
                    if child == UNEXPANDED:
                        untried += 1
            if untried > 0:
                fresh[b] = untried == num_legal
                pick = min(int(uniforms[b] * untried), untried - 1)
                for a in range(num_actions):
                    if children[b, node, a] == UNEXPANDED:
                        if pick == 0:
                            expand[b] = a
                            break
                        pick -= 1
                break
            log_n = math.log(visits[b, node])
            best = -1.0
            best_child = -1
            for a in range(num_actions):
                child = children[b, node, a]
                if child < 0:
                    continue
                if solver and proven[b, child] and flip(
                        raw_value[b, child], to_play[b, child], to_play[b, node]) < 0:
                    continue  # a proven loss stays lost: spend no more playouts on it
                n = visits[b, child]
                # Win rate (n + s) / 2n: exactly the [0, 1] win count over n, as in UCB1.
                s = flip(value_sum[b, child], to_play[b, child], to_play[b, node])
                score = (n + s) / (2.0 * n) + c * math.sqrt(log_n / n)
                if score > best:
                    best = score
                    best_child = child
            if best_child < 0:
                break  # cannot happen while proofs are backed up; a safe stop regardless
            node = best_child
            d += 1
            path[b, d] = node
        depth[b] = d


@numba.njit(cache=True)
def _try_prove(children, to_play, proven, raw_value, b, node):
    """Mark ``node`` proven if a child is a proven win for its mover or all are proven."""
    best = -2.0
    complete = True
    for a in range(children.shape[2]):
        child = children[b, node, a]
        if child == ILLEGAL:
            continue
        if child < 0 or not proven[b, child]:
            complete = False
            continue
        v = flip(raw_value[b, child], to_play[b, child], to_play[b, node])
        if v > 0:
            proven[b, node] = True
            raw_value[b, node] = v
            return True
        best = max(best, v)
    if complete and best > -2.0:
        proven[b, node] = True
        raw_value[b, node] = best
        return True
    return False


@numba.njit(cache=True)
def _expand_and_backup(tree, path, depth, expand, new_legal, new_to_play, new_terminal,
                       new_value, solver, new_node, leaf):
    """Add each tree's expanded child, back the playout's result up, propagate proofs.

    ``tree`` is ``Tree.packed``. For the new node of tree b: ``new_legal [B, A]``,
    ``new_to_play [B]``, ``new_terminal [B]`` (a finished game: proven) and ``new_value
    [B]`` (its exact result if terminal, else the rollout's, mover's view). A proven leaf
    or new node is scored by its proven value. Writes the new node's index to
    ``new_node [B]`` (-1 if none) and the node whose value is backed up to ``leaf [B]``.
    """
    t = TreeArrays(*tree)
    children, proven, to_play, raw_value = t.children, t.proven, t.to_play, t.raw_value
    for b in range(children.shape[0]):
        d = depth[b]
        node = path[b, d]
        new_node[b] = -1
        a = expand[b]
        if a >= 0:
            leaf_node = node
            node = t.num_nodes[b]
            t.num_nodes[b] += 1
            children[b, leaf_node, a] = node
            t.parent[b, node] = leaf_node
            t.action[b, node] = a
            new_node[b] = node
            for i in range(new_legal.shape[1]):
                children[b, node, i] = UNEXPANDED if new_legal[b, i] else ILLEGAL
            to_play[b, node] = new_to_play[b]
            t.terminal[b, node] = new_terminal[b]
            proven[b, node] = new_terminal[b]
            raw_value[b, node] = new_value[b]
            d += 1
        leaf[b] = node
        if solver and proven[b, node]:
            # Walk the proof up while ancestors become proven too.
            up = d - 1
            while up >= 0 and _try_prove(children, to_play, proven, raw_value, b, path[b, up]):
                up -= 1
    backup_kernel(tree, np.arange(children.shape[0]), leaf)


def _replay(game: Game, roots: State, trees: Tree, rows: np.ndarray, path: np.ndarray,
            depth: np.ndarray) -> State:
    """States of the leaves ``path[r, depth[r]]`` of trees ``rows``, replayed from the roots."""
    cur = roots.take(rows)
    for d in range(1, int(depth[rows].max(initial=0)) + 1):
        sel = np.flatnonzero(depth[rows] >= d)
        acts = trees.action[rows[sel], path[rows[sel], d]]
        if sel.size == cur.batch_size:
            cur = game.step(cur, acts)
        else:
            cur.put(sel, game.step(cur.take(sel), acts))
    return cur


def uct_search(game: Game, roots: State, config: UCTConfig,
               rng: np.random.Generator) -> UCTResult:
    """Search the B running positions ``roots`` with ``config.playouts`` playouts each.

    Raises ``ValueError`` if a root is a finished game.
    """
    if roots.terminal.any():
        raise ValueError("uct_search: roots must be running games")
    b = roots.batch_size
    n_max = config.playouts + 1  # each playout adds at most one node
    num_actions = game.spec.num_actions
    trees = Tree.allocate(roots, n_max, num_actions, store_states=config.store_states)
    t = trees.arrays
    t.children[:, 0] = np.where(roots.legal, UNEXPANDED, ILLEGAL)
    t.to_play[:, 0] = roots.to_play
    t.num_nodes[:] = 1
    nodes = trees.states  # flat index tree * n_max + node; None: replay paths instead
    max_depth = min(config.playouts, game.spec.max_moves) + 2
    path = np.zeros((b, max_depth), np.int32)
    depth = np.zeros(b, np.int32)
    expand = np.zeros(b, np.int32)
    fresh = np.zeros(b, bool)
    new_node = np.zeros(b, np.int32)
    leaf_node = np.zeros(b, np.int32)
    done = 0
    while done < config.playouts:
        done += 1
        _descend(trees.packed, config.c, config.solver, rng.random(b), path, depth, expand, fresh)
        grow = np.flatnonzero(expand >= 0)
        new_legal = np.zeros((b, num_actions), bool)
        new_to_play = np.zeros(b, np.int8)
        new_terminal = np.zeros(b, bool)
        outcome = np.zeros(b, np.int8)  # first player's view
        if grow.size:
            leaf = path[grow, depth[grow]]
            if nodes is not None:
                leaf_states = nodes.take(grow * n_max + leaf)
            else:
                leaf_states = _replay(game, roots, trees, grow, path, depth)
            if config.solver:
                _prefer_decisive(game, leaf_states, fresh[grow], expand, grow)
            child_states = game.step(leaf_states, expand[grow])
            new_legal[grow] = game.legal_mask(child_states)
            new_to_play[grow] = game.to_play(child_states)
            ended = game.terminal(child_states)
            new_terminal[grow] = ended
            outcome[grow] = np.where(ended, game.outcome(child_states), 0)
            play = np.flatnonzero(~ended)
            if play.size:
                sub = child_states if play.size == grow.size else child_states.take(play)
                outcome[grow[play]] = random_outcomes(game, sub, rng)
        # The new node's value (exact if the game ended there), from its mover's view.
        new_value = mover_view(outcome, new_to_play)
        _expand_and_backup(trees.packed, path, depth, expand, new_legal, new_to_play, new_terminal,
                           new_value, config.solver, new_node, leaf_node)
        if nodes is not None and grow.size:
            nodes.put(grow * n_max + new_node[grow], child_states)
        if t.proven[:, 0].all():
            break  # every root is solved: more playouts cannot change a move
    return _root_result(trees, done)


def _prefer_decisive(game: Game, leaf_states: State, fresh: np.ndarray, expand: np.ndarray,
                     grow: np.ndarray) -> None:
    """Where a leaf is expanded for the first time and can win on the spot, expand that move.

    ``leaf_states`` and ``fresh`` are [G] for the trees ``grow`` [G]; edits ``expand`` [B].
    """
    first = np.flatnonzero(fresh)
    if first.size == 0:
        return
    sub = leaf_states if first.size == leaf_states.batch_size else leaf_states.take(first)
    wins = winning_actions(game, sub)
    hit = wins >= 0
    expand[grow[first[hit]]] = wins[hit]


def _root_result(trees: Tree, playouts: int) -> UCTResult:
    t = trees.arrays
    b = t.visits.shape[0]
    child = t.children[:, 0, :]  # [B, A]
    exists = child >= 0
    safe = np.where(exists, child, 0)
    visits = np.where(exists, np.take_along_axis(t.visits, safe, axis=1), 0)
    # Values of the children seen from the root's mover (the tree's one convention).
    flip = np.where(np.take_along_axis(t.to_play, safe, axis=1) == t.to_play[:, :1], 1, -1)
    value_sum = np.where(exists, np.take_along_axis(t.value_sum, safe, axis=1) * flip, 0.0)
    rate = (visits + value_sum) / (2.0 * np.maximum(visits, 1))  # win rate in [0, 1]
    proven = exists & np.take_along_axis(t.proven, safe, axis=1)
    proven_value = np.take_along_axis(t.raw_value, safe, axis=1).astype(np.int64) * flip
    # Visits are integers, so adding half the win rate only breaks ties; a proven win
    # outranks everything and a proven loss comes after every unproven move.
    key = visits + 0.5 * rate
    key = np.where(proven & (proven_value > 0), key + 4.0 * (visits.max() + 1), key)
    key = np.where(proven & (proven_value < 0), key - 4.0 * (visits.max() + 1), key)
    action = np.argmax(np.where(exists, key, -np.inf), axis=1)
    rows = np.arange(b)
    value = np.where(proven[rows, action], proven_value[rows, action],
                     2.0 * rate[rows, action] - 1.0)
    return UCTResult(
        action=action.astype(np.int32),
        visits=visits.astype(np.int32),
        value=value.astype(np.float32),
        proven=t.proven[:, 0].copy(),
        playouts=np.full(b, playouts, np.int32),
    )
