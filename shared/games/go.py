"""Go on square boards 5x5..19x19 with area (Tromp-Taylor) scoring.

Black (the first player) moves first. An action is a point (row-major from the top-left)
or the pass, action ``size * size``. Captures as usual; suicide is illegal; ko is either
positional superko (default: a stone may not recreate any earlier whole-board position)
or simple ko (only the immediate recapture of a single stone is forbidden). Two passes in
a row end the game, as does the move cap (default ``2 * size * size`` moves); the board is
then scored as it stands: stones plus empty regions reaching only one colour, and Black
wins if black - white - komi > 0 (an exact 0, possible with an integer komi, is a draw).

The state carries everything the rules need so that ``step`` computes the next legal mask
exactly, in one numba kernel (``go_kernels.py``): the board, its Zobrist hash, the hashes
of all earlier positions (for superko), the simple-ko point, consecutive passes, capture
counts, the groups with their liberty counts (updated move by move, so no flood fill of
the whole board is needed) and the last ``history`` boards (for observations).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zeroforge.shared.games import go_features as F
from zeroforge.shared.games import go_kernels as K
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
from zeroforge.shared.games.go_playouts import random_playout_kernel

EMPTY, BLACK, WHITE = K.EMPTY, K.BLACK, K.WHITE
KO_RULES = ("superko", "simple")
OBS_PRESETS = {"agz": 8, "compact": 4, "features": 4}
"""Observation preset -> default number of past boards kept (``history``)."""
OBS_VERSIONS = {"agz": 1, "compact": 1, "features": 2}
"""Observation preset -> ``GameSpec.version``. The version is per preset so that changing
one encoding does not orphan the nets, checkpoints and sample streams of the others (the
learner rejects samples whose version differs from its game's): bump only the preset whose
planes or actions change, to a number no preset has used, so that a (spec, version) pair
never names two encodings."""

_ASCII_STONES = {".": EMPTY, "+": EMPTY, "X": BLACK, "x": BLACK, "#": BLACK,
                 "O": WHITE, "o": WHITE}


@dataclass
class GoState(State):
    board: np.ndarray
    """[B, N] int8: 0 empty, 1 black, 2 white (N = size * size, row-major from the top-left)."""
    board_history: np.ndarray
    """[B, H, N] int8: the last H boards, newest first (index 0 is the current board)."""
    zobrist: np.ndarray
    """[B] uint64: Zobrist hash of the board (0 for the empty board)."""
    position_hashes: np.ndarray
    """[B, max_moves + 1] uint64: keys of every position so far, the current one included:
    the low bits of its Zobrist hash and its stone count on top (``go_kernels.position_key``)."""
    num_positions: np.ndarray
    """[B] int32: how many entries of ``position_hashes`` are filled."""
    repeat_limit: np.ndarray
    """[B] int32: only ``position_hashes[:repeat_limit]`` can recur (those before the last
    capture: later positions hold a subset of the current stones)."""
    ko_point: np.ndarray
    """[B] int32: point the mover may not retake at once (simple ko), -1 if none."""
    passes: np.ndarray
    """[B] int8: consecutive passes just played (2 ends the game)."""
    captures: np.ndarray
    """[B, 2] int32: stones captured so far by black (column 0) and by white (column 1)."""
    group: np.ndarray
    """[B, N] int16: the group of each stone, named by one of its points (the root); any
    in-range value on empty points. Kept up to date move by move (``go_kernels``)."""
    liberties: np.ndarray
    """[B, N] int16: at a group's root, the group's number of distinct liberties (elsewhere
    meaningless)."""


class Go(Game[GoState]):
    """Go with area scoring; ``ko`` is ``"superko"`` (positional) or ``"simple"``."""

    name = "go"
    SYMBOLS = {EMPTY: ".", BLACK: "X", WHITE: "O"}

    def __init__(self, size: int = 9, komi: float = 7.5, ko: str = "superko",
                 history: int | None = None, max_moves: int | None = None,
                 obs: str = "agz") -> None:
        size = int(size)
        if not 5 <= size <= 19:
            raise ValueError(f"go size={size}: must be 5..19")
        komi = float(komi)
        if not np.isfinite(komi):
            raise ValueError(f"go komi={komi} is not a finite number")
        ko = str(ko).lower()
        if ko not in KO_RULES:
            raise ValueError(f"go ko={ko!r}: must be one of {', '.join(KO_RULES)}")
        obs = str(obs).lower()
        if obs not in OBS_PRESETS:
            raise ValueError(f"go obs={obs!r}: must be one of {', '.join(OBS_PRESETS)}")
        history = OBS_PRESETS[obs] if history is None else int(history)
        if not 1 <= history <= 16:
            raise ValueError(f"go history={history}: must be 1..16")
        cap = 2 * size * size if max_moves is None else int(max_moves)
        if cap < 1:
            raise ValueError(f"go max_moves={cap}: must be positive")

        self.size, self.komi, self.ko, self.obs = size, komi, ko, obs
        self.superko = ko == "superko"
        self.history, self.max_moves = history, cap
        self.num_points = size * size
        self.pass_action = self.num_points
        channels = {"agz": 2 * history + 1, "compact": 2 * history + 2,
                    "features": F.num_planes(history)}[obs]
        self.spec = GameSpec(
            name=self.name,
            version=OBS_VERSIONS[obs],
            board_shape=(size, size),
            num_actions=self.num_points + 1,
            obs_shape=(channels, size, size),
            spec_string=self._spec_string(),
            max_moves=cap,
        )
        self._nbr, self._deg = K.neighbor_table(size)
        self._keys = K.zobrist_keys(self.num_points)
        self._rev_key, self._rev_pt = K.reverse_keys(self._keys)
        self._symmetries = square_symmetries(size, size, extra_actions=1)

    def _spec_string(self) -> str:
        komi = repr(self.komi)
        komi = komi[:-2] if komi.endswith(".0") else komi
        parts = [f"size={self.size}", f"komi={komi}", f"ko={self.ko}", f"obs={self.obs}"]
        if self.history != OBS_PRESETS[self.obs]:
            parts.append(f"history={self.history}")
        if self.max_moves != 2 * self.size * self.size:
            parts.append(f"max_moves={self.max_moves}")
        return "go:" + ",".join(parts)

    # --- batched rules -----------------------------------------------------------------
    def init(self, batch: int) -> GoState:
        return self.from_board(np.zeros((batch, self.num_points), np.int8))

    def from_board(self, board: np.ndarray, to_play: int | np.ndarray = 0,
                   ply: int | np.ndarray = 0, captures: np.ndarray | None = None,
                   ko_point: int | np.ndarray = -1) -> GoState:
        """States for set-up positions ``board`` [B, N] or [B, size, size] (0/1/2), e.g. from
        SGF set-up stones or tests. The position has no earlier history: it is the only
        entry for superko, and the observation history repeats it (as if it had stood).

        Raises ``ValueError`` for values other than 0/1/2 or a group without liberties.
        """
        board = np.asarray(board)
        batch = board.shape[0]
        board = board.reshape(batch, -1).astype(np.int8)
        if board.shape[1] != self.num_points:
            raise ValueError(f"go: board has {board.shape[1]} points, not {self.num_points}")
        if not np.isin(board, (EMPTY, BLACK, WHITE)).all():
            raise ValueError("go: board values must be 0 (empty), 1 (black) or 2 (white)")
        dead = np.empty(batch, np.int32)
        K.dead_stone_kernel(board, self._nbr, self._deg, dead)
        if (dead >= 0).any():
            where = self.format_action(int(dead[dead >= 0][0]))
            raise ValueError(f"go: the group at {where} has no liberty")
        state = GoState(
            to_play=np.broadcast_to(np.asarray(to_play, np.int8), (batch,)).copy(),
            ply=np.broadcast_to(np.asarray(ply, np.int32), (batch,)).copy(),
            terminal=np.zeros(batch, bool),
            outcome=np.zeros(batch, np.int8),
            legal=np.zeros((batch, self.num_points + 1), bool),
            last_action=np.full(batch, -1, np.int32),
            board=board.copy(),
            board_history=np.repeat(board[:, None, :], self.history, axis=1),
            zobrist=self.board_hash(board),
            position_hashes=np.zeros((batch, self.max_moves + 1), np.uint64),
            num_positions=np.ones(batch, np.int32),
            repeat_limit=np.zeros(batch, np.int32),
            ko_point=np.broadcast_to(np.asarray(ko_point, np.int32), (batch,)).copy(),
            passes=np.zeros(batch, np.int8),
            captures=(np.zeros((batch, 2), np.int32) if captures is None
                      else np.broadcast_to(np.asarray(captures, np.int32), (batch, 2)).copy()),
            group=np.zeros((batch, self.num_points), np.int16),
            liberties=np.zeros((batch, self.num_points), np.int16),
        )
        state.position_hashes[:, 0] = self.position_keys(board)
        self._refresh(state)
        return state

    def position_from_ascii(self, text: str, to_play: int = 0, ko_point: int = -1) -> GoState:
        """One set-up position (batch of 1) from a picture: rows top to bottom, ``X``/``#``
        black, ``O`` white, ``.``/``+`` empty. Spaces and row numbers are ignored and lines
        with other characters (coordinate letters, captions) skipped, so ``render`` output
        reads back."""
        rows = []
        for line in text.splitlines():
            # keep board rows (cells, spaces, row numbers); skip letter headers and captions
            body = line.replace(" ", "")
            if body and all(ch in _ASCII_STONES or ch.isdigit() for ch in body):
                cells = [_ASCII_STONES[ch] for ch in body if ch in _ASCII_STONES]
                if cells:
                    rows.append(cells)
        if len(rows) != self.size or any(len(r) != self.size for r in rows):
            shape = [len(r) for r in rows]
            raise ValueError(f"go: picture is not {self.size}x{self.size} (row lengths {shape})")
        return self.from_board(np.array(rows, np.int8)[None], to_play=to_play, ko_point=ko_point)

    def with_to_play(self, state: GoState, to_play: int | np.ndarray) -> GoState:
        """A copy with another player to move (GTP ``play`` out of turn, SGF ``PL``); the
        simple-ko point is cleared since it belonged to the other mover."""
        s = state.copy()
        new = np.broadcast_to(np.asarray(to_play, np.int8), s.to_play.shape)
        changed = new != s.to_play
        s.to_play[:] = new
        s.ko_point[changed] = -1
        self._refresh(s)
        return s

    def _refresh(self, state: GoState) -> None:
        K.refresh_kernel(state.board, state.group, state.liberties, state.zobrist,
                         state.position_hashes, state.repeat_limit, state.ko_point,
                         state.to_play, state.terminal, state.legal, self.superko, self._nbr,
                         self._deg, self._keys, self._rev_key, self._rev_pt)

    def _step(self, state: GoState, actions: np.ndarray) -> GoState:
        # every array copied but the history, which the kernel writes whole from the old one
        s = GoState(**{k: np.empty_like(v) if k == "board_history" else v.copy()
                       for k, v in state.arrays().items()})
        K.step_kernel(actions, s.board, s.group, s.liberties, state.board_history,
                      s.board_history, s.zobrist, s.position_hashes, s.num_positions,
                      s.repeat_limit, s.ko_point, s.passes, s.captures, s.to_play, s.ply,
                      s.terminal, s.outcome, s.legal, s.last_action, self.komi, self.max_moves,
                      self.superko, self._nbr, self._deg, self._keys, self._rev_key,
                      self._rev_pt)
        return s

    def random_playout(self, state: GoState, rng: np.random.Generator) -> np.ndarray:
        """Uniformly random play to the end in one kernel call (``go_playouts``): the pure
        UCT baseline spends its time on the moves of its playouts, not on a state copy and
        a Python round trip per ply. The same move distribution as stepping the batch with
        ``sampling.sample_legal``; another random stream."""
        return self.random_playout_arrays(state, rng)["outcome"]

    def random_playout_arrays(self, state: GoState, rng: np.random.Generator
                              ) -> dict[str, np.ndarray]:
        """The arrays of ``GoState`` but its history, [B, ...] each, where ``random_playout``
        left them: every game over (for tests of the playouts' length and score)."""
        s = {k: v.copy() for k, v in state.arrays().items() if k != "board_history"}
        random_playout_kernel(int(rng.integers(2**32)), s["board"], s["group"],
                                s["liberties"], s["zobrist"], s["position_hashes"],
                                s["num_positions"], s["repeat_limit"], s["ko_point"],
                                s["passes"], s["captures"], s["to_play"], s["ply"],
                                s["terminal"], s["outcome"], s["legal"], s["last_action"],
                                self.komi, self.max_moves, self.superko, self._nbr, self._deg,
                                self._keys, self._rev_key, self._rev_pt)
        return s

    def score(self, state: GoState) -> np.ndarray:
        """[B] float64: Tromp-Taylor black area - white area - komi (> 0: black ahead)."""
        out = np.empty(state.batch_size, np.float64)
        K.score_kernel(state.board, self.komi, self._nbr, self._deg, out)
        return out

    def score_margin(self, state: GoState) -> np.ndarray:
        """[B] float32: ``score`` (black area - white area - komi) of the board as it stands."""
        return self.score(state).astype(np.float32)

    def ownership(self, state: GoState) -> np.ndarray:
        """[B, size, size] int8 Tromp-Taylor owner of each point of the board as it stands:
        +1 black (a black stone, or an empty region reaching only black), -1 white, 0 an
        empty region reaching both colours or none. ``ownership.sum((1, 2)) - komi`` equals
        ``score``: both count the same regions (``go_kernels.area_owner``)."""
        out = np.empty((state.batch_size, self.num_points), np.int8)
        K.ownership_kernel(state.board, self._nbr, self._deg, out)
        return out.reshape(-1, self.size, self.size)

    def board_hash(self, board: np.ndarray) -> np.ndarray:
        """[B] uint64 Zobrist hashes of boards [B, N] (the xor of the stones' keys)."""
        board = np.asarray(board).reshape(-1, self.num_points)
        picked = self._keys[np.arange(self.num_points), board.astype(np.int64)]
        return np.bitwise_xor.reduce(picked, axis=1).astype(np.uint64)

    def position_keys(self, board: np.ndarray) -> np.ndarray:
        """[B] uint64 keys of boards [B, N] as ``position_hashes`` stores them."""
        board = np.asarray(board).reshape(-1, self.num_points)
        stones = (board != EMPTY).sum(axis=1).astype(np.uint64)
        return (self.board_hash(board) & K.HASH_MASK) | (stones << np.uint64(K.COUNT_SHIFT))

    def observe(self, state: GoState) -> np.ndarray:
        """[B, C, size, size] uint8 from the mover's view.

        ``agz`` (C = 2H + 1): the mover's stones in the last H positions (newest first), the
        opponent's stones likewise, then a plane of ones when Black is to move.
        ``compact`` (C = 2H + 2, H = 4): the same, plus a plane marking the last stone played.
        ``features`` (C = H + 9, H = 4; KataGo-style, layout in ``go_features``): 0 the
        mover's stones, 1 the opponent's; 2-4 the mover's stones in chains with 1, 2, >= 3
        liberties, 5-7 the opponent's likewise; 8 the simple-ko point if the mover may not
        play it; 9 .. H+7 the points played 1 .. H-1 moves ago (a pass marks none); H+8 a
        plane of ones when Black is to move.
        """
        b, h, n = state.batch_size, self.history, self.num_points
        if self.obs == "features":
            out = np.empty((b, self.spec.obs_shape[0], n), np.uint8)
            F.features_kernel(state.board_history, state.group, state.liberties,
                              state.to_play, state.ko_point, state.legal, out)
            return out.reshape(b, -1, self.size, self.size)
        mover = (state.to_play + 1).astype(np.int8)[:, None, None]
        other = (2 - state.to_play).astype(np.int8)[:, None, None]
        obs = np.zeros((b, self.spec.obs_shape[0], n), np.uint8)
        obs[:, :h] = state.board_history == mover
        obs[:, h:2 * h] = state.board_history == other
        obs[:, 2 * h] = (state.to_play == 0)[:, None]
        if self.obs == "compact":
            placed = np.flatnonzero((state.last_action >= 0) & (state.last_action < n))
            obs[placed, 2 * h + 1, state.last_action[placed]] = 1
        return obs.reshape(b, -1, self.size, self.size)

    def piece_planes(self) -> tuple[int, int]:
        """Observation planes holding the mover's and the opponent's stones now."""
        if self.obs == "features":
            return F.OWN, F.OPP
        return 0, self.history

    def symmetries(self):
        return self._symmetries

    # --- for people ----------------------------------------------------------------------
    def parse_action(self, text: str) -> int:
        if text.strip().lower() == "pass":
            return self.pass_action
        return parse_point(text, self.size, self.size)

    def format_action(self, action: int) -> str:
        action = int(action)
        if action == self.pass_action:
            return "pass"
        return format_point(action, self.size, self.size)

    def result_string(self, state: GoState, index: int = 0) -> str:
        """SGF-style result of the board as it stands: ``B+3.5``, ``W+0.5`` or ``0`` (draw)."""
        margin = float(self.score(state.take([index]))[0])
        if margin == 0:
            return "0"
        return f"{'B' if margin > 0 else 'W'}+{abs(margin):g}"

    def render(self, state: GoState, index: int = 0) -> str:
        caps = state.captures[index]
        komi = repr(self.komi)
        info = f"captures black {int(caps[0])} white {int(caps[1])}, komi {komi}"
        if state.terminal[index]:
            res = self.result_string(state, index)
            who = {1: "black wins", -1: "white wins", 0: "draw"}[int(state.outcome[index])]
            status = f"game over: {res} ({who}); {info}"
        else:
            mover = ("Black (X)", "White (O)")[int(state.to_play[index])]
            status = f"{mover} to play; {info}"
        last = int(state.last_action[index])
        if last >= 0:
            status += f"; last move {self.format_action(last)}"
        return render_grid(state.board[index], self.SYMBOLS, self.size, self.size, status)

    def _illegal_reason(self, state: GoState, index: int, action: int) -> str:
        if action == self.pass_action:
            return "the rules forbid it"
        name = self.format_action(action)
        if state.board[index, action] != EMPTY:
            return f"{name} is occupied"
        board = state.board[index].copy()
        me = int(state.to_play[index]) + 1
        n = self.num_points
        seen, queue = np.full(n, -1, np.int64), np.empty(n, np.int32)
        _, ncap, _, tick = K.place_stone(board, action, me, self._nbr, self._deg, self._keys,
                                         seen, queue, 0)
        if ncap == 0 and not K.group_has_liberty(board, action, self._nbr, self._deg, seen,
                                                 queue, tick)[0]:
            return f"suicide: {name} would leave its own group without liberties"
        if action == int(state.ko_point[index]) and ncap == 1:
            return f"ko: {name} would retake the ko at once (play elsewhere first)"
        if self.superko:
            return f"superko (repeats an earlier position): {name}"
        return "the rules forbid it"

def make_go(size: int = 9, komi: float = 7.5, ko: str = "superko", history: int | None = None,
            max_moves: int | None = None, obs: str = "agz") -> Go:
    """Go from registry options (see ``Go``)."""
    return Go(size=size, komi=komi, ko=ko, history=history, max_moves=max_moves, obs=obs)


__all__ = ["Go", "GoState", "IllegalMoveError", "make_go"]
