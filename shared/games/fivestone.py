"""Five-stone chess ("5stone_chess"), a capture game on a 5x5 board (rules: docs/rules.md).

A 5x5 board; White's five stones start on the top row (row 0), Black's on the bottom row.
A move steps one own stone up, down, left or right onto an empty point; action =
``from_point * 4 + direction`` with directions 0 up (towards row 0), 1 down, 2 left, 3 right.
After a move, the row and the column through the destination are checked separately: if on
that line the mover has exactly two adjacent stones, the opponent exactly one stone touching
an end of the pair, and the other two points are empty, the opponent's stone is removed.
The mover wins when the opponent is left with fewer than two stones or no legal move; a
position (board and side to move) that occurs a second time, or reaching the ply cap, draws.

The board stores *players*, not colours: 1 is the first player's stone, 2 the second's, so
the kernel never needs to know which colour moved first. Each game keeps the key of every
position it has passed through (``history``), for the repetition rule. The key is exact, not
a random Zobrist hash: 2 bits per point plus a side-to-move bit fit in 51 bits, so it is
Zobrist hashing with the keys ``code << 2*point`` — XOR-updatable like Zobrist, deterministic
(no seed) and collision-free, which a rule that decides games should be.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numba
import numpy as np

from zeroforge.shared.games.base import Game, GameSpec, IllegalMoveError, State, Symmetry
from zeroforge.shared.games.sampling import draw_random_moves

SIZE = 5
POINTS = SIZE * SIZE
NUM_ACTIONS = POINTS * 4
EMPTY, FIRST, SECOND = 0, 1, 2
DIRECTIONS = ("up", "down", "left", "right")
_DR = (-1, 1, 0, 0)
_DC = (0, 0, -1, 1)
SIDE_BIT = 1 << (2 * POINTS)
"""Key bit set when the second player is to move."""
COLUMNS = "abcde"
COLOURS = ("black", "white")
_STEP_RE = re.compile(r"^([a-z])(\d+)\s*-\s*([a-z])(\d+)$")
_WORD_RE = re.compile(r"^([a-z])(\d+)\s*-\s*(up|down|left|right)$")


@dataclass
class FiveStoneState(State):
    board: np.ndarray
    """[B, 25] int8: 0 empty, 1 first player's stone, 2 second player's (row-major from top)."""
    history: np.ndarray
    """[B, max_moves + 1] int64: ``history[b, i]`` is the key of the position after ply i
    (side to move included); -1 where unknown (before a position set up by hand)."""
    since: np.ndarray
    """[B] int32: ply of the last capture (or of the set-up). Captures cannot be undone, so
    no position before it can recur and the repetition check stops there."""


# --- numba kernels ---------------------------------------------------------------------
@numba.njit(cache=True, inline="always")
def _offset(d):
    """Point-index change of a step in direction ``d`` (0 up, 1 down, 2 left, 3 right)."""
    return -SIZE if d == 0 else (SIZE if d == 1 else (-1 if d == 2 else 1))


@numba.njit(cache=True, inline="always")
def _capture_line(board, start, stride, me, op):
    """Point of the opponent stone that the line ``start + i*stride`` (i < 5) captures, or -1."""
    mine = 0
    theirs = 0
    first_mine = -1
    their_at = -1
    for i in range(SIZE):
        v = board[start + i * stride]
        if v == me:
            mine += 1
            if first_mine < 0:
                first_mine = i
        elif v == op:
            theirs += 1
            their_at = i
    # exactly 2 + 1 stones means the two other points are empty
    if mine != 2 or theirs != 1:
        return -1
    if board[start + (first_mine + 1) * stride] != me:
        return -1  # the two own stones are not adjacent
    if their_at == first_mine - 1 or their_at == first_mine + 2:
        return start + their_at * stride
    return -1


@numba.njit(cache=True, inline="always")
def _apply_move(board, action, me):
    """Move and capture on ``board`` [25] in place; returns the XOR change of the key and
    the number of stones captured."""
    op = 3 - me
    src = action >> 2
    dst = src + _offset(action & 3)
    board[src] = EMPTY
    board[dst] = me
    code = np.int64(me)
    delta = (code << (2 * src)) ^ (code << (2 * dst))
    captured = 0
    row, col = dst // SIZE, dst % SIZE
    for start, stride in ((row * SIZE, 1), (col, SIZE)):
        victim = _capture_line(board, start, stride, me, op)
        if victim >= 0:
            board[victim] = EMPTY
            delta ^= np.int64(op) << (2 * victim)
            captured += 1
    return delta, captured


@numba.njit(cache=True)
def _fill_legal(board, me, legal):
    """Write the legal mask [100] of player ``me`` on ``board`` [25]; returns
    (own stones, legal moves)."""
    legal[:] = False
    stones = 0
    moves = 0
    for p in range(POINTS):
        if board[p] != me:
            continue
        stones += 1
        r, c = p // SIZE, p % SIZE
        if r > 0 and board[p - SIZE] == EMPTY:
            legal[4 * p] = True
            moves += 1
        if r < SIZE - 1 and board[p + SIZE] == EMPTY:
            legal[4 * p + 1] = True
            moves += 1
        if c > 0 and board[p - 1] == EMPTY:
            legal[4 * p + 2] = True
            moves += 1
        if c < SIZE - 1 and board[p + 1] == EMPTY:
            legal[4 * p + 3] = True
            moves += 1
    return stones, moves


@numba.njit(cache=True)
def _position_key(board, to_play):
    key = np.int64(0)
    for p in range(POINTS):
        key |= np.int64(board[p]) << (2 * p)
    if to_play == 1:
        key |= SIDE_BIT
    return key


@numba.njit(cache=True)
def _step_kernel(board, to_play, ply, terminal, outcome, legal, last_action, history, since,
                 actions, max_moves):
    for b in range(actions.shape[0]):
        a = actions[b]
        if a < 0:
            continue
        me = to_play[b] + 1
        delta, captured = _apply_move(board[b], a, me)
        key = history[b, ply[b]] ^ delta ^ SIDE_BIT
        ply[b] += 1
        n = ply[b]
        history[b, n] = key
        to_play[b] = 1 - to_play[b]
        last_action[b] = a
        if captured:
            since[b] = n
        stones, moves = _fill_legal(board[b], 3 - me, legal[b])
        if stones < 2 or moves == 0:
            terminal[b] = True
            outcome[b] = 1 if me == FIRST else -1
            legal[b, :] = False
            continue
        # same side to move <=> same ply parity, so only every other position can match
        repeated = False
        for i in range(n - 2, since[b] - 1, -2):
            if history[b, i] == key:
                repeated = True
                break
        if repeated or n >= max_moves:
            terminal[b] = True
            outcome[b] = 0
            legal[b, :] = False


@numba.njit(cache=True)
def _random_playout_kernel(seed, board, to_play, ply, terminal, outcome, legal, last_action,
                           history, since, max_moves):
    """Every running game of the batch played to its end in place, each move drawn as
    ``sampling.sample_legal`` draws it and played by ``_step_kernel`` (repetitions and the
    ply cap included: a playout here runs up to ``max_moves`` plies); ``seed`` seeds
    numba's own generator."""
    np.random.seed(seed)
    actions = np.empty(board.shape[0], np.int32)
    uniforms = np.empty(board.shape[0])
    while draw_random_moves(legal, uniforms, actions):
        _step_kernel(board, to_play, ply, terminal, outcome, legal, last_action, history,
                     since, actions, max_moves)


