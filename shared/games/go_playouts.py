"""Go's uniformly random playouts in one compiled call, for the pure-UCT baseline and
random value rollouts (``Go.random_playout``): each move is drawn as ``sampling`` draws it
and played by ``go_kernels.step_kernel``, so the rules are the ones every Go state follows.
"""

from __future__ import annotations

import numba
import numpy as np

from zeroforge.shared.games.go_kernels import step_kernel
from zeroforge.shared.games.sampling import draw_random_moves


@numba.njit(cache=True)
def random_playout_kernel(seed, board, group, libs, zhash, hashes, nhashes, repeat_limit,
                          ko_point, passes, captures, to_play, ply, terminal, outcome, legal,
                          last_action, komi, max_moves, superko, nbr, deg, keys, rev_key,
                          rev_pt):
    """Play every running game of the batch to its end in place, each move drawn uniformly
    from the legal ones (as ``sampling.sample_legal`` draws them), and leave the outcomes
    in ``outcome``. One call for the whole rollout: the pure-UCT baseline's playouts cost
    the moves, not a Python round trip and a state copy per ply. The board history is not
    kept (a playout's states are thrown away); ``seed`` seeds numba's own generator."""
    np.random.seed(seed)
    batch, n = board.shape
    no_history = np.empty((batch, 0, n), np.int8)
    actions = np.empty(batch, np.int32)
    uniforms = np.empty(batch)
    while draw_random_moves(legal, uniforms, actions):  # -1 for the games already over
        step_kernel(actions, board, group, libs, no_history, no_history, zhash, hashes,
                    nhashes, repeat_limit, ko_point, passes, captures, to_play, ply, terminal,
                    outcome, legal, last_action, komi, max_moves, superko, nbr, deg, keys,
                    rev_key, rev_pt)
