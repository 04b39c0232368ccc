"""Leaf batching with virtual loss: one tree, many leaves per evaluator call.

The lock-step search (``mcts.py``) takes one leaf per game per evaluator call, so a game
searched alone (an engine's ``genmove``, play against a person) sends batches of one to
an evaluator that could value dozens at the same cost. Here, as in AlphaGo's
asynchronous search (Silver et al. 2016), each tree descends ``leaf_batch`` times per
round before anything is evaluated, and every descent leaves a *virtual loss* on its path
so that the next descents of the round prefer other branches:

1. ``descend_round_kernel`` walks each tree ``leaf_batch`` times (PUCT, forced playouts
   at the root as in ``mcts.py``). A descent ends at a new node (allocated at once, so
   later descents see it), at a terminal node, or at a node another descent of the round
   already created: a *duplicate*. When it is over, every node on its path counts one
   more visit and, seen by the player who moved into it, ``virtual_loss`` more loss (the
   root, which nobody moved into, counts the visit only). A descent never reads its own
   virtual loss, so rounds of one descent are exactly the lock-step search;
2. ``revert_kernel`` removes every virtual loss of the round, exactly (see below);
3. one ``game.step`` plays the new leaves' moves and one evaluator call values all the
   new non-terminal leaves of all B trees (up to B * leaf_batch positions);
4. one backup kernel adds the real values along the paths of the new and terminal
   leaves, as the lock-step search does.

Choices made here:

- A duplicate is dropped: it is not evaluated, not backed up and not counted as a
  simulation, but its virtual loss stays on its path until the round ends, so the next
  descents of the round are pushed further away from the taken leaf (without that they
  would follow the same path, since nothing else changed). A node's visits therefore stay
  its own evaluation plus its children's visits, as in the lock-step search. The
  simulation budget is kept exactly: rounds go on until each tree has counted
  ``num_simulations`` new or terminal leaves, and the first descent of a round always
  counts, so a round never makes less than one. An evaluator call then carries fewer
  than ``leaf_batch`` leaves per game where the tree is narrow (a chain gives one).
- A terminal leaf needs no evaluation: its exact value is backed up once per descent
  that reached it, as in the lock-step search.
- The virtual loss is written into ``visits`` and ``value_sum`` themselves, so the
  PUCT pick and the forced-playout rule are the lock-step search's own code and see the
  in-flight visits too. Removal restores each touched node's ``value_sum`` from a copy
  saved at its first touch of the round (not by subtracting, which would round), and
  subtracts its in-flight count from ``visits``: after each round the tree holds real
  statistics only, bit for bit.
- A node created in a round has no position yet (its move is played after the round), so
  its player to move is taken to be its parent's until it is expanded; the loss is
  written in that view, which is the view its parent's pick reads it in.
- With ``fpu_relative`` the parent's mean value a descent reads includes the round's
  virtual losses (losses for the player who moved into the parent, i.e. gains for the
  parent's own mover), so the reduction is a little milder for nodes on in-flight paths.
- Descents draw no random numbers: a search's results depend on its seed exactly as in
  the lock-step search, and a game gets the same result alone as inside a batch.
- Gumbel search is refused by ``SearchConfig``: its sequential halving decides the root
  move of every simulation from the visits so far, one at a time.
"""

from __future__ import annotations

import time
from typing import Protocol

import numba
import numpy as np

from zeroforge.shared.search.config import SearchConfig
from zeroforge.shared.search.forced import forced_root_pick
from zeroforge.shared.search.puct import puct_pick
from zeroforge.shared.search.tree import UNEXPANDED, Tree, TreeArrays, backup_kernel, flip

NONE = 0
"""``kind`` of a descent slot left unused (the tree's budget was spent)."""
NEW = 1
"""``kind`` of a descent that created its leaf: to be played, evaluated and backed up."""
TERMINAL = 2
"""``kind`` of a descent that ended at an expanded terminal node: backed up, no evaluation."""
DUPLICATE = 3
"""``kind`` of a descent that reached a leaf created earlier in the same round: dropped."""