@numba.njit(cache=True)
def _start_kernel(board, to_play, terminal, outcome, legal, history, ply):
    """Fill legal masks, keys and game-over status of freshly set-up positions."""
    for b in range(board.shape[0]):
        history[b, ply[b]] = _position_key(board[b], to_play[b])
        me = to_play[b] + 1
        stones, moves = _fill_legal(board[b], me, legal[b])
        if stones < 2 or moves == 0:
            terminal[b] = True
            outcome[b] = -1 if me == FIRST else 1
            legal[b, :] = False


@numba.njit(cache=True)
def _repeat_planes(board, to_play, ply, history, since, legal, out_from, out_to):
    """Mark the source and destination of every legal move that would repeat a position."""
    scratch = np.empty(POINTS, np.int8)
    for b in range(board.shape[0]):
        me = to_play[b] + 1
        n = ply[b] + 1
        key = history[b, ply[b]] ^ SIDE_BIT
        for a in range(NUM_ACTIONS):
            if not legal[b, a]:
                continue
            scratch[:] = board[b]
            delta, captured = _apply_move(scratch, a, me)
            if captured:
                continue  # fewer stones than every earlier position
            after = key ^ delta
            for i in range(n - 2, since[b] - 1, -2):
                if history[b, i] == after:
                    src = a >> 2
                    out_from[b, src] = 1
                    out_to[b, src + _offset(a & 3)] = 1
                    break


