"""The Game seam: pure, batched rules over numpy arrays.

Every game keeps the state of B independent games in one `State` whose arrays all share
a leading batch axis. Rules never do I/O and never import torch.

Conventions shared by all games
-------------------------------
- Actions are integers in ``[0, spec.num_actions)``; board points are numbered row-major
  from the top-left (``point = row * width + col``).
- ``to_play`` is 0 when the first player (X, Black) is to move, 1 for the second.
- ``outcome`` is from the first player's side: +1 first player won, -1 lost, 0 draw
  (also 0 while the game is running; look at ``terminal``).
- The legal mask is the contract of the batched API: ``step`` accepts, for every game
  that is still running, only an action whose mask bit is set, and raises ``ValueError``
  otherwise. Actions given for games that are already over are ignored. A finished game's
  mask is all False.
- The one-game API for people and protocols (``GameSession`` in ``session.py``) explains
  why a move is illegal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, Self, TypeVar

import numpy as np


class IllegalMoveError(ValueError):
    """A move that the rules forbid, or text that names no move; the message says which and why."""


@dataclass(frozen=True)
class GameSpec:
    """What the rest of the system needs to know about a game, without its rules."""

    name: str
    """Registry name, e.g. ``"go"``."""
    version: int
    """Version of the rules and encodings; bumped whenever observations or actions change."""
    board_shape: tuple[int, int]
    """Board (height, width)."""
    num_actions: int
    """Size of the action space (legal or not)."""
    obs_shape: tuple[int, int, int]
    """Observation planes (channels, height, width) as returned by ``observe``."""
    spec_string: str
    """Canonical spec string that ``make_game`` turns back into this game."""
    max_moves: int
    """No game lasts longer than this many moves (plies)."""


@dataclass(frozen=True)
class Symmetry:
    """A board symmetry, as index permutations: ``new[..., i] = old[..., perm[i]]``."""

    name: str
    """Human name, e.g. ``"rot90"``."""
    point_perm: np.ndarray
    """[H*W] int: for observation planes flattened over the board."""
    action_perm: np.ndarray
    """[A] int: for policies and legal masks."""

    def apply_obs(self, obs: np.ndarray) -> np.ndarray:
        """Map observations [B, C, H, W] (or [C, H, W]) through the symmetry."""
        shape = obs.shape
        flat = obs.reshape(*shape[:-2], shape[-2] * shape[-1])
        return flat[..., self.point_perm].reshape(shape)

    def apply_policy(self, policy: np.ndarray) -> np.ndarray:
        """Map policies, masks or visit counts [B, A] (or [A]) through the symmetry."""
        return policy[..., self.action_perm]


@dataclass
class State:
    """Fields common to every game's state; each array has the batch axis B first.

    Subclasses add their own arrays. States are values: ``Game.step`` returns a new one
    and never writes into its input.
    """

    to_play: np.ndarray
    """[B] int8: 0 if the first player is to move, else 1."""
    ply: np.ndarray
    """[B] int32: moves played so far (passes included)."""
    terminal: np.ndarray
    """[B] bool: the game is over."""
    outcome: np.ndarray
    """[B] int8: +1 first player won, -1 second player won, 0 draw or not over."""
    legal: np.ndarray
    """[B, A] bool: legal actions of the player to move; all False when terminal."""
    last_action: np.ndarray
    """[B] int32: the previous action, -1 before the first move."""

    @property
    def batch_size(self) -> int:
        return int(self.to_play.shape[0])

    def arrays(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def take(self, index: np.ndarray | Sequence[int] | slice) -> Self:
        """The states at ``index`` along the batch axis, as a new (copied) State."""
        if isinstance(index, slice):
            return type(self)(**{k: v[index].copy() for k, v in self.arrays().items()})
        index = np.asarray(index)
        return type(self)(**{k: v[index] for k, v in self.arrays().items()})

    def copy(self) -> Self:
        return type(self)(**{k: v.copy() for k, v in self.arrays().items()})

    def put(self, index: np.ndarray | Sequence[int], other: State) -> None:
        """Write ``other``'s games into positions ``index`` of this state, in place."""
        for name, dst in self.arrays().items():
            dst[np.asarray(index)] = getattr(other, name)

    @classmethod
    def concat(cls, states: Sequence[Self]) -> Self:
        """Join states along the batch axis."""
        names = [f.name for f in dataclasses.fields(states[0])]
        return type(states[0])(
            **{n: np.concatenate([getattr(s, n) for s in states]) for n in names}
        )

    def repeat(self, n: int) -> Self:
        """Each game repeated ``n`` times in place: [B, ...] -> [B*n, ...]."""
        return type(self)(**{k: np.repeat(v, n, axis=0) for k, v in self.arrays().items()})


