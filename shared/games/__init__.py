"""Game registry: ``make_game("go", size=9, komi=7.5)`` or ``make_game("go:size=9,komi=7.5")``.

Spec strings are ``name`` or ``name:key=value,key=value``; short preset names
(``gomoku6``, ``go9``, ...) expand to full spec strings.

The ``Game`` seam (``base``) and ``GameSession`` load at once; the games themselves, their
kernels and feature planes are imported on first use (``__getattr__``), since they compile
with numba and a caller of one game should not pay for the others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zeroforge.shared.games.base import (
    COLUMN_LETTERS,
    Game,
    GameSpec,
    IllegalMoveError,
    State,
    Symmetry,
)
from zeroforge.shared.games.session import GameSession
from zeroforge.shared.lazy import lazy_getattr

if TYPE_CHECKING:
    from zeroforge.shared.games.fivestone import NUM_ACTIONS as FIVESTONE_ACTIONS
    from zeroforge.shared.games.fivestone import FiveStone, FiveStoneState, make_fivestone
    from zeroforge.shared.games.go import BLACK, EMPTY, WHITE, Go, GoState, make_go
    from zeroforge.shared.games.go_features import KO, MOVES, OPP, OPP_LIBS, OWN, OWN_LIBS
    from zeroforge.shared.games.go_kernels import COUNT_SHIFT, HASH_MASK
    from zeroforge.shared.games.gomoku import Gomoku, GomokuState, TicTacToe, make_gomoku
    from zeroforge.shared.games.sampling import sample_legal

_MODULES = {
    "fivestone": ("FiveStone", "FiveStoneState", "make_fivestone"),
    "go": ("BLACK", "EMPTY", "WHITE", "Go", "GoState", "make_go"),
    "go_features": ("KO", "MOVES", "OPP", "OPP_LIBS", "OWN", "OWN_LIBS"),
    "go_kernels": ("COUNT_SHIFT", "HASH_MASK"),
    "gomoku": ("Gomoku", "GomokuState", "TicTacToe", "make_gomoku"),
    "sampling": ("sample_legal",),
}

__all__ = [
    "BLACK", "COLUMN_LETTERS", "COUNT_SHIFT", "EMPTY", "FIVESTONE_ACTIONS", "FiveStone",
    "FiveStoneState", "GAMES", "Game", "GameSession", "GameSpec", "Go", "GoState", "Gomoku",
    "GomokuState", "HASH_MASK", "IllegalMoveError", "KO", "MOVES", "OPP", "OPP_LIBS", "OWN",
    "OWN_LIBS", "PRESETS", "State", "Symmetry", "TicTacToe", "WHITE", "make_fivestone",
    "make_game", "make_go", "make_gomoku", "parse_spec", "sample_legal"
]


# a name of one game gets the game's prefix
__getattr__ = lazy_getattr(__name__, _MODULES,
                           renamed={"FIVESTONE_ACTIONS": ("fivestone", "NUM_ACTIONS")})


def _gomoku(**kw: Any) -> Game:
    from zeroforge.shared.games.gomoku import make_gomoku
    return make_gomoku(**kw)


def _tictactoe(**kw: Any) -> Game:
    from zeroforge.shared.games.gomoku import TicTacToe
    return TicTacToe(**kw)


def _go(**kw: Any) -> Game:
    from zeroforge.shared.games.go import make_go
    return make_go(**kw)


def _fivestone(**kw: Any) -> Game:
    from zeroforge.shared.games.fivestone import make_fivestone
    return make_fivestone(**kw)


GAMES: dict[str, Callable[..., Game]] = {
    "tictactoe": _tictactoe,
    "gomoku": _gomoku,
    "go": _go,
    "5stone_chess": _fivestone,
}
"""Registry name -> factory taking keyword options."""

PRESETS: dict[str, str] = {
    "ttt": "tictactoe",
    "gomoku6": "gomoku:size=6,k=4",
    "gomoku8": "gomoku:size=8,k=5",
    "gomoku15": "gomoku:size=15,k=5",
    "go9": "go:size=9",
    "go13": "go:size=13",
    "go19": "go:size=19",
    "fivestone": "5stone_chess",
}
"""Short names for common configurations."""


def _parse_value(text: str) -> Any:
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """Split ``"name:k=v,k=v"`` (or a preset name) into the name and its options."""
    spec = PRESETS.get(spec.strip(), spec.strip())
    name, _, rest = spec.partition(":")
    options: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"game spec {spec!r}: {item!r} is not key=value")
        options[key.strip()] = _parse_value(value.strip())
    return name.strip(), options


def make_game(spec: str, **options: Any) -> Game:
    """Build a game from a registry name or spec string plus keyword options.

    Raises ``ValueError`` with a one-line message naming the bad part.
    """
    name, parsed = parse_spec(spec)
    parsed.update(options)
    if name not in GAMES:
        known = ", ".join(sorted(GAMES) + sorted(PRESETS))
        raise ValueError(f"unknown game {name!r}; known: {known}")
    try:
        return GAMES[name](**parsed)
    except TypeError as err:
        raise ValueError(f"game {name!r}: bad option ({err})") from None