# --- helpers for notation ------------------------------------------------------------------
def _destination(action: int) -> int | None:
    """Point that ``action`` moves to, or None if it leaves the board."""
    src, d = divmod(action, 4)
    r, c = divmod(src, SIZE)
    r, c = r + _DR[d], c + _DC[d]
    if 0 <= r < SIZE and 0 <= c < SIZE:
        return r * SIZE + c
    return None


def point_name(point: int) -> str:
    """``c3``-style name: column a-e from the left, row 1-5 from the bottom."""
    r, c = divmod(point, SIZE)
    return f"{COLUMNS[c]}{SIZE - r}"


def _parse_point(col: str, row: str, text: str) -> int:
    if col not in COLUMNS or not 1 <= int(row) <= SIZE:
        raise IllegalMoveError(f"{text!r}: {col}{row} is off the board (a1-e5)")
    return (SIZE - int(row)) * SIZE + COLUMNS.index(col)


class FiveStone(Game[FiveStoneState]):
    """Five-stone chess; ``first`` is the colour that moves first (the first player)."""

    name = "5stone_chess"
    version = 1
    OBS_PLANES = 5

    def __init__(self, first: str = "black", max_moves: int = 200) -> None:
        first = str(first).lower()
        if first not in COLOURS:
            raise ValueError(f"5stone_chess: first={first!r} must be 'black' or 'white'")
        if not 1 <= int(max_moves) <= 100_000:
            raise ValueError(f"5stone_chess: max_moves={max_moves} must be 1..100000")
        self.first = first
        self.max_moves = int(max_moves)
        # board code of each colour: the first player's stones are 1 whatever their colour
        self.code = {first: FIRST, COLOURS[1 - COLOURS.index(first)]: SECOND}
        options = []
        if first != "black":
            options.append(f"first={first}")
        if self.max_moves != 200:
            options.append(f"max_moves={self.max_moves}")
        self.spec = GameSpec(
            name=self.name,
            version=self.version,
            board_shape=(SIZE, SIZE),
            num_actions=NUM_ACTIONS,
            obs_shape=(self.OBS_PLANES, SIZE, SIZE),
            spec_string=self.name + (":" + ",".join(options) if options else ""),
            max_moves=self.max_moves,
        )
        self._symmetries = _lr_symmetries()
        start = np.zeros(POINTS, np.int8)
        start[:SIZE] = self.code["white"]
        start[-SIZE:] = self.code["black"]
        self._start_board = start

    # --- batched rules -------------------------------------------------------------------
    def init(self, batch: int) -> FiveStoneState:
        return self.from_boards(np.tile(self._start_board, (batch, 1)), np.zeros(batch, np.int8))

    def from_boards(self, board: np.ndarray, to_play: np.ndarray,
                    ply: np.ndarray | int = 0) -> FiveStoneState:
        """States for positions set up by hand: ``board`` [B, 25] of player codes (0 empty,
        1 first player, 2 second), ``to_play`` [B], ``ply`` [B] (or one int) moves already
        played. Earlier positions are unknown, so repetitions count from the set-up on. A
        position where the mover has fewer than two stones or no move is already lost."""
        board = np.array(board, dtype=np.int8).reshape(-1, POINTS)
        batch = board.shape[0]
        if not np.isin(board, (EMPTY, FIRST, SECOND)).all():
            raise ValueError("5stone_chess: board values must be 0, 1 or 2")
        ply = np.broadcast_to(np.asarray(ply, np.int32), (batch,)).copy()
        if (ply < 0).any() or (ply >= self.max_moves).any():
            raise ValueError(f"5stone_chess: ply must be 0..{self.max_moves - 1}")
        s = FiveStoneState(
            to_play=np.asarray(to_play, np.int8).reshape(batch).copy(),
            ply=ply,
            terminal=np.zeros(batch, bool),
            outcome=np.zeros(batch, np.int8),
            legal=np.zeros((batch, NUM_ACTIONS), bool),
            last_action=np.full(batch, -1, np.int32),
            board=board.copy(),
            history=np.full((batch, self.max_moves + 1), -1, np.int64),
            since=ply.copy(),
        )
        _start_kernel(s.board, s.to_play, s.terminal, s.outcome, s.legal, s.history, s.ply)
        return s

    def from_ascii(self, picture: str, to_move: str | None = None,
                   ply: int = 0) -> FiveStoneState:
        """A one-game state from a picture of five rows, top (row 5) first, of ``B`` (black),
        ``W`` (white) and ``.``; spaces are ignored. ``to_move`` is "black" or "white"
        (default: the first player)."""
        rows = ["".join(line.split()) for line in picture.strip().splitlines()]
        rows = [r for r in rows if r]
        if len(rows) != SIZE or any(len(r) != SIZE for r in rows):
            raise ValueError(f"5stone_chess: picture must be 5 rows of 5 points, got {rows}")
        symbol = {".": EMPTY, "B": self.code["black"], "W": self.code["white"]}
        try:
            board = np.array([[symbol[ch.upper()] for ch in r] for r in rows], np.int8)
        except KeyError as err:
            raise ValueError(f"5stone_chess: unknown symbol {err} (use B, W, .)") from None
        mover = self.first if to_move is None else to_move.lower()
        if mover not in COLOURS:
            raise ValueError(f"5stone_chess: to_move={to_move!r} must be 'black' or 'white'")
        return self.from_boards(board.reshape(1, POINTS), np.array([self.code[mover] - 1]), ply)

    def _step(self, state: FiveStoneState, actions: np.ndarray) -> FiveStoneState:
        s = state.copy()
        _step_kernel(s.board, s.to_play, s.ply, s.terminal, s.outcome, s.legal, s.last_action,
                     s.history, s.since, actions, self.max_moves)
        return s

    def random_playout_ends(self, state: FiveStoneState, rng: np.random.Generator
                            ) -> FiveStoneState:
        """A copy of ``state`` where ``random_playout`` left it: every game over."""
        s = state.copy()
        _random_playout_kernel(int(rng.integers(2**32)), s.board, s.to_play, s.ply,
                               s.terminal, s.outcome, s.legal, s.last_action, s.history,
                               s.since, self.max_moves)
        return s

    def observe(self, state: FiveStoneState) -> np.ndarray:
        """[B, 5, 5, 5] uint8 from the mover's view:

        0. the mover's stones;
        1. the opponent's stones;
        2. all ones if the mover is the first player;
        3. stones whose legal move would repeat an earlier position (an immediate draw);
        4. the points those moves go to.

        Planes 3-4 let a network see the repetition rule, which depends on the history and
        not on the board alone. They are per point, not per direction, so that the left-right
        reflection maps them by permuting points only.
        """
        b = state.batch_size
        mover = (state.to_play + 1).astype(np.int8)[:, None]
        obs = np.zeros((b, self.OBS_PLANES, POINTS), np.uint8)
        obs[:, 0] = state.board == mover
        obs[:, 1] = (state.board != mover) & (state.board != EMPTY)
        obs[:, 2] = (state.to_play == 0)[:, None]
        _repeat_planes(state.board, state.to_play, state.ply, state.history, state.since,
                       state.legal, obs[:, 3], obs[:, 4])
        return obs.reshape(b, self.OBS_PLANES, SIZE, SIZE)

    def symmetries(self) -> list[Symmetry]:
        """Identity and the left-right reflection (directions left and right swap)."""
        return self._symmetries

    # --- for people ------------------------------------------------------------------------
    def parse_action(self, text: str) -> int:
        """``c1-c2`` (a step to an orthogonally adjacent point), or ``c1-up`` / ``-down`` /
        ``-left`` / ``-right`` (which also names steps off the board, always illegal)."""
        t = "".join(text.split()).lower()
        word = _WORD_RE.match(t)
        if word:
            src = _parse_point(word[1], word[2], text)
            return src * 4 + DIRECTIONS.index(word[3])
        step = _STEP_RE.match(t)
        if not step:
            raise IllegalMoveError(f"{text!r} is not a move like b1-b2")
        src = _parse_point(step[1], step[2], text)
        dst = _parse_point(step[3], step[4], text)
        for d in range(4):
            if _destination(src * 4 + d) == dst:
                return src * 4 + d
        raise IllegalMoveError(
            f"{text!r}: {point_name(dst)} is not a step up, down, left or right from "
            f"{point_name(src)}"
        )

    def format_action(self, action: int) -> str:
        src, d = divmod(int(action), 4)
        dst = _destination(int(action))
        return f"{point_name(src)}-{DIRECTIONS[d] if dst is None else point_name(dst)}"

    def colour_of(self, player: int) -> str:
        """Colour of player 0 (first) or 1 (second)."""
        return self.first if player == 0 else COLOURS[1 - COLOURS.index(self.first)]

    def render(self, state: FiveStoneState, index: int = 0) -> str:
        symbols = {EMPTY: ".", self.code["black"]: "B", self.code["white"]: "W"}
        board = state.board[index]
        letters = " ".join(COLUMNS)
        lines = [f"  {letters}"]
        for r in range(SIZE):
            row = " ".join(symbols[int(v)] for v in board[r * SIZE:(r + 1) * SIZE])
            lines.append(f"{SIZE - r} {row} {SIZE - r}")
        lines.append(f"  {letters}")
        ply = int(state.ply[index])
        if state.terminal[index]:
            result = int(state.outcome[index])
            if result:
                status = f"game over: {self.colour_of(0 if result > 0 else 1).title()} wins"
            elif ply >= self.max_moves:
                status = "game over: draw (move limit)"
            else:
                status = "game over: draw (repetition)"
        else:
            status = f"{self.colour_of(int(state.to_play[index])).title()} to play"
        status += f", ply {ply}/{self.max_moves}"
        last = int(state.last_action[index])
        if last >= 0:
            status += f", last move {self.format_action(last)}"
        lines.append(status)
        return "\n".join(lines)

    def _illegal_reason(self, state: FiveStoneState, index: int, action: int) -> str:
        src = action // 4
        board = state.board[index]
        me = int(state.to_play[index]) + 1
        if board[src] != me:
            whose = "it is empty" if board[src] == EMPTY else "the stone there is the opponent's"
            return f"no own stone on {point_name(src)} ({whose})"
        dst = _destination(action)
        if dst is None:
            return f"{point_name(src)} {DIRECTIONS[action % 4]} is off the board"
        if board[dst] != EMPTY:
            return f"{point_name(dst)} is occupied"
        return "the rules forbid it"


def _lr_symmetries() -> list[Symmetry]:
    points = np.arange(POINTS)
    mirror = (points // SIZE) * SIZE + (SIZE - 1 - points % SIZE)
    swap = np.array([0, 1, 3, 2])  # up and down stay, left and right trade places
    actions = np.arange(NUM_ACTIONS)
    action_perm = mirror[actions // 4] * 4 + swap[actions % 4]
    return [
        Symmetry("identity", points.astype(np.int64), actions.astype(np.int64)),
        Symmetry("flip_lr", mirror.astype(np.int64), action_perm.astype(np.int64)),
    ]


def make_fivestone(first: str = "black", max_moves: int = 200) -> FiveStone:
    """Five-stone chess from registry options (``5stone_chess:first=white,max_moves=100``)."""
    return FiveStone(first=first, max_moves=int(max_moves))