S = TypeVar("S", bound=State)
"""The state class of a game: ``Go`` is a ``Game[GoState]``."""


class Game(Generic[S]):
    """Base class of every game. Subclasses set ``spec`` and implement the abstract parts.

    Generic in its state class, so that each game's methods take and return its own
    ``State`` subclass; code that handles any game writes plain ``Game``.
    """

    name: ClassVar[str]
    spec: GameSpec

    # --- batched rules -----------------------------------------------------------------
    def init(self, batch: int) -> S:
        """``batch`` games at their starting position."""
        raise NotImplementedError

    def step(self, state: S, actions: np.ndarray) -> S:
        """Play ``actions`` [B] and return the new state.

        Raises ``ValueError`` if a running game is given an action outside its legal mask.
        """
        actions = np.asarray(actions, dtype=np.int64).reshape(-1)
        if actions.shape[0] != state.batch_size:
            raise ValueError(
                f"{self.spec.name}: got {actions.shape[0]} actions for {state.batch_size} games"
            )
        running = ~state.terminal
        safe = np.where(running, actions, 0)
        in_range = (safe >= 0) & (safe < self.spec.num_actions)
        ok = in_range & state.legal[np.arange(actions.shape[0]), np.where(in_range, safe, 0)]
        bad = np.flatnonzero(running & ~ok)
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"{self.spec.name}: action {int(actions[i])} is not legal in game {i} of the batch "
                f"({bad.size} illegal in all)"
            )
        return self._step(state, np.where(running, actions, -1).astype(np.int32))

    def _step(self, state: S, actions: np.ndarray) -> S:
        """Apply legal actions [B] int32 (-1 for finished games, which are left alone)."""
        raise NotImplementedError

    def legal_mask(self, state: S) -> np.ndarray:
        """[B, A] bool: legal actions of the player to move (all False once over)."""
        return state.legal

    def terminal(self, state: S) -> np.ndarray:
        """[B] bool."""
        return state.terminal

    def outcome(self, state: S) -> np.ndarray:
        """[B] int8 from the first player's side (+1 won, -1 lost, 0 draw or running)."""
        return state.outcome

    def to_play(self, state: S) -> np.ndarray:
        """[B] int8: 0 if the first player is to move."""
        return state.to_play

    def observe(self, state: S) -> np.ndarray:
        """[B, C, H, W] uint8 planes from the view of the player to move."""
        raise NotImplementedError

    def score_margin(self, state: S) -> np.ndarray | None:
        """[B] float32: the first player's score margin with komi (> 0: ahead), of the
        position as it stands; None for games without a score (the default). Lets self-play
        record a score target without knowing the game."""
        return None

    def ownership(self, state: S) -> np.ndarray | None:
        """[B, H, W] int8: +1 where the point is the first player's area, -1 the second
        player's, 0 neither (Go: Tromp-Taylor area of the board as it stands); None for
        games without territory (the default)."""
        return None

    def random_playout(self, state: S, rng: np.random.Generator) -> np.ndarray | None:
        """[B] int8 final outcomes (first player's view) of playing every game of ``state``
        to its end with uniformly random legal moves, in one compiled loop; None where the
        game has no such fast path (the default: ``search.rollout`` then steps the batch a
        ply at a time). ``state`` is not modified."""
        ends = self.random_playout_ends(state, rng)
        return None if ends is None else ends.outcome

    def random_playout_ends(self, state: S, rng: np.random.Generator) -> S | None:
        """A copy of ``state`` where ``random_playout`` leaves it (every game over), for the
        games whose compiled playout works on their state's arrays; None otherwise."""
        return None

    def piece_planes(self) -> tuple[int, int]:
        """Indices of the observation planes with the mover's and the opponent's pieces now."""
        return (0, 1)

    def symmetries(self) -> Sequence[Symmetry]:
        """The symmetries that map positions to equivalent positions (identity first)."""
        raise NotImplementedError

    # --- for people and protocols --------------------------------------------------------
    def parse_action(self, text: str) -> int:
        """Action for a move written in this game's usual notation; IllegalMoveError if none."""
        raise NotImplementedError

    def format_action(self, action: int) -> str:
        """The move in this game's usual notation."""
        raise NotImplementedError

    def render(self, state: S, index: int = 0) -> str:
        """One game of the batch as text, with coordinates."""
        raise NotImplementedError

    def illegal_reason(self, state: S, index: int, action: int) -> str | None:
        """Why ``action`` is illegal in game ``index``, or None if it is legal."""
        if state.terminal[index]:
            return "the game is over"
        if not 0 <= action < self.spec.num_actions:
            return f"action {action} is out of range 0..{self.spec.num_actions - 1}"
        if state.legal[index, action]:
            return None
        return self._illegal_reason(state, index, action)

    def _illegal_reason(self, state: S, index: int, action: int) -> str:
        return "the rules forbid it"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec.spec_string}>"


