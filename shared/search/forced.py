"""KataGo's forced playouts and policy-target pruning (Wu 2019, "Accelerating Self-Play
Learning in Go", section 3.1) for the batched PUCT search.

Root noise only explores if the noised moves get visits, and PUCT gives a move with a
poor value few of them however much noise its prior got. Forced playouts fix that: at the
root of a noised search, a child c with fewer visits than

    n_forced(c) = sqrt(k · P(c) · Σ_c' N(c'))        (P with the noise, Σ over the root's children)

is picked before the PUCT formula is consulted (``forced_root_pick``, in ``MCTS``'s
descent kernel; of several, the one furthest below its n_forced).
Those visits are an exploration device, not the search's opinion, so the policy target
has them taken out again (``prune_forced_visits``): the most visited child c* keeps its
visits; every other child loses up to n_forced(c) of them, one at a time, for as long as
its PUCT score with the reduced count stays below c*'s, and a child left with one visit or
none is dropped from the target. The move played still follows the unpruned visits.

Choices made here:

- PUCT(c) here is the search's own score, with the root's visits N (its evaluation
  included) under the square root and c grown by ``c_base`` if set; the paper writes
  Σ N(c'). Both are taken at the end of the search.
- Visits stay whole: at most floor(n_forced) are subtracted, so the target is a share of
  integer counts like the unpruned one.
"""

from __future__ import annotations

import numba
import numpy as np

from zeroforge.shared.search.tree import ILLEGAL


@numba.njit(cache=True, inline="always")
def exploration_scale(c_puct, c_base, parent_visits):
    """c · sqrt(N) of PUCT's U = c · P · sqrt(N) / (1 + N(a)), for a node of N visits;
    c grows with N as in AlphaZero where ``c_base`` > 0 (-1: constant)."""
    c = c_puct
    if c_base > 0:
        c += np.log((1.0 + parent_visits + c_base) / c_base)
    return c * np.sqrt(np.float64(parent_visits))


@numba.njit(cache=True)
def forced_root_pick(visits, children, b, prior_row, forced_k):
    """The root action of tree b owed a forced playout, or -1 if none is.

    ``visits`` [B, N] and ``children`` [B, N, A] as in ``TreeArrays``; ``prior_row`` [A]:
    the root priors with the noise; ``forced_k``: k > 0. Of the children c with
    N(c) < n_forced(c) = sqrt(k · P(c) · Σ N), the one furthest below (first on a tie).
    """
    # Σ_c N(c): the root's visits are its children's plus its own evaluation.
    quota = forced_k * (visits[b, 0] - 1)
    best, best_gap = -1, 0.0
    for a in range(children.shape[2]):
        child = children[b, 0, a]
        if child == ILLEGAL:
            continue
        cv = visits[b, child] if child >= 0 else 0
        owed = quota * prior_row[a]
        if cv * cv < owed:  # N(c) < n_forced(c) without a square root per action
            gap = np.sqrt(owed) - cv
            if gap > best_gap:
                best, best_gap = a, gap
    return best


@numba.njit(cache=True)
def _prune_kernel(counts, q, prior, parent_visits, c_puct, c_base, forced_k, out):
    num_actions = counts.shape[1]
    for b in range(counts.shape[0]):
        scale = exploration_scale(c_puct, c_base, parent_visits[b])
        total = 0
        best = 0
        for a in range(num_actions):
            total += counts[b, a]
            if counts[b, a] > counts[b, best]:
                best = a
        best_score = q[b, best] + scale * prior[b, best] / (1.0 + counts[b, best])
        for a in range(num_actions):
            n = counts[b, a]
            if a == best or n == 0:
                out[b, a] = n
                continue
            # Lowest count the forced visits can explain: n - n_forced.
            lowest = n - np.sqrt(forced_k * prior[b, a] * total)
            # With n - 1 visits the score's denominator 1 + N(a) is n.
            while n >= 1 and n - 1 >= lowest and q[b, a] + scale * prior[b, a] / n < best_score:
                n -= 1
            out[b, a] = n if n > 1 else 0


def prune_forced_visits(counts: np.ndarray, q: np.ndarray, prior: np.ndarray,
                        parent_visits: np.ndarray, c_puct: float, c_base: float | None,
                        forced_k: float) -> np.ndarray:
    """[B, A] int32: root visit counts with the forced playouts taken out (module docstring).

    ``counts`` [B, A] int: visits of each root child; ``q`` [B, A]: each visited child's
    mean value from the root mover's view (unvisited entries are not read); ``prior``
    [B, A]: the root priors the search used (noise included); ``parent_visits`` [B]: the
    root's visits N; ``c_puct``, ``c_base`` and ``forced_k`` (k > 0) as in
    ``SearchConfig``. The most visited child of each game (the first, on a tie) keeps
    its count, so every row keeps a positive sum where ``counts`` had one.
    """
    counts = np.ascontiguousarray(counts, np.int64)
    out = np.empty(counts.shape, np.int64)
    _prune_kernel(counts, np.ascontiguousarray(q, np.float64),
                  np.ascontiguousarray(prior, np.float64),
                  np.ascontiguousarray(parent_visits, np.int64), float(c_puct),
                  -1.0 if c_base is None else float(c_base), float(forced_k), out)
    return out.astype(np.int32)
