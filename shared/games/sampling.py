"""Uniformly random legal actions for a batch: random play, rollouts and benchmarks."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def sample_legal_kernel(legal, uniforms, out):
    """``out[b]``: the legal action of row ``b`` of ``legal`` [B, A] that ``uniforms[b]``
    in [0, 1) picks, all legal actions equally likely; -1 for a row with none (a finished
    game). Shared by ``sample_legal`` and compiled playouts (``go_playouts``)."""
    for b in range(legal.shape[0]):
        count = 0
        for a in range(legal.shape[1]):
            count += legal[b, a]
        if count == 0:
            out[b] = -1
            continue
        pick = min(int(uniforms[b] * count), count - 1)
        for a in range(legal.shape[1]):
            if legal[b, a]:
                if pick == 0:
                    out[b] = a
                    break
                pick -= 1


@numba.njit(cache=True)
def draw_random_moves(legal, uniforms, actions):
    """One ply of compiled random playouts: ``actions[b]`` a uniformly drawn legal action of
    every game of ``legal`` [B, A] (-1 for a finished one), the draws from numba's own
    generator (seeded by the playout kernel) through ``uniforms`` [B] (scratch); False once
    no game is running."""
    for b in range(legal.shape[0]):
        uniforms[b] = np.random.random()
    sample_legal_kernel(legal, uniforms, actions)
    # a loop, not np.any(actions >= 0): no array allocated on every ply of every playout
    for b in range(actions.shape[0]):  # noqa: SIM110 (numba compiles no generator in any())
        if actions[b] >= 0:
            return True
    return False


def sample_legal(legal: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """[B] int32: one uniformly chosen legal action per row of ``legal`` [B, A] (-1 if none)."""
    out = np.empty(legal.shape[0], np.int32)
    sample_legal_kernel(legal, rng.random(legal.shape[0]), out)
    return out
