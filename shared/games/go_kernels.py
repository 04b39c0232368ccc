"""Numba kernels for Go: placing stones with captures, exact legal masks, area scoring.

Boards are flat ``[N]`` int8 rows (0 empty, 1 black, 2 white; point = row * size + col).
Positions are identified by a Zobrist hash: the xor of ``keys[point, colour]`` over all
stones, so the empty board hashes to 0 and a capture is an xor of the captured group's
stored hash. Every kernel loops over the batch itself; the scratch arrays are allocated
once per call and reused from game to game, with "tick" stamps instead of clearing them.
"""

from __future__ import annotations

import numba
import numpy as np

EMPTY, BLACK, WHITE = 0, 1, 2

ZOBRIST_SEED = 0x60_5EED
"""Fixed seed: hashes are the same in every process and every run."""


def neighbor_table(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Orthogonal neighbours of every point: ``nbr`` [N, 4] int32 (padded with -1), ``deg`` [N]."""
    n = size * size
    nbr = np.full((n, 4), -1, np.int32)
    deg = np.zeros(n, np.int32)
    for p in range(n):
        r, c = divmod(p, size)
        for dr, dc in ((-1, 0), (0, -1), (0, 1), (1, 0)):
            rr, cc = r + dr, c + dc
            if 0 <= rr < size and 0 <= cc < size:
                nbr[p, deg[p]] = rr * size + cc
                deg[p] += 1
    return nbr, deg


def zobrist_keys(num_points: int) -> np.ndarray:
    """[N, 3] uint64 keys per (point, colour); column 0 (empty) is zero: empty adds nothing."""
    rng = np.random.default_rng(ZOBRIST_SEED)
    keys = rng.integers(0, np.iinfo(np.uint64).max, size=(361, 3), dtype=np.uint64,
                        endpoint=True)
    keys[:, EMPTY] = 0
    # Keys depend only on the point index, so a size's keys are a prefix of the 19x19 ones.
    return np.ascontiguousarray(keys[:num_points])


def padded_keys(keys: np.ndarray, size: int) -> np.ndarray:
    """``keys`` [N, 3] re-indexed by the points of the (size+2)^2 padded frame (border: 0)."""
    w = size + 2
    out = np.zeros((w * w, 3), np.uint64)
    rows, cols = np.divmod(np.arange(size * size), size)
    out[(rows + 1) * w + cols + 1] = keys
    return out


def table_size(num_points: int) -> int:
    """Slots of the per-game open-addressing table of candidate hashes (load factor <= 1/4)."""
    t = 1
    while t < 4 * num_points:
        t *= 2
    return t


@numba.njit(cache=True)
def place_stone(board, p, me, nbr, deg, keys, seen, queue, tick):
    """Put ``me``'s stone on empty ``p`` of ``board`` [N] and remove opponent groups left
    without liberties (in place). Does not check legality.

    Returns (hash xor delta, stones captured, one captured point or -1, new tick).
    """
    opp = 3 - me
    board[p] = me
    delta = keys[p, me]
    ncap = 0
    cap_pt = -1
    for k in range(deg[p]):
        r = nbr[p, k]
        if board[r] != opp:
            continue  # also skips a group captured through an earlier neighbour
        tick += 1
        seen[r] = tick
        queue[0] = r
        head = 0
        tail = 1
        free = False
        # Breadth-first over the group, stopping at its first liberty: most groups have one
        # next to their first stone, so this is usually a handful of reads.
        while head < tail and not free:
            q = queue[head]
            head += 1
            for j in range(deg[q]):
                s = nbr[q, j]
                v = board[s]
                if v == EMPTY:
                    free = True
                    break
                if v == opp and seen[s] != tick:
                    seen[s] = tick
                    queue[tail] = s
                    tail += 1
        if not free:  # the search ran to completion, so queue[:tail] is the whole group
            for i in range(tail):
                q = queue[i]
                board[q] = EMPTY
                delta ^= keys[q, opp]
            ncap += tail
            cap_pt = queue[0]
    return delta, ncap, cap_pt, tick


@numba.njit(cache=True)
def group_has_liberty(board, p, nbr, deg, seen, queue, tick):
    """Whether the group through the stone at ``p`` has a liberty. Returns (bool, new tick)."""
    c = board[p]
    tick += 1
    seen[p] = tick
    queue[0] = p
    head = 0
    tail = 1
    while head < tail:
        q = queue[head]
        head += 1
        for j in range(deg[q]):
            s = nbr[q, j]
            v = board[s]
            if v == EMPTY:
                return True, tick
            if v == c and seen[s] != tick:
                seen[s] = tick
                queue[tail] = s
                tail += 1
    return False, tick


@numba.njit(cache=True)
def dead_stone_kernel(board, nbr, deg, out):
    """``out`` [B] = a stone of ``board`` [B, N] whose group has no liberty, or -1 if none
    (set-up positions must have none)."""
    n = board.shape[1]
    seen = np.full(n, -1, np.int64)
    queue = np.empty(n, np.int32)
    tick = 0
    for b in range(board.shape[0]):
        out[b] = -1
        for p in range(n):
            if board[b, p] != EMPTY:
                ok, tick = group_has_liberty(board[b], p, nbr, deg, seen, queue, tick)
                if not ok:
                    out[b] = p
                    break


@numba.njit(cache=True)
def fill_legal(board, size, zhash, hashes, nrepeat, ko_point, me, superko, legal, pkeys,
               pb, gid, glibs, gtaken, gsize, ghash, queue, slot_key, slot_pt, slot_tick,
               tick):
    """Write the exact legal mask ``legal`` [N+1] of player ``me`` on ``board`` [N].

    The board is first copied into ``pb``, a (size+2)^2 frame whose border holds 3, so the
    four neighbours of a padded point q are q-1, q+1, q-W, q+W with no edge tests. One flood
    fill labels every group with its liberties (0, 1 or "2 or more"), size and hash; each
    empty point then needs only its neighbours' groups to know captures, suicide and the
    hash of the resulting position. For positional superko the candidate hashes go into a
    small open-addressing table that the repeatable history ``hashes[:nrepeat]`` is probed
    against: O(points + history), not O(points * history). Returns the new tick.
    """
    w = size + 2
    for r in range(size):
        for c in range(size):
            q = (r + 1) * w + c + 1
            pb[q] = board[r * size + c]
            gid[q] = -1
    dirs = (-w, -1, 1, w)
    ng = 0
    for r in range(size):
        for cc in range(size):
            p = (r + 1) * w + cc + 1
            c = pb[p]
            if c == EMPTY or gid[p] >= 0:
                continue
            gid[p] = ng
            queue[0] = p
            head = 0
            tail = 1
            lib1 = -1  # first liberty seen; a second, different one means "2 or more"
            many = False
            h = np.uint64(0)
            while head < tail:
                q = queue[head]
                head += 1
                h ^= pkeys[q, c]
                for d in dirs:
                    s = q + d
                    v = pb[s]
                    if v == EMPTY:
                        if lib1 < 0:
                            lib1 = s
                        elif s != lib1:
                            many = True
                    elif v == c and gid[s] < 0:
                        gid[s] = ng
                        queue[tail] = s
                        tail += 1
            glibs[ng] = 2 if many else (1 if lib1 >= 0 else 0)
            gtaken[ng] = -1
            gsize[ng] = tail
            ghash[ng] = h
            ng += 1

    check = superko and nrepeat > 0
    tick += 1  # marks the table slots filled for this game; older stamps read as empty
    tm = slot_key.shape[0] - 1
    tmask = np.uint64(tm)
    opp = 3 - me
    for r in range(size):
        for cc in range(size):
            p = (r + 1) * w + cc + 1
            a = r * size + cc
            if pb[p] != EMPTY:
                legal[a] = False
                continue
            ok = False
            h = zhash ^ pkeys[p, me]
            ncap = 0
            for d in dirs:
                v = pb[p + d]
                if v == EMPTY:
                    ok = True
                elif v == me:
                    # a friendly group in atari has p as its only liberty: joining it gives none
                    if glibs[gid[p + d]] == 2:
                        ok = True
                elif v == opp:
                    g = gid[p + d]
                    # an enemy group with one liberty (necessarily p) is captured; the stamp
                    # counts it once even when it touches p on several sides
                    if glibs[g] == 1 and gtaken[g] != p:
                        gtaken[g] = p
                        ok = True
                        h ^= ghash[g]
                        ncap += gsize[g]
            if ok and a == ko_point and ncap == 1:
                ok = False  # immediate recapture of a single stone
            legal[a] = ok
            if ok and check:
                idx = np.int64(h & tmask)
                while slot_tick[idx] == tick:
                    idx = (idx + 1) & tm
                slot_tick[idx] = tick
                slot_key[idx] = h
                slot_pt[idx] = a
    if check:
        for i in range(nrepeat):
            h = hashes[i]
            idx = np.int64(h & tmask)
            while slot_tick[idx] == tick:
                if slot_key[idx] == h:
                    legal[slot_pt[idx]] = False
                    break
                idx = (idx + 1) & tm
    legal[size * size] = True  # passing is always allowed in a running game
    return tick


@numba.njit(cache=True)
def _scratch(size, tsize):
    """Per-call work arrays for ``fill_legal`` (padded frame and table)."""
    w = size + 2
    pb = np.full(w * w, 3, np.int8)  # the border stays 3: neither empty nor a colour
    gid = np.empty(w * w, np.int32)
    glibs = np.empty(w * w, np.int8)
    gtaken = np.empty(w * w, np.int32)
    gsize = np.empty(w * w, np.int32)
    ghash = np.empty(w * w, np.uint64)
    queue = np.empty(w * w, np.int32)
    slot_key = np.empty(tsize, np.uint64)
    slot_pt = np.empty(tsize, np.int32)
    slot_tick = np.full(tsize, -1, np.int64)
    return pb, gid, glibs, gtaken, gsize, ghash, queue, slot_key, slot_pt, slot_tick


@numba.njit(cache=True)
def area_score(board, nbr, deg, seen, queue, tick):
    """Tromp-Taylor area of ``board`` [N]: stones plus empty regions that reach only that
    colour. Returns (black, white, new tick)."""
    n = board.shape[0]
    black = 0
    white = 0
    tick += 1
    region_tick = tick  # one stamp marks every empty point visited in this call
    for p in range(n):
        c = board[p]
        if c == BLACK:
            black += 1
            continue
        if c == WHITE:
            white += 1
            continue
        if seen[p] == region_tick:
            continue
        seen[p] = region_tick
        queue[0] = p
        head = 0
        tail = 1
        reach_b = False
        reach_w = False
        while head < tail:
            q = queue[head]
            head += 1
            for j in range(deg[q]):
                s = nbr[q, j]
                v = board[s]
                if v == EMPTY:
                    if seen[s] != region_tick:
                        seen[s] = region_tick
                        queue[tail] = s
                        tail += 1
                elif v == BLACK:
                    reach_b = True
                else:
                    reach_w = True
        if reach_b and not reach_w:
            black += tail
        elif reach_w and not reach_b:
            white += tail
    return black, white, tick


@numba.njit(cache=True)
def score_kernel(board, komi, nbr, deg, out):
    """``out`` [B] float64 = black area - white area - komi of each board in ``board`` [B, N]."""
    n = board.shape[1]
    seen = np.full(n, -1, np.int64)
    queue = np.empty(n, np.int32)
    tick = 0
    for b in range(board.shape[0]):
        black, white, tick = area_score(board[b], nbr, deg, seen, queue, tick)
        out[b] = black - white - komi


@numba.njit(cache=True)
def _outcome_of(margin):
    if margin > 0:
        return 1
    if margin < 0:
        return -1
    return 0


@numba.njit(cache=True)
def refresh_kernel(board, zhash, hashes, repeat_limit, ko_point, to_play, terminal, legal,
                   superko, size, pkeys, tsize):
    """Recompute the legal mask [B, N+1] of every game from the rest of its state."""
    pb, gid, glibs, gtaken, gsize, ghash, queue, slot_key, slot_pt, slot_tick = _scratch(
        size, tsize)
    tick = 0
    for b in range(board.shape[0]):
        if terminal[b]:
            legal[b, :] = False
            continue
        tick = fill_legal(board[b], size, zhash[b], hashes[b], repeat_limit[b], ko_point[b],
                          to_play[b] + 1, superko, legal[b], pkeys, pb, gid, glibs, gtaken,
                          gsize, ghash, queue, slot_key, slot_pt, slot_tick, tick)


@numba.njit(cache=True)
def step_kernel(actions, board, board_history, zhash, hashes, nhashes, repeat_limit, ko_point,
                passes, captures, to_play, ply, terminal, outcome, legal, last_action,
                komi, max_moves, superko, size, nbr, deg, keys, pkeys, tsize):
    """Apply legal ``actions`` [B] (pass = N, -1 = finished game, skipped) in place, then
    update history, terminal flags, outcomes and the next legal masks."""
    n = board.shape[1]
    nhist = board_history.shape[1]
    pb, gid, glibs, gtaken, gsize, ghash, queue, slot_key, slot_pt, slot_tick = _scratch(
        size, tsize)
    seen = np.full(n, -1, np.int64)
    tick = 0
    for b in range(actions.shape[0]):
        a = actions[b]
        if a < 0:
            continue
        me = to_play[b] + 1
        opp = 3 - me
        ko_point[b] = -1
        if a == n:
            passes[b] += 1
        else:
            passes[b] = 0
            delta, ncap, cap_pt, tick = place_stone(board[b], a, me, nbr, deg, keys, seen,
                                                    queue, tick)
            zhash[b] ^= delta
            if ncap > 0:
                captures[b, to_play[b]] += ncap
                # Until the next capture every position holds a subset of the stones of the
                # one made now, while a move always adds a stone on an empty point: so only
                # positions before this one can ever be recreated.
                repeat_limit[b] = nhashes[b]
            if ncap == 1:
                # A ko: the new stone is alone and its only liberty is the point just emptied,
                # so the opponent could take it straight back.
                lone = True
                for j in range(deg[a]):
                    s = nbr[a, j]
                    if s != cap_pt and board[b, s] != opp:
                        lone = False
                if lone:
                    ko_point[b] = cap_pt
        if nhashes[b] < hashes.shape[1]:
            hashes[b, nhashes[b]] = zhash[b]
            nhashes[b] += 1
        for t in range(nhist - 1, 0, -1):
            board_history[b, t, :] = board_history[b, t - 1, :]
        if nhist > 0:
            board_history[b, 0, :] = board[b]
        ply[b] += 1
        last_action[b] = a
        to_play[b] = 1 - to_play[b]
        if passes[b] >= 2 or ply[b] >= max_moves:
            terminal[b] = True
            legal[b, :] = False
            black, white, tick = area_score(board[b], nbr, deg, seen, queue, tick)
            outcome[b] = _outcome_of(black - white - komi)
        else:
            tick = fill_legal(board[b], size, zhash[b], hashes[b], repeat_limit[b],
                              ko_point[b], opp, superko, legal[b], pkeys, pb, gid, glibs,
                              gtaken, gsize, ghash, queue, slot_key, slot_pt, slot_tick, tick)
