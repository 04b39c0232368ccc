"""Numba kernels for Go: placing stones with captures, exact legal masks, area scoring and
ownership.

Boards are flat ``[N]`` int8 rows (0 empty, 1 black, 2 white; point = row * size + col).
The state also keeps its groups: ``group`` [N] names each stone's group by one of its
points (the root) and ``libs`` [N] holds, at a root, the group's exact number of distinct
liberties. A move updates only the groups it touches, so the legal mask needs no flood
fill: a group in atari is one with ``libs == 1``.
Positions are identified by a Zobrist hash: the xor of ``keys[point, colour]`` over all
stones, so the empty board hashes to 0 and a capture is an xor of the captured group's
stored hash. Every kernel loops over the batch itself; the scratch arrays are allocated
once per call and reused from game to game, with "tick" stamps instead of clearing them.
All flood fills (captures, liberties, group labels, scoring regions) go through ``flood``.
The kernels a move runs are inlined (``inline="always"``, numba's own inliner): a call
between numba functions passes every array as a reference-counted struct, which cost a
few percent of a move.
"""

from __future__ import annotations

import numba
import numpy as np

EMPTY, BLACK, WHITE = 0, 1, 2

ZOBRIST_SEED = 0x60_5EED
"""Fixed seed: hashes are the same in every process and every run."""

COUNT_SHIFT = 55
"""A stored position key is the low 55 bits of the Zobrist hash with the number of stones on
the board (0..361 < 2**9) in the top 9 bits: superko compares an earlier position only with
moves that reach its stone count. A false ban now needs two positions with the same stone
count whose hashes agree in 55 bits (odds ~2**-55 per pair, only same-count pairs compared)."""
HASH_MASK = np.uint64((1 << COUNT_SHIFT) - 1)


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


def table_size(num_points: int) -> int:
    """Slots of an open-addressing table of ``num_points`` keys (load factor <= 1/4)."""
    t = 1
    while t < 4 * num_points:
        t *= 2
    return t