class Grow(Protocol):
    """Plays, stores, evaluates and expands new nodes, then backs up leaves (``MCTS``)."""

    def __call__(self, games: np.ndarray, parents: np.ndarray, actions: np.ndarray,
                 nodes: np.ndarray, backup: tuple[np.ndarray, np.ndarray]) -> None:
        """Node ``nodes[k]`` of tree ``games[k]`` is the position after ``actions[k]`` from
        node ``parents[k]`` (all [K]); ``backup`` = (games [M], leaves [M]) to back up."""
        ...


@numba.njit(cache=True)
def _add_virtual_loss(visits, value_sum, to_play, parent, inflight, saved, b, node, loss):
    """One more in-flight descent through ``node`` of tree b: a visit and ``loss`` against
    the player who moved into it (none at the root)."""
    if inflight[b, node] == 0:
        saved[b, node] = value_sum[b, node]
    inflight[b, node] += 1
    visits[b, node] += 1
    up = parent[b, node]
    if up >= 0:
        value_sum[b, node] += flip(-loss, to_play[b, up], to_play[b, node])


@numba.njit(cache=True)
def descend_round_kernel(tree, inflight, saved, root_prior, want, c_puct, c_base, fpu,
                         fpu_relative, forced_k, loss, out_leaf, out_parent, out_action,
                         out_kind):
    """Descend each tree of ``tree`` (``Tree.packed``) ``want[b]`` times with virtual loss.

    ``inflight`` [B, N] int32 (zeros on entry) counts the round's descents through each
    node and ``saved`` [B, N] float64 keeps each touched node's ``value_sum`` from before
    the round, for ``revert_kernel``. ``root_prior`` [B, A] replaces the roots' stored
    priors (it carries the noise); ``forced_k`` > 0 adds forced playouts at the root;
    ``loss`` is the virtual loss. ``want`` [B] <= L descents per tree. Writes per tree b
    and descent k < L the leaf node, its parent and action and the descent's kind
    (``out_*`` [B, L]; ``NONE`` for k >= ``want[b]``). New leaves are allocated and linked
    with placeholder statistics. Returns the first tree stuck at a running node without
    legal moves, or -1.
    """
    t = TreeArrays(*tree)
    visits, value_sum, prior, children, parent, action, to_play, terminal = (
        t.visits, t.value_sum, t.prior, t.children, t.parent, t.action, t.to_play,
        t.terminal)
    num_nodes = t.num_nodes
    for b in range(children.shape[0]):
        first_new = num_nodes[b]  # nodes from here on were created in this round
        for k in range(out_kind.shape[1]):
            out_kind[b, k] = NONE
            if k >= want[b]:
                continue
            n = 0
            while True:
                a = -1
                if n == 0 and forced_k > 0:
                    a = forced_root_pick(visits, children, b, root_prior[b], forced_k)
                if a < 0:
                    row = root_prior[b] if n == 0 else prior[b, n]
                    a = puct_pick(visits, value_sum, children, to_play, b, n, row,
                                  c_puct, c_base, fpu, fpu_relative)
                if a < 0:
                    return b
                child = children[b, n, a]
                kind = NONE
                if child == UNEXPANDED:
                    child = num_nodes[b]
                    num_nodes[b] += 1
                    children[b, n, a] = child
                    parent[b, child] = n
                    action[b, child] = a
                    # Placeholders until the node is expanded after the round (the slot may
                    # hold an old search's node): no visits, the parent's mover.
                    visits[b, child] = 0
                    value_sum[b, child] = 0.0
                    to_play[b, child] = to_play[b, n]
                    terminal[b, child] = False
                    kind = NEW
                elif child >= first_new:
                    kind = DUPLICATE
                elif terminal[b, child]:
                    kind = TERMINAL
                if kind != NONE:
                    out_leaf[b, k], out_parent[b, k], out_action[b, k] = child, n, a
                    out_kind[b, k] = kind
                    break
                n = child
            # The path gets its virtual loss once the descent is over: a descent never
            # reads its own (one descent per round is then exactly the lock-step search).
            node = out_leaf[b, k]
            while node >= 0:
                _add_virtual_loss(visits, value_sum, to_play, parent, inflight, saved, b,
                                  node, loss)
                node = parent[b, node]
    return -1


