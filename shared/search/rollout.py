"""Batched rollouts: play every game of a batch to its end and report who won.

Rollouts go through the generic ``Game`` interface (one batched ``game.step`` per ply for
all games of the batch together), so every game in the registry gets them for free. They
serve the pure-UCT baseline (uniformly random moves) and AlphaGo-style value mixing in
PUCT (moves sampled from a rollout policy, e.g. the policy net).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from zeroforge.shared.games import Game, State, sample_legal

RolloutPolicy = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``policy(obs [B, C, H, W], legal [B, A] bool) -> probabilities [B, A]`` (need not be
normalised; illegal entries are ignored)."""

# Once fewer than this fraction of the batch is still running, the rollout continues on
# the running games only: stepping finished games is free in the kernel but not in the
# per-array numpy work of ``step``, and the long tail of a batch is a few games.
_COMPACT_BELOW = 0.5


def mover_view(first_player_outcome: np.ndarray, to_play: np.ndarray) -> np.ndarray:
    """[B] float32: outcomes [B] (first player's view) seen by the players ``to_play`` [B]."""
    sign = np.where(np.asarray(to_play) == 0, 1.0, -1.0)
    return (np.asarray(first_player_outcome) * sign).astype(np.float32)


def rollout_outcomes(
    game: Game,
    states: State,
    choose: Callable[[State], np.ndarray],
) -> np.ndarray:
    """[B] int8 final outcomes (first player's view) of playing ``states`` to the end.

    ``choose(running_states) -> actions [R]`` picks one legal action for every game of a
    batch of running games. ``states`` is not modified.
    """
    outcome = np.array(states.outcome, dtype=np.int8, copy=True)
    index = np.flatnonzero(~states.terminal)  # positions in ``states`` of the games in ``cur``
    if index.size == 0:
        return outcome
    cur = states.take(index)
    while True:
        cur = game.step(cur, choose(cur))
        done = cur.terminal
        if done.all():
            outcome[index] = cur.outcome
            return outcome
        if np.count_nonzero(~done) < _COMPACT_BELOW * done.size:
            finished = np.flatnonzero(done)
            outcome[index[finished]] = cur.outcome[finished]
            keep = np.flatnonzero(~done)
            index = index[keep]
            cur = cur.take(keep)


def random_outcomes(game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
    """[B] int8 final outcomes (first player's view) of uniformly random play from
    ``states`` [B]: the game's compiled playout where it has one (``Game.random_playout``),
    else ``rollout_outcomes`` a ply at a time. Both draw each move uniformly from the legal
    ones."""
    fast = game.random_playout(states, rng)
    if fast is not None:
        return fast
    return rollout_outcomes(game, states, lambda s: sample_legal(game.legal_mask(s), rng))


def random_rollout_values(game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
    """[B] float32 in {-1, 0, +1}: result of uniformly random play from ``states`` [B].

    Seen by the player to move in ``states`` (+1: that player wins). A game that is already
    over is scored as it stands, also from the view of its ``to_play``.
    """
    return mover_view(random_outcomes(game, states, rng), states.to_play)


def sample_from_policy(
    probs: np.ndarray, legal: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """[B] int32: one action per row drawn from ``probs`` [B, A] restricted to ``legal`` [B, A].

    Rows whose legal actions all have zero (or non-finite) probability fall back to a
    uniformly random legal action, so a confident but wrong policy cannot stall a rollout.
    Rows with no legal action get -1.
    """
    p = np.asarray(probs, np.float64)
    p = np.where(legal & np.isfinite(p) & (p > 0.0), p, 0.0)
    total = p.sum(axis=1)
    empty = total <= 0.0
    if empty.any():
        p[empty] = legal[empty]
        total = p.sum(axis=1)
    cum = np.cumsum(p, axis=1)
    # u * total < total, so the first index whose running sum exceeds it has p > 0: legal.
    threshold = rng.random(p.shape[0]) * total
    actions = np.argmax(cum > threshold[:, None], axis=1).astype(np.int32)
    actions[total <= 0.0] = -1
    return actions


def policy_rollout_values(
    game: Game,
    states: State,
    rng: np.random.Generator,
    policy: RolloutPolicy,
) -> np.ndarray:
    """[B] float32: like ``random_rollout_values`` but moves are sampled from ``policy``.

    ``policy`` is called once per ply with the observations and legal masks of the games
    still running only (so a network sees no finished positions).
    """

    def choose(s: State) -> np.ndarray:
        actions = np.full(s.batch_size, -1, np.int32)
        running = np.flatnonzero(~game.terminal(s))
        sub = s if running.size == s.batch_size else s.take(running)
        legal = game.legal_mask(sub)
        actions[running] = sample_from_policy(policy(game.observe(sub), legal), legal, rng)
        return actions

    outcome = rollout_outcomes(game, states, choose)
    return mover_view(outcome, states.to_play)
