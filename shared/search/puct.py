"""The PUCT selection rule, shared by the lock-step descent (``mcts.py``) and the
leaf-batched descent with virtual loss (``vloss.py``)."""

from __future__ import annotations

import numba
import numpy as np

from zeroforge.shared.search.forced import exploration_scale
from zeroforge.shared.search.tree import ILLEGAL, flip


@numba.njit(cache=True)
def puct_pick(visits, value_sum, children, to_play, b, n, prior_row,
              c_puct, c_base, fpu, fpu_relative):
    """argmax_a Q(a) + c · P(a) · sqrt(N(n)) / (1 + N(a)) over node n's legal actions.

    ``visits`` [B, N], ``value_sum`` [B, N], ``children`` [B, N, A] and ``to_play`` [B, N]
    as in ``TreeArrays``; ``prior_row`` [A]: the priors to use at node n of tree b.
    N(n) counts the node's own evaluation, so at a fresh node the prior breaks the tie
    between the (all-unvisited) children instead of the action order. Returns -1 if n has
    no legal action.
    """
    parent_n = visits[b, n]
    scale = exploration_scale(c_puct, c_base, parent_n)
    unvisited_q = fpu
    if fpu_relative:
        unvisited_q = value_sum[b, n] / parent_n - fpu
    best, best_score = -1, -np.inf
    for a in range(children.shape[2]):
        child = children[b, n, a]
        if child == ILLEGAL:
            continue
        if child >= 0 and visits[b, child] > 0:
            cv = visits[b, child]
            q = flip(value_sum[b, child] / cv, to_play[b, child], to_play[b, n])
            score = q + scale * prior_row[a] / (1.0 + cv)
        else:
            score = unvisited_q + scale * prior_row[a]
        if score > best_score:
            best, best_score = a, score
    return best
