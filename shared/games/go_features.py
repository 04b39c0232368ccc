"""Go's ``features`` observation: KataGo-style input planes (Wu 2019) in one numba kernel.

The planes, all from the view of the player to move, H = the boards kept (``history``):

====================  =========================================================
plane                 ones where
====================  =========================================================
0 ``OWN``             the mover's stones
1 ``OPP``             the opponent's stones
2, 3, 4 ``OWN_LIBS``  the mover's stones in chains with 1, 2, >= 3 liberties
5, 6, 7 ``OPP_LIBS``  the opponent's stones in chains with 1, 2, >= 3 liberties
8 ``KO``              the simple-ko point, when the mover may not play it
9 .. 9+H-2 ``MOVES``  the stone played 1, 2, ..., H-1 moves ago (a pass: none)
9+H-1 (last)          every point when Black is to move
====================  =========================================================

So C = H + 9 planes (13 with the default H = 4). The chains' liberties come from the
state's ``group``/``liberties`` arrays, which the rules keep up to date move by move, so no
flood fill is needed here. The last moves are read off the board history: the stone played
t moves ago is the one point empty in board t and occupied in board t - 1 (captures only
empty points, so nothing else goes from empty to a stone), which needs no extra state.
"""

from __future__ import annotations

import numba
import numpy as np

from zeroforge.shared.games.go_kernels import EMPTY

OWN, OPP = 0, 1
OWN_LIBS, OPP_LIBS = 2, 5
"""First of the three planes (1, 2, >= 3 liberties) of each side's chains."""
KO = 8
MOVES = 9
"""First of the H - 1 last-move planes (newest first)."""


def num_planes(history: int) -> int:
    """Channels of the ``features`` observation when ``history`` boards are kept."""
    return MOVES + (history - 1) + 1


@numba.njit(cache=True)
def features_kernel(board_history, group, libs, to_play, ko_point, legal, out):
    """Write every plane of ``out`` [B, C, N] uint8 (C = ``num_planes(H)``, layout above)
    from ``board_history`` [B, H, N] (newest first), ``group`` and ``libs`` [B, N] (as the
    rules keep them: a chain's liberties at its root), ``to_play`` [B], ``ko_point`` [B]
    and the legal masks ``legal`` [B, N+1]."""
    nb, nh, n = board_history.shape
    last = out.shape[1] - 1
    for b in range(nb):
        me = to_play[b] + 1
        black = np.uint8(to_play[b] == 0)
        for p in range(n):
            v = board_history[b, 0, p]
            own = v == me
            opp = v != EMPTY and not own
            count = libs[b, group[b, p]] if v != EMPTY else 0
            # the chain's liberty class: 0, 1 or 2 for 1, 2, >= 3 liberties
            cls = min(count, 3) - 1
            out[b, OWN, p] = own
            out[b, OPP, p] = opp
            for k in range(3):
                out[b, OWN_LIBS + k, p] = own and cls == k
                out[b, OPP_LIBS + k, p] = opp and cls == k
            out[b, KO, p] = 0
            out[b, last, p] = black
        k = ko_point[b]
        # set-up positions may name a ko point that the mover could play (no capture there)
        if k >= 0 and not legal[b, k]:
            out[b, KO, k] = 1
        for t in range(nh - 1):
            for p in range(n):
                out[b, MOVES + t, p] = (board_history[b, t, p] != EMPTY
                                        and board_history[b, t + 1, p] == EMPTY)