def reverse_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Open-addressing tables from a key back to its point, one row per colour (black,
    white): ``rev_key`` [2, T] uint64 and ``rev_pt`` [2, T] int32 (-1: free slot), probed
    linearly from ``key & (T - 1)``. A move that captures nothing turns hash z into
    z ^ keys[p, colour], so an earlier hash h is recreated by it exactly when h ^ z is the
    key of p: one probe per earlier position instead of one table insert per legal move.
    The stored keys keep only the hash bits of a position key (``HASH_MASK``); they are
    still distinct within a colour (checked here), so a probe names at most one point."""
    n = keys.shape[0]
    t = table_size(n)
    rev_key = np.zeros((2, t), np.uint64)
    rev_pt = np.full((2, t), -1, np.int32)
    for colour in (BLACK, WHITE):
        for p in range(n):
            k = keys[p, colour]
            idx = int(k) & (t - 1)
            while rev_pt[colour - 1, idx] >= 0:
                idx = (idx + 1) & (t - 1)
            rev_key[colour - 1, idx] = k & HASH_MASK
            rev_pt[colour - 1, idx] = p
        if np.unique(rev_key[colour - 1][rev_pt[colour - 1] >= 0]).size != n:
            raise ValueError("go: two Zobrist keys agree in their low bits")  # seed is fixed
    return rev_key, rev_pt


@numba.njit(cache=True, inline="always")
def position_key(zhash, stones):
    """The stored key of a position: hash bits below ``COUNT_SHIFT``, stone count above."""
    return (zhash & HASH_MASK) | (np.uint64(stones) << np.uint64(COUNT_SHIFT))


@numba.njit(cache=True)
def stone_count(board):
    """Stones on ``board`` [N]."""
    c = 0
    for p in range(board.shape[0]):
        c += board[p] != EMPTY  # no branch: the loop vectorises
    return c


@numba.njit(cache=True, inline="always")
def flood(board, start, nbr, deg, seen, stamp, queue, head, stop_at_liberty):
    """Breadth-first search over the points connected to ``start`` that hold the same value
    (a group of stones, or an empty region): the one search every kernel here uses.

    Visited points, and the liberties found, get ``seen[q] = stamp`` (a value not used
    before on ``seen``); the region's points are appended to ``queue[head:end]``. Returns
    (end, liberties, reach): liberties is the number of distinct empty neighbours (always 0
    for an empty region), reach has bit ``1 << v`` set for every other non-empty value ``v``
    next to the region (2: black, 4: white). With ``stop_at_liberty`` the search ends at the
    first liberty, so queue[head:end] is the whole group only when liberties is 0; most
    groups have one next to their first stone.
    """
    c = board[start]
    seen[start] = stamp
    queue[head] = start
    tail = head + 1
    libs = 0
    reach = 0
    while head < tail:
        q = queue[head]
        head += 1
        for j in range(deg[q]):
            s = nbr[q, j]
            v = board[s]
            if v == c:
                if seen[s] != stamp:
                    seen[s] = stamp
                    queue[tail] = s
                    tail += 1
            elif v == EMPTY:
                if seen[s] != stamp:
                    seen[s] = stamp
                    libs += 1
                    if stop_at_liberty:
                        return tail, libs, reach
            else:
                reach |= 1 << v
    return tail, libs, reach


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
        tail, libs, _ = flood(board, r, nbr, deg, seen, tick, queue, 0, True)
        if libs == 0:  # the search ran to completion, so queue[:tail] is the whole group
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
    tick += 1
    _, libs, _ = flood(board, p, nbr, deg, seen, tick, queue, 0, True)
    return libs > 0, tick


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
def label_groups(board, nbr, deg, group, libs, seen, queue, tick):
    """Set ``group`` and ``libs`` [N] from scratch for ``board`` [N] (set-up positions);
    empty points get group 0. Returns the new tick."""
    n = board.shape[0]
    group[:] = -1
    for p in range(n):
        if board[p] == EMPTY or group[p] >= 0:
            continue
        tick += 1  # a stamp per group: each counts its own liberties
        end, count, _ = flood(board, p, nbr, deg, seen, tick, queue, 0, False)
        for i in range(end):
            group[queue[i]] = p
        libs[p] = count
    for p in range(n):
        if group[p] < 0:
            group[p] = 0  # any in-range value: an empty point's flag ignores liberties
            libs[p] = 0
    return tick


@numba.njit(cache=True, inline="always")
def play_stone(board, group, libs, p, me, nbr, deg, keys, seen, queue, tick):
    """``place_stone`` that also keeps ``group`` and ``libs`` up to date: p was a liberty of
    each distinct group next to it; enemy groups left with none are removed and give a
    liberty to each distinct friendly group next to their stones; the new stone's group
    (merging its friendly neighbours) is relabelled and its liberties counted afresh.

    Returns (hash xor delta, stones captured, one captured point or -1, new tick).
    """
    opp = 3 - me
    board[p] = me
    delta = keys[p, me]
    ncap = 0
    cap_pt = -1
    d = deg[p]
    for k in range(d):
        r = nbr[p, k]
        if board[r] != opp:
            continue
        root = group[r]
        dup = False
        for j in range(k):
            t = nbr[p, j]
            if board[t] == opp and group[t] == root:
                dup = True  # the same group seen through an earlier neighbour
        if dup:
            continue
        libs[root] -= 1
        if libs[root] > 0:
            continue
        tick += 1
        tail, _, _ = flood(board, r, nbr, deg, seen, tick, queue, 0, False)
        for i in range(tail):
            board[queue[i]] = EMPTY
            delta ^= keys[queue[i], opp]
        for i in range(tail):
            q = queue[i]
            # each friendly group next to q gains q as a liberty, once
            for j in range(deg[q]):
                t = nbr[q, j]
                if board[t] != me or t == p:
                    continue  # p's own group is counted afresh below
                root_t = group[t]
                first = True
                for m in range(j):
                    u = nbr[q, m]
                    if board[u] == me and u != p and group[u] == root_t:
                        first = False
                if first:
                    libs[root_t] += 1
        ncap += tail
        cap_pt = queue[0]
    tick += 1
    tail, count, _ = flood(board, p, nbr, deg, seen, tick, queue, 0, False)
    for i in range(tail):
        group[queue[i]] = p
    libs[p] = count
    return delta, ncap, cap_pt, tick


@numba.njit(cache=True, inline="always")
def fill_legal(board, group, libs, nbr, deg, zhash, stones, hashes, nrepeat, ko_point, me,
               superko, legal, keys, rev_key, rev_pt, sc, tick):
    """Write the exact legal mask ``legal`` [N+1] of player ``me`` on ``board`` [N], which
    holds ``stones`` stones (``hashes`` holds position keys, see ``position_key``).

    With the liberties kept per group, a neighbour of an empty point reduces to a flag
    (bit 0: it makes a move there legal: an empty point, a friendly group with two or more
    liberties, an enemy group in atari; bit 1: an enemy group in atari, i.e. captured), so
    most points are decided by or-ing their neighbours' flags. Only captures need the taken
    groups' sizes and hashes (for ko and superko), found by ``flood`` once per group and
    call. Positional superko looks at each repeatable earlier position once, by its stone
    count: a move that captures nothing leaves ``stones + 1`` stones, so only positions with
    that many are probed in ``rev_key`` (see ``reverse_keys``); a capture leaves at most
    ``stones``, so only positions with no more are compared with the capturing moves' keys;
    the rest are skipped. O(points + history). Returns the new tick.
    """
    seen, queue, gstamp, gsize, ghash, gtaken, cap_pt, cap_hash, flag = sc
    n = board.shape[0]
    opp = 3 - me
    # flag of a neighbour by (value, min(liberties, 2)): row EMPTY, row me, row opp
    lut = np.zeros((3, 3), np.int8)
    lut[EMPTY, :] = 1
    lut[me, 2] = 1
    lut[opp, 1] = 3
    for p in range(n):  # once per point, not once per neighbour of every empty point
        flag[p] = lut[board[p], min(libs[group[p]], 2)]
    check = superko and nrepeat > 0
    tick += 1  # marks the group hashes found in this call (gstamp)
    call = tick
    ncm = 0
    lowest = stones + 1  # the fewest stones any legal move leaves (for superko's scan)
    for a in range(n):
        if board[a] != EMPTY:
            legal[a] = False
            continue
        f = 0
        for j in range(deg[a]):
            f |= flag[nbr[a, j]]
        if f & 2 == 0:
            legal[a] = f != 0
            continue
        # a capture: never suicide; find what it takes (each group once, even when it
        # touches a on several sides) for the ko rule and the new position's hash
        h = zhash ^ keys[a, me]
        ncap = 0
        for j in range(deg[a]):
            s = nbr[a, j]
            if board[s] != opp:
                continue
            g = group[s]
            if libs[g] != 1:
                continue
            if gstamp[g] != call:
                gstamp[g] = call
                tick += 1
                end, _, _ = flood(board, g, nbr, deg, seen, tick, queue, 0, False)
                hg = np.uint64(0)
                for i in range(end):
                    hg ^= keys[queue[i], opp]
                ghash[g] = hg
                gsize[g] = end
                gtaken[g] = -1
            if gtaken[g] != a:
                gtaken[g] = a
                h ^= ghash[g]
                ncap += gsize[g]
        ok = not (a == ko_point and ncap == 1)  # immediate recapture of a single stone
        legal[a] = ok
        if ok and check:
            cap_pt[ncm] = a
            cap_hash[ncm] = position_key(h, stones + 1 - ncap)
            ncm += 1
            lowest = min(lowest, stones + 1 - ncap)
    if check:
        row = me - 1
        tm = rev_pt.shape[1] - 1
        quiet = stones + 1  # the stone count after any move that captures nothing
        shift = np.uint64(COUNT_SHIFT)
        i = 0
        while i < nrepeat:
            h = hashes[i]
            count = np.int64(h >> shift)
            if count < lowest:
                # Each position has at most one stone more than the one before it, so the
                # next lowest - count - 1 ones have fewer than ``lowest`` too: skip them.
                i += lowest - count
                continue
            i += 1
            if count == quiet:
                d = (h ^ zhash) & HASH_MASK
                idx = np.int64(d & np.uint64(tm))
                while rev_pt[row, idx] >= 0:
                    if rev_key[row, idx] == d:
                        # A move at that point recreates h if it captures nothing. (If it
                        # did capture, h would be the board with a group of no liberties:
                        # never.)
                        legal[rev_pt[row, idx]] = False
                    idx = (idx + 1) & tm
            elif count < quiet:  # only a capture can leave this many
                for k in range(ncm):
                    if cap_hash[k] == h:
                        legal[cap_pt[k]] = False
    legal[n] = True  # passing is always allowed in a running game
    return tick


@numba.njit(cache=True)
def _scratch(n):
    """Per-call work arrays for ``fill_legal`` (flood marks, per-group hashes of the groups
    in atari, the capturing moves, the points' flags)."""
    seen = np.full(n, -1, np.int64)
    queue = np.empty(n, np.int32)
    gstamp = np.full(n, -1, np.int64)
    gsize = np.zeros(n, np.int32)
    ghash = np.zeros(n, np.uint64)
    gtaken = np.full(n, -1, np.int32)
    cap_pt = np.empty(n, np.int32)
    cap_hash = np.empty(n, np.uint64)
    flag = np.empty(n, np.int8)
    return seen, queue, gstamp, gsize, ghash, gtaken, cap_pt, cap_hash, flag


@numba.njit(cache=True)
def area_owner(board, nbr, deg, seen, queue, owner, tick):
    """Tromp-Taylor area of ``board`` [N]: stones plus empty regions that reach only that
    colour. Writes ``owner`` [N] int8 (+1 black's area, -1 white's, 0 an empty region that
    reaches both colours or neither), so that ``owner.sum()`` is black - white by
    construction. Returns (black, white, new tick)."""
    n = board.shape[0]
    black = 0
    white = 0
    tick += 1  # one stamp marks every empty point visited in this call
    for p in range(n):
        c = board[p]
        if c == BLACK:
            black += 1
            owner[p] = 1
        elif c == WHITE:
            white += 1
            owner[p] = -1
        elif seen[p] != tick:
            tail, _, reach = flood(board, p, nbr, deg, seen, tick, queue, 0, False)
            side = 0
            if reach == 1 << BLACK:
                black += tail
                side = 1
            elif reach == 1 << WHITE:
                white += tail
                side = -1
            for i in range(tail):
                owner[queue[i]] = side
    return black, white, tick


@numba.njit(cache=True)
def score_kernel(board, komi, nbr, deg, out):
    """``out`` [B] float64 = black area - white area - komi of each board in ``board`` [B, N]."""
    n = board.shape[1]
    seen = np.full(n, -1, np.int64)
    queue = np.empty(n, np.int32)
    owner = np.empty(n, np.int8)
    tick = 0
    for b in range(board.shape[0]):
        black, white, tick = area_owner(board[b], nbr, deg, seen, queue, owner, tick)
        out[b] = black - white - komi


@numba.njit(cache=True)
def ownership_kernel(board, nbr, deg, owner):
    """``owner`` [B, N] int8 = the Tromp-Taylor owner of every point of ``board`` [B, N]
    (``area_owner``: +1 black, -1 white, 0 neither); the same regions ``score_kernel``
    counts."""
    n = board.shape[1]
    seen = np.full(n, -1, np.int64)
    queue = np.empty(n, np.int32)
    tick = 0
    for b in range(board.shape[0]):
        _, _, tick = area_owner(board[b], nbr, deg, seen, queue, owner[b], tick)


@numba.njit(cache=True)
def _outcome_of(margin):
    if margin > 0:
        return 1
    if margin < 0:
        return -1
    return 0


@numba.njit(cache=True)
def refresh_kernel(board, group, libs, zhash, hashes, repeat_limit, ko_point, to_play, terminal,
                   legal, superko, nbr, deg, keys, rev_key, rev_pt):
    """Recompute the groups [B, N], liberties [B, N] and legal mask [B, N+1] of every game
    from its board and the rest of its state."""
    sc = _scratch(board.shape[1])
    seen, queue = sc[0], sc[1]
    tick = 0
    for b in range(board.shape[0]):
        tick = label_groups(board[b], nbr, deg, group[b], libs[b], seen, queue, tick)
        if terminal[b]:
            legal[b, :] = False
            continue
        tick = fill_legal(board[b], group[b], libs[b], nbr, deg, zhash[b],
                          stone_count(board[b]), hashes[b], repeat_limit[b], ko_point[b],
                          to_play[b] + 1, superko, legal[b], keys, rev_key, rev_pt, sc, tick)


@numba.njit(cache=True)
def step_kernel(actions, board, group, libs, old_history, board_history, zhash, hashes,
                nhashes, repeat_limit, ko_point, passes, captures, to_play, ply, terminal,
                outcome, legal, last_action, komi, max_moves, superko, nbr, deg, keys, rev_key,
                rev_pt):
    """Apply legal ``actions`` [B] (pass = N, -1 = finished game, skipped) in place, then
    update groups, history, terminal flags, outcomes and the next legal masks.

    ``board_history`` is written whole from ``old_history`` (shifted by one for the games
    that move), so the caller need not copy it first: one pass over it instead of two."""
    n = board.shape[1]
    nhist = board_history.shape[1]
    sc = _scratch(n)
    seen, queue = sc[0], sc[1]
    owner = np.empty(n, np.int8)  # area_owner's output, unused here: only the counts matter
    tick = 0
    for b in range(actions.shape[0]):
        a = actions[b]
        if a < 0:
            for t in range(nhist):
                for p in range(n):
                    board_history[b, t, p] = old_history[b, t, p]
            continue
        me = to_play[b] + 1
        opp = 3 - me
        ko_point[b] = -1
        full = nhashes[b] >= hashes.shape[1]
        # the newest stored key counts the stones now (unless the history is full)
        stones = -1 if full else np.int64(hashes[b, nhashes[b] - 1] >> np.uint64(COUNT_SHIFT))
        if a == n:
            passes[b] += 1
        else:
            passes[b] = 0
            delta, ncap, cap_pt, tick = play_stone(board[b], group[b], libs[b], a, me, nbr,
                                                   deg, keys, seen, queue, tick)
            zhash[b] ^= delta
            stones += 1 - ncap
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
        if full:
            stones = stone_count(board[b])
        else:
            hashes[b, nhashes[b]] = position_key(zhash[b], stones)
            nhashes[b] += 1
        # element loops rather than row slices: no array views made per row
        for t in range(nhist - 1, 0, -1):
            for p in range(n):
                board_history[b, t, p] = old_history[b, t - 1, p]
        if nhist > 0:
            for p in range(n):
                board_history[b, 0, p] = board[b, p]
        ply[b] += 1
        last_action[b] = a
        to_play[b] = 1 - to_play[b]
        if passes[b] >= 2 or ply[b] >= max_moves:
            terminal[b] = True
            legal[b, :] = False
            black, white, tick = area_owner(board[b], nbr, deg, seen, queue, owner, tick)
            outcome[b] = _outcome_of(black - white - komi)
        else:
            tick = fill_legal(board[b], group[b], libs[b], nbr, deg, zhash[b], stones,
                              hashes[b], repeat_limit[b], ko_point[b], opp, superko, legal[b],
                              keys, rev_key, rev_pt, sc, tick)