def square_symmetries(height: int, width: int, extra_actions: int = 0) -> list[Symmetry]:
    """The 8 symmetries of a square board (4 rotations x reflection), or the 4 of a rectangle.

    Point actions are the board points; ``extra_actions`` trailing actions (Go's pass) map
    to themselves.
    """
    grid = np.arange(height * width).reshape(height, width)
    maps = [
        ("identity", grid),
        ("rot90", np.rot90(grid, 1)),
        ("rot180", np.rot90(grid, 2)),
        ("rot270", np.rot90(grid, 3)),
        ("flip_lr", np.fliplr(grid)),
        ("flip_ud", np.flipud(grid)),
        ("transpose", grid.T),
        ("anti_transpose", np.rot90(grid, 2).T),
    ]
    out = []
    for name, m in maps:
        if m.shape != grid.shape:
            continue
        perm = m.reshape(-1).astype(np.int64)
        extra = np.arange(height * width, height * width + extra_actions)
        out.append(Symmetry(name, perm, np.concatenate([perm, extra])))
    return out


COLUMN_LETTERS = "ABCDEFGHJKLMNOPQRST"  # GTP/SGF-programs style: no I


def format_point(point: int, height: int, width: int) -> str:
    """``D4``-style name of a point: column letter (no I), row counted from the bottom."""
    row, col = divmod(point, width)
    return f"{COLUMN_LETTERS[col]}{height - row}"


def parse_point(text: str, height: int, width: int) -> int:
    """Point for ``D4``-style text (case-insensitive); IllegalMoveError if it names no point."""
    t = text.strip().upper()
    if len(t) < 2 or t[0] not in COLUMN_LETTERS or not t[1:].isdigit():
        # the example is this board's centre: "D4" would be off a 3x3 board
        example = format_point((height // 2) * width + width // 2, height, width)
        raise IllegalMoveError(f"{text!r} is not a coordinate like {example}")
    col = COLUMN_LETTERS.index(t[0])
    row = height - int(t[1:])
    if col >= width or not 0 <= row < height:
        raise IllegalMoveError(f"{text!r} is off the {width}x{height} board")
    return row * width + col


def render_grid(
    cells: np.ndarray, symbols: dict[int, str], height: int, width: int, marks: str = ""
) -> str:
    """Text picture of a board [H*W] of small ints with GTP-style coordinates."""
    letters = " ".join(COLUMN_LETTERS[:width])
    lines = [f"   {letters}"]
    for r in range(height):
        row = " ".join(symbols[int(cells[r * width + c])] for c in range(width))
        lines.append(f"{height - r:2d} {row} {height - r:2d}")
    lines.append(f"   {letters}")
    if marks:
        lines.append(marks)
    return "\n".join(lines)
