"""Free-style m,n,k gomoku (and tic-tac-toe, its 3x3 k=3 case).

Black (the first player) moves first; a move puts one stone on an empty point; k or more
in a row in any of the four line directions wins (with ``exact=True`` only exactly k wins:
"standard gomoku"); a full board with no line is a draw. The win check looks only at the
lines through the stone just played, in a numba kernel that loops over the batch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numba
import numpy as np

from zeroforge.shared.games.base import (
    Game,
    GameSpec,
    IllegalMoveError,
    State,
    format_point,
    parse_point,
    render_grid,
    square_symmetries,
)
from zeroforge.shared.games.sampling import draw_random_moves

EMPTY, FIRST, SECOND = 0, 1, 2


@dataclass
class GomokuState(State):
    board: np.ndarray
    """[B, H*W] int8: 0 empty, 1 first player's stone (black / X), 2 second player's."""


@numba.njit(cache=True, inline="always")
def _run_length(board, point, dr, dc, color, height, width):
    """Stones of ``color`` in a row from ``point`` (excluded) in direction (dr, dc)."""
    r, c = divmod(point, width)
    n = 0
    r += dr
    c += dc
    while 0 <= r < height and 0 <= c < width and board[r * width + c] == color:
        n += 1
        r += dr
        c += dc
    return n


@numba.njit(cache=True)
def _makes_line(board, point, color, height, width, k, exact):
    """Whether the stone of ``color`` at ``point`` completes a winning line."""
    for d in range(4):
        dr = 0 if d == 0 else 1
        dc = 1 if d == 0 else (0 if d == 1 else (1 if d == 2 else -1))
        n = 1 + _run_length(board, point, dr, dc, color, height, width)
        n += _run_length(board, point, -dr, -dc, color, height, width)
        if n == k or (n > k and not exact):
            return True
    return False


@numba.njit(cache=True)
def _step_kernel(board, to_play, ply, terminal, outcome, legal, last_action, actions,
                 height, width, k, exact):
    size = height * width
    for b in range(actions.shape[0]):
        a = actions[b]
        if a < 0:
            continue
        color = to_play[b] + 1
        board[b, a] = color
        legal[b, a] = False
        ply[b] += 1
        last_action[b] = a
        to_play[b] = 1 - to_play[b]
        if _makes_line(board[b], a, color, height, width, k, exact):
            terminal[b] = True
            outcome[b] = 1 if color == FIRST else -1
            legal[b, :] = False
        elif ply[b] == size:
            terminal[b] = True
            outcome[b] = 0


@numba.njit(cache=True)
def _random_playout_kernel(seed, board, to_play, ply, terminal, outcome, legal, last_action,
                           height, width, k, exact):
    """Play every running game of the batch to its end in place, each move drawn uniformly
    from the legal ones (as ``sampling.sample_legal`` draws them) and played by
    ``_step_kernel``; the outcomes are left in ``outcome``. One call for the whole rollout:
    the pure-UCT baseline's playouts cost the moves, not a state copy and a Python round
    trip per ply. ``seed`` seeds numba's own generator."""
    np.random.seed(seed)
    actions = np.empty(board.shape[0], np.int32)
    uniforms = np.empty(board.shape[0])
    while draw_random_moves(legal, uniforms, actions):
        _step_kernel(board, to_play, ply, terminal, outcome, legal, last_action, actions,
                     height, width, k, exact)