@numba.njit(cache=True)
def revert_kernel(tree, inflight, saved, leaf, kind):
    """Remove every virtual loss the descents ``leaf`` [B, L] / ``kind`` [B, L] left in
    ``tree`` (``Tree.packed``): each touched node gets back its saved ``value_sum`` and
    loses its in-flight visits; ``inflight`` [B, N] returns to zeros."""
    t = TreeArrays(*tree)
    visits, value_sum, parent = t.visits, t.value_sum, t.parent
    for b in range(kind.shape[0]):
        for k in range(kind.shape[1]):
            if kind[b, k] == NONE:
                continue
            node = leaf[b, k]
            # A node already restored was restored with all its ancestors: stop there.
            while node >= 0 and inflight[b, node] > 0:
                visits[b, node] -= inflight[b, node]
                value_sum[b, node] = saved[b, node]
                inflight[b, node] = 0
                node = parent[b, node]


def search_rounds(tree: Tree, root_prior: np.ndarray, sims: int, forced_k: float,
                  config: SearchConfig, grow: Grow, timings: dict[str, float]) -> None:
    """Spend ``sims`` simulations on each of the B trees of ``tree`` (roots expanded),
    ``config.leaf_batch`` descents per tree and evaluator call (module docstring).

    ``root_prior`` [B, A]: the root priors to use (noise included); ``forced_k``: forced
    playouts' k at the root (0: none); ``grow`` plays, evaluates, expands and backs up;
    ``timings["tree"]`` accumulates the kernels' seconds. Raises RuntimeError if a
    running position has no legal moves (the trees are then forgotten: they would hold
    virtual losses).
    """
    batch, width = tree.batch_size, config.leaf_batch
    leaf = np.empty((batch, width), np.int64)
    parent = np.empty((batch, width), np.int64)
    action = np.empty((batch, width), np.int64)
    kind = np.empty((batch, width), np.int8)
    inflight = np.zeros((batch, tree.capacity), np.int32)
    saved = np.empty((batch, tree.capacity), np.float64)
    left = np.full(batch, sims, np.int64)
    want = np.empty(batch, np.int64)
    c_base = -1.0 if config.c_base is None else float(config.c_base)
    t = tree.packed
    while left.any():
        t0 = time.perf_counter()
        np.minimum(left, width, out=want)
        stuck = descend_round_kernel(t, inflight, saved, root_prior, want, config.c_puct,
                                     c_base, config.fpu, config.fpu_relative, forced_k,
                                     config.virtual_loss, leaf, parent, action, kind)
        if stuck >= 0:
            tree.num_nodes[:] = 0
            raise RuntimeError(f"search: game {stuck} reached a running position "
                               "without legal moves")
        revert_kernel(t, inflight, saved, leaf, kind)
        timings["tree"] += time.perf_counter() - t0
        new_b, new_k = np.nonzero(kind == NEW)
        done_b, done_k = np.nonzero((kind == NEW) | (kind == TERMINAL))
        left -= np.bincount(done_b, minlength=batch)
        backup = (done_b, leaf[done_b, done_k])
        if new_b.size:
            grow(new_b, parent[new_b, new_k], action[new_b, new_k], leaf[new_b, new_k],
                 backup)
        else:  # every leaf of the round is an existing terminal node
            t0 = time.perf_counter()
            backup_kernel(t, *backup)
            timings["tree"] += time.perf_counter() - t0
