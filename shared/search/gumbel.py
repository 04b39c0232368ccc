"""Gumbel AlphaZero (Danihelka et al., ICLR 2022) on the array trees of ``tree.py``.

At the root: sample Gumbel(0) noise g(a), keep the m legal actions with the largest
g(a) + logits(a), and split the simulation budget among them by sequential halving,
ranking survivors by g(a) + logits(a) + σ(q̂(a)). Below the root: the deterministic
selection argmax_a π'(a) - N(a) / (1 + Σ_b N(b)), with π' = softmax(logits + σ(completed Q)).
The training target is that same π' at the root and the move is the halving's winner.

Choices made here:

- ``logits`` are log priors (the tree stores priors; over the legal actions the two differ
  by a constant, which no softmax or argmax sees).
- σ(q) = (c_visit + max_b N(b)) · c_scale · q̂ with q̂ = (q + 1) / 2: board-game values are
  bounded by the outcomes [-1, 1], so a fixed map to [0, 1] suffices and, unlike min-max
  rescaling, does not blow tiny Q differences up into large logit gaps at small budgets.
- Phase budgets: with m considered actions there are ceil(log2 m) phases (halving with
  rounding up, so the last phase has 2 actions); a phase with r actions gives each
  max(1, n // (phases · r)) visits, and the last phase takes whatever budget is left.
  A budget too small for all phases simply stops halving early; the winner is then the
  best-ranked of the actions still in the race.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from zeroforge.shared.search.tree import ILLEGAL, TreeArrays, flip

_TINY = 1e-30  # added to priors: a legal move whose prior underflowed keeps a finite log


@numba.njit(cache=True, inline="always")
def _sigma(q, max_visits, c_visit, c_scale):
    return (c_visit + max_visits) * c_scale * (q + 1.0) * 0.5


@numba.njit(cache=True)
def completed_q(visits, value_sum, raw_value, prior, children, to_play, b, n, out):
    """Completed Q of node n of tree b into ``out`` [A] (node n mover's view).

    Visited actions get their mean value; unvisited ones the mixed value
    v_mix = (v̂ + ΣN / Σ_{visited} π · Σ_{visited} π q) / (1 + ΣN), which blends the node's
    own evaluation v̂ with the prior-weighted Q of what the search has seen.
    Returns (Σ_b N(b), max_b N(b)) over the children.
    """
    num_actions = children.shape[2]
    sum_n = 0
    max_n = 0
    sum_p = 0.0
    sum_pq = 0.0
    sum_q = 0.0
    for a in range(num_actions):
        child = children[b, n, a]
        if child >= 0 and visits[b, child] > 0:
            cv = visits[b, child]
            q = flip(value_sum[b, child] / cv, to_play[b, child], to_play[b, n])
            out[a] = q
            sum_n += cv
            max_n = max(max_n, cv)
            sum_p += prior[b, n, a]
            sum_pq += prior[b, n, a] * q
            sum_q += q
        else:
            out[a] = np.nan
    v_hat = np.float64(raw_value[b, n])
    if sum_n == 0:
        v_mix = v_hat
    elif sum_p > _TINY:
        v_mix = (v_hat + sum_n * sum_pq / sum_p) / (1.0 + sum_n)
    else:  # the visited moves all had vanishing priors: weigh them equally instead
        visited = 0
        for a in range(num_actions):
            if not np.isnan(out[a]):
                visited += 1
        v_mix = (v_hat + sum_n * sum_q / visited) / (1.0 + sum_n)
    for a in range(num_actions):
        if children[b, n, a] != ILLEGAL and np.isnan(out[a]):
            out[a] = v_mix
    return sum_n, max_n


@numba.njit(cache=True)
def improved_policy(visits, value_sum, raw_value, prior, children, to_play, b, n,
                    c_visit, c_scale, q, out):
    """π' = softmax(log prior + σ(completed Q)) over node n's legal actions into ``out`` [A].

    ``q`` [A] is scratch (left holding the completed Q). Returns Σ_b N(b).
    """
    sum_n, max_n = completed_q(visits, value_sum, raw_value, prior, children, to_play, b, n, q)
    # softmax(log p + σ) = p · exp(σ - max σ) / Σ: no log per action, and every unvisited
    # action shares σ(v_mix), so the exps are one per visited action plus one.
    top = -np.inf
    for a in range(out.shape[0]):
        if children[b, n, a] != ILLEGAL:
            top = max(top, q[a])
    shared_q = np.nan
    shared_w = 0.0
    total = 0.0
    for a in range(out.shape[0]):
        child = children[b, n, a]
        if child == ILLEGAL:
            out[a] = 0.0
            continue
        if child < 0 or visits[b, child] == 0:
            if shared_q != q[a]:
                shared_q = q[a]
                shared_w = np.exp(_sigma(q[a], max_n, c_visit, c_scale)
                                  - _sigma(top, max_n, c_visit, c_scale))
            w = shared_w
        else:
            w = np.exp(_sigma(q[a], max_n, c_visit, c_scale) - _sigma(top, max_n, c_visit, c_scale))
        out[a] = (prior[b, n, a] + _TINY) * w
        total += out[a]
    for a in range(out.shape[0]):
        out[a] /= total
    return sum_n


@numba.njit(cache=True)
def interior_pick(visits, value_sum, raw_value, prior, children, to_play, b, n,
                  c_visit, c_scale, q, pi):
    """The paper's deterministic non-root selection: argmax π'(a) - N(a) / (1 + ΣN)."""
    sum_n = improved_policy(visits, value_sum, raw_value, prior, children, to_play, b, n,
                            c_visit, c_scale, q, pi)
    best, best_score = -1, -np.inf
    for a in range(pi.shape[0]):
        child = children[b, n, a]
        if child == ILLEGAL:
            continue
        n_a = visits[b, child] if child >= 0 else 0
        score = pi[a] - n_a / (1.0 + sum_n)
        if score > best_score:
            best, best_score = a, score
    return best


@numba.njit(cache=True, inline="always")
def _phase_budget(num_alive, num_phases, phase, budget, used):
    if phase == num_phases - 1:
        return budget - used
    per_action = max(1, budget // (num_phases * num_alive))
    return min(per_action * num_alive, budget - used)


@numba.njit(cache=True)
def _rank_score(t, b, base, c_visit, c_scale, q, out):
    """g + logits + σ(completed Q) of the root's actions into ``out`` [A] (once per phase)."""
    _, max_n = completed_q(t.visits, t.value_sum, t.raw_value, t.prior, t.children, t.to_play,
                           b, 0, q)
    for a in range(out.shape[0]):
        out[a] = base[b, a] + _sigma(q[a], max_n, c_visit, c_scale)


class Halving(NamedTuple):
    """Sequential-halving state of B roots, one argument for the numba kernels."""

    base: np.ndarray
    """[B, A] float64: g + log prior of the considered actions, -inf elsewhere."""
    alive: np.ndarray
    """[B, A] bool: actions still in the race."""
    visits: np.ndarray
    """[B, A] int32: visits each root action got from this search."""
    num_alive: np.ndarray
    """[B] int64: actions still in the race."""
    num_phases: np.ndarray
    """[B] int64: ceil(log2 m) halving phases."""
    phase: np.ndarray
    """[B] int64: current phase."""
    phase_left: np.ndarray
    """[B] int64: simulations left in the current phase."""
    used: np.ndarray
    """[B] int64: simulations spent so far."""
    budget: int
    """Simulations of the whole search."""


@numba.njit(cache=True)
def root_actions_kernel(tree, halving, c_visit, c_scale, out_action):
    """The root action of the next simulation of every game, by sequential halving.

    ``tree`` is ``Tree.packed``, ``halving`` the ``Halving`` state (as a plain tuple,
    ``GumbelRoot.packed``), updated here; the actions go to ``out_action`` [B]. Within a
    phase the alive action with the fewest visits goes next (ties: larger base), so every
    survivor gets the phase's visits; when a phase is spent the better-ranked half survives.
    """
    t = TreeArrays(*tree)
    h = Halving(*halving)
    base, alive, visits, phase, phase_left = h.base, h.alive, h.visits, h.phase, h.phase_left
    num_actions = base.shape[1]
    q = np.empty(num_actions)
    score = np.empty(num_actions)
    for b in range(base.shape[0]):
        if phase_left[b] == 0 and phase[b] < h.num_phases[b] - 1:
            _rank_score(t, b, base, c_visit, c_scale, q, score)
            keep = (h.num_alive[b] + 1) // 2
            for a in range(num_actions):
                if not alive[b, a]:
                    score[a] = -np.inf
            for a in range(num_actions):
                alive[b, a] = False
            for _ in range(keep):
                best = np.argmax(score)
                alive[b, best] = True
                score[best] = -np.inf
            h.num_alive[b] = keep
            phase[b] += 1
            phase_left[b] = _phase_budget(keep, h.num_phases[b], phase[b], h.budget, h.used[b])
        pick, fewest, pick_base = -1, 1 << 30, -np.inf
        for a in range(num_actions):
            if alive[b, a] and (visits[b, a] < fewest or (
                    visits[b, a] == fewest and base[b, a] > pick_base)):
                pick, fewest, pick_base = a, visits[b, a], base[b, a]
        out_action[b] = pick  # -1 only without legal moves; the descent reports that game
        if pick >= 0:
            visits[b, pick] += 1
        phase_left[b] -= 1
        h.used[b] += 1


@numba.njit(cache=True)
def finish_kernel(tree, base, alive, c_visit, c_scale, out_action, out_policy):
    """Winner of the halving (best-ranked alive action) and the root's improved policy.

    ``tree`` is ``Tree.packed``; ``base``, ``alive`` [B, A] as in ``Halving``; writes
    ``out_action`` [B] and ``out_policy`` [B, A].
    """
    t = TreeArrays(*tree)
    num_actions = base.shape[1]
    q = np.empty(num_actions)
    score = np.empty(num_actions)
    pi = np.empty(num_actions)
    for b in range(base.shape[0]):
        _rank_score(t, b, base, c_visit, c_scale, q, score)
        best, best_score = -1, -np.inf
        for a in range(num_actions):
            if alive[b, a] and score[a] > best_score:
                best, best_score = a, score[a]
        out_action[b] = best
        improved_policy(t.visits, t.value_sum, t.raw_value, t.prior, t.children, t.to_play,
                        b, 0, c_visit, c_scale, q, pi)
        out_policy[b, :] = pi


class GumbelRoot:
    """Per-search state of sequential halving at the B roots (arrays as in ``Halving``)."""

    def __init__(self, root_prior: np.ndarray, legal: np.ndarray, gumbel: np.ndarray,
                 max_considered: int, budget: int) -> None:
        """``root_prior`` [B, A] float32 (clean priors), ``legal`` [B, A] bool, ``gumbel``
        [B, A] float64 Gumbel(0) samples (zeros for a deterministic search)."""
        b, a = legal.shape
        self.budget = int(budget)
        num_legal = legal.sum(axis=1)
        m = np.minimum(np.minimum(num_legal, max_considered), budget).astype(np.int64)
        logits = np.log(root_prior.astype(np.float64) + _TINY)
        start = np.where(legal, gumbel + logits, -np.inf)
        order = np.argsort(-start, axis=1, kind="stable")
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(a)[None, :].repeat(b, 0), axis=1)
        self.alive = rank < m[:, None]
        self.base = np.where(self.alive, start, -np.inf)
        self.halving_visits = np.zeros((b, a), np.int32)
        self.num_alive = m
        self.num_phases = np.maximum(1, np.ceil(np.log2(np.maximum(m, 1))).astype(np.int64))
        self.phase = np.zeros(b, np.int64)
        self.used = np.zeros(b, np.int64)
        # The first phase's budget, as _phase_budget computes it for phase 0.
        first = np.minimum(np.maximum(1, budget // (self.num_phases * np.maximum(m, 1))) * m,
                           budget)
        self.phase_left = np.where(self.num_phases == 1, budget, first).astype(np.int64)
        self.arrays = Halving(self.base, self.alive, self.halving_visits, self.num_alive,
                              self.num_phases, self.phase, self.phase_left, self.used,
                              self.budget)
        """The same arrays (shared, not copied) as one ``Halving``."""
        self.packed = tuple(self.arrays)
        """``arrays`` as a plain tuple, the argument of ``root_actions_kernel`` (see
        ``tree.py`` on why kernels take plain tuples)."""