class Gomoku(Game[GomokuState]):
    """Free-style m x n, k-in-a-row; ``exact=True`` makes overlines not count."""

    name = "gomoku"
    SYMBOLS = {EMPTY: ".", FIRST: "X", SECOND: "O"}

    def __init__(self, width: int = 15, height: int | None = None, k: int = 5,
                 exact: bool = False) -> None:
        height = width if height is None else height
        if not (3 <= width <= 19 and 3 <= height <= 19):
            raise ValueError(f"gomoku board {width}x{height}: sides must be 3..19")
        if not 2 <= k <= max(width, height):
            raise ValueError(f"gomoku k={k} must be 2..{max(width, height)}")
        self.width, self.height, self.k, self.exact = int(width), int(height), int(k), bool(exact)
        size = self.width * self.height
        self.spec = GameSpec(
            name=self.name,
            version=1,
            board_shape=(self.height, self.width),
            num_actions=size,
            obs_shape=(4, self.height, self.width),
            spec_string=self._spec_string(),
            max_moves=size,
        )
        self._symmetries = square_symmetries(self.height, self.width)

    def _spec_string(self) -> str:
        shape = (f"size={self.width}" if self.width == self.height
                 else f"width={self.width},height={self.height}")
        return f"gomoku:{shape},k={self.k}" + (",exact=true" if self.exact else "")

    # --- batched rules -----------------------------------------------------------------
    def init(self, batch: int) -> GomokuState:
        size = self.width * self.height
        return GomokuState(
            to_play=np.zeros(batch, np.int8),
            ply=np.zeros(batch, np.int32),
            terminal=np.zeros(batch, bool),
            outcome=np.zeros(batch, np.int8),
            legal=np.ones((batch, size), bool),
            last_action=np.full(batch, -1, np.int32),
            board=np.zeros((batch, size), np.int8),
        )

    def _step(self, state: GomokuState, actions: np.ndarray) -> GomokuState:
        s = state.copy()
        _step_kernel(s.board, s.to_play, s.ply, s.terminal, s.outcome, s.legal, s.last_action,
                     actions, self.height, self.width, self.k, self.exact)
        return s

    def random_playout_ends(self, state: GomokuState, rng: np.random.Generator
                            ) -> GomokuState:
        """A copy of ``state`` where ``random_playout`` left it: every game over."""
        s = state.copy()
        _random_playout_kernel(int(rng.integers(2**32)), s.board, s.to_play, s.ply,
                               s.terminal, s.outcome, s.legal, s.last_action, self.height,
                               self.width, self.k, self.exact)
        return s

    def observe(self, state: GomokuState) -> np.ndarray:
        """[B, 4, H, W] uint8: own stones, opponent stones, last move, first player to move."""
        b = state.batch_size
        mover = (state.to_play + 1).astype(np.int8)[:, None]
        obs = np.zeros((b, 4, self.height * self.width), np.uint8)
        obs[:, 0] = state.board == mover
        obs[:, 1] = (state.board != mover) & (state.board != EMPTY)
        played = np.flatnonzero(state.last_action >= 0)
        obs[played, 2, state.last_action[played]] = 1
        obs[:, 3] = (state.to_play == 0)[:, None]
        return obs.reshape(b, 4, self.height, self.width)

    def symmetries(self):
        return self._symmetries

    # --- for people ----------------------------------------------------------------------
    def parse_action(self, text: str) -> int:
        return parse_point(text, self.height, self.width)

    def format_action(self, action: int) -> str:
        return format_point(int(action), self.height, self.width)

    def render(self, state: GomokuState, index: int = 0) -> str:
        mover = "XO"[int(state.to_play[index])]
        if state.terminal[index]:
            res = {1: "X wins", -1: "O wins", 0: "draw"}[int(state.outcome[index])]
            status = f"game over: {res}"
        else:
            status = f"{mover} to play"
        last = int(state.last_action[index])
        if last >= 0:
            status += f", last move {self.format_action(last)}"
        return render_grid(state.board[index], self.SYMBOLS, self.height, self.width, status)

    def _illegal_reason(self, state: GomokuState, index: int, action: int) -> str:
        if state.board[index, action] != EMPTY:
            return f"{self.format_action(action)} is occupied"
        return "the rules forbid it"


class TicTacToe(Gomoku):
    """3x3, three in a row: the m,n,k game with m = n = k = 3. Moves: ``B2`` or 1-9."""

    name = "tictactoe"

    def __init__(self) -> None:
        super().__init__(width=3, height=3, k=3)
        self.spec = dataclasses.replace(self.spec, name=self.name, spec_string=self.name)

    def parse_action(self, text: str) -> int:
        t = text.strip()
        if t.isdigit():
            n = int(t)
            if not 1 <= n <= 9:
                raise IllegalMoveError(f"{text!r}: cells are numbered 1-9")
            return n - 1
        return super().parse_action(t)


def parse_bool(value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    v = str(value).lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{value!r} is not a boolean")


def make_gomoku(size: int | None = None, width: int | None = None, height: int | None = None,
                k: int = 5, exact: bool | str = False) -> Gomoku:
    """Gomoku from registry options: ``size`` for square boards, or ``width``/``height``."""
    if size is not None and (width is not None or height is not None):
        raise ValueError("gomoku: give size or width/height, not both")
    w = size if size is not None else (width if width is not None else 15)
    h = size if size is not None else (height if height is not None else w)
    return Gomoku(width=int(w), height=int(h), k=int(k), exact=parse_bool(exact))
