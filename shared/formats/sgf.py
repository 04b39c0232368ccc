"""SGF (FF[4]) game records for Go (GM[1]) and gomoku (GM[4]): read, write, replay.

Reading follows the main line (the first variation) of every game tree in a collection.
The grammar (text -> nodes, escapes, charsets) is ``sgf_syntax.py``, strict: a malformed
file raises ``SgfError`` naming the game and the character offset. This module gives the
properties their meaning, lenient about content that does not matter here (unknown
properties are ignored).

SGF coordinates are two letters, the column from the left then the row from the TOP, both
starting at ``a``; so ``point = row * width + col``, the same numbering as our actions.
A Go pass is ``B[]`` (``B[tt]`` is read as a pass too on boards up to 19x19).

zeroforge writes one private property, ``ZG[<game spec string>]``, so that options SGF has no
property for (gomoku's k, Go's ko rule) survive a round trip; other programs ignore it.
"""

from __future__ import annotations

import logging
import os
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from zeroforge.shared.formats.sgf_syntax import (
    Node,
    SgfError,
    decode,
    escape,
    parse_collection,
    text_value,
)
from zeroforge.shared.games import Game, GameSession, IllegalMoveError, make_game, parse_spec

__all__ = [
    "GameRecord", "SgfDirStats", "SgfError", "iter_sgf_dir", "parse_result", "read_sgf",
    "read_sgf_file", "record_from_session", "replay", "write_sgf",
]

log = logging.getLogger(__name__)

GM_GO, GM_GOMOKU = 1, 4
_GM_OF_GAME = {"go": GM_GO, "gomoku": GM_GOMOKU, "tictactoe": GM_GOMOKU}
_LETTERS = string.ascii_lowercase + string.ascii_uppercase  # FF[4]: a-z then A-Z, up to 52
_MAX_SIDE = len(_LETTERS)
_SETUP = ("AB", "AW", "AE")


# --- records -----------------------------------------------------------------------------
def parse_result(text: str) -> int | None:
    """Outcome (+1 Black won, -1 White won, 0 draw) of an SGF ``RE`` value; None if unknown.

    ``B+3.5``, ``B+R``, ``B+T``, ``B+`` -> +1; ``W+...`` -> -1; ``0``, ``Draw`` (or ``Jigo``)
    -> 0; ``?``, ``Void`` and anything else -> None.
    """
    t = text.strip().upper()
    if t.startswith("B+"):
        return 1
    if t.startswith("W+"):
        return -1
    if t in ("0", "DRAW", "JIGO", "D"):
        return 0
    return None


def _default_result_text(result: int) -> str:
    return {1: "B+", -1: "W+", 0: "0"}[result]


@dataclass
class GameRecord:
    """One finished (or abandoned) game, as SGF stores it.

    ``game`` may be given as a ``Game``; it is then stored as its spec string and fills in
    the board size (and Go's komi). Given a spec string with no size, the size comes from
    building that game. ``result`` and ``result_text`` fill each other in when only one is
    given and must agree when both are.
    """

    game: str
    """Game spec string, e.g. ``"go:size=9,komi=7.5"`` (what ``make_game`` takes)."""
    moves: list[int] = field(default_factory=list)
    """Actions in order, alternating colours from ``first_player``; Go's pass is size*size."""
    result: int | None = None
    """+1 Black (the first player) won, -1 White won, 0 draw, None unknown or unfinished."""
    result_text: str = ""
    """``RE`` as SGF writes it: ``B+3.5``, ``W+R``, ``B+T``, ``0`` (draw), ``?``; "" if none."""
    black: str = ""
    white: str = ""
    komi: float | None = None
    width: int = 0
    height: int = 0
    setup_black: list[int] = field(default_factory=list)
    """Points of Black stones placed before the first move (``AB``), e.g. handicap."""
    setup_white: list[int] = field(default_factory=list)
    """Points of White stones placed before the first move (``AW``)."""
    first_player: int = 0
    """0 if Black makes the first move (always, without setup stones), 1 if White does."""
    comment: str = ""
    """Game comment (``GC``)."""
    date: str = ""
    """``DT``, e.g. ``2024-05-01``."""

    def __post_init__(self) -> None:
        if isinstance(self.game, Game):
            built: Game | None = self.game
            self.game = self.game.spec.spec_string
        else:
            built = make_game(self.game) if self.width <= 0 or self.height <= 0 else None
        if built is not None:
            if self.width <= 0 or self.height <= 0:
                self.height, self.width = built.spec.board_shape
            if self.komi is None and built.spec.name == "go":
                self.komi = float(built.komi)  # type: ignore[attr-defined]
        self.moves = [int(a) for a in self.moves]
        self.setup_black = [int(p) for p in self.setup_black]
        self.setup_white = [int(p) for p in self.setup_white]
        if self.result not in (None, -1, 0, 1):
            raise ValueError(f"result {self.result!r} must be +1, -1, 0 or None")
        if self.first_player not in (0, 1):
            raise ValueError(f"first_player {self.first_player!r} must be 0 or 1")
        if self.result_text:
            parsed = parse_result(self.result_text)
            if self.result is None:
                self.result = parsed
            elif parsed is not None and parsed != self.result:
                raise ValueError(
                    f"result {self.result:+d} disagrees with result text {self.result_text!r}"
                )
        elif self.result is not None:
            self.result_text = _default_result_text(self.result)

    @property
    def name(self) -> str:
        """Registry name of the game (``"go"``, ``"gomoku"``, ...)."""
        return parse_spec(self.game)[0]


# --- semantics: a tree's main line -> GameRecord ---------------------------------------------
class _Reader:
    """Turns the main line of one game tree into a GameRecord."""

    def __init__(self, root: Node, game_no: int) -> None:
        self.root = root
        self.game_no = game_no

    def fail(self, what: str, node: Node, prop: str | None = None) -> SgfError:
        at = node.where.get(prop, node.offset) if prop else node.offset
        return SgfError(f"SGF game {self.game_no}, offset {at}: {what}")

    def one(self, prop: str, simple: bool = True) -> str | None:
        """First value of a root property, as (Simple)Text."""
        values = self.root.props.get(prop)
        return None if values is None else text_value(values[0], simple)

    def number(self, prop: str, kind: type, low: float, high: float) -> float | None:
        text = (self.one(prop) or "").strip()
        if not text:  # absent, or an empty value some programs write for "unknown"
            return None
        try:
            value = kind(text)
        except ValueError:
            raise self.fail(f"{prop}[{text}] is not a number", self.root, prop) from None
        if not low <= value <= high:
            raise self.fail(f"{prop}[{text}] is out of range {low}..{high}", self.root, prop)
        return value

    def board_size(self, gm: int) -> tuple[int, int]:
        text = (self.one("SZ") or "").strip()
        if not text:
            return (19, 19) if gm == GM_GO else (15, 15)  # FF[4] default; gomoku's usual 15
        w, colon, h = text.partition(":")
        try:
            width = int(w)
            height = int(h) if colon else width
        except ValueError:
            raise self.fail(f"SZ[{text}] is not a size like 19 or 15:13", self.root, "SZ") from None
        if not (1 <= width <= _MAX_SIDE and 1 <= height <= _MAX_SIDE):
            raise self.fail(f"SZ[{text}]: sides must be 1..{_MAX_SIDE}", self.root, "SZ")
        if gm == GM_GO and width != height:
            raise self.fail(f"SZ[{text}]: Go boards here are square", self.root, "SZ")
        return width, height

    def spec(self, gm: int, width: int, height: int, komi: float | None) -> str:
        given = (self.one("ZG") or "").strip()
        if given:
            try:
                name = parse_spec(given)[0]
            except ValueError as err:
                raise self.fail(f"ZG[{given}]: {err}", self.root, "ZG") from None
            if _GM_OF_GAME.get(name) != gm:
                raise self.fail(f"ZG[{given}] is not a GM[{gm}] game", self.root, "ZG")
            return given
        if gm == GM_GO:
            return f"go:size={width}" + ("" if komi is None else f",komi={_num(komi)}")
        shape = f"size={width}" if width == height else f"width={width},height={height}"
        return f"gomoku:{shape},k={min(5, max(width, height))}"

    def point(self, value: str, node: Node, prop: str, width: int, height: int) -> int:
        if (len(value) != 2 or value[0] not in _LETTERS or value[1] not in _LETTERS):
            raise self.fail(f"{prop}[{value}] is not a point like 'cd'", node, prop)
        col, row = _LETTERS.index(value[0]), _LETTERS.index(value[1])
        if col >= width or row >= height:
            raise self.fail(f"{prop}[{value}] is off the {width}x{height} board", node, prop)
        return row * width + col

    def points(self, node: Node, prop: str, width: int, height: int) -> list[int]:
        """A list of points, where ``aa:cc`` stands for the rectangle between two corners."""
        out = []
        for value in node.props[prop]:
            first, colon, last = value.partition(":")
            a = self.point(first, node, prop, width, height)
            if not colon:
                out.append(a)
                continue
            b = self.point(last, node, prop, width, height)
            (r0, c0), (r1, c1) = divmod(a, width), divmod(b, width)
            for r in range(min(r0, r1), max(r0, r1) + 1):
                out.extend(r * width + c for c in range(min(c0, c1), max(c0, c1) + 1))
        return out

    def record(self) -> GameRecord:
        root = self.root
        gm = int(self.number("GM", int, 1, 99) or GM_GO)  # FF[4]: GM defaults to Go
        if gm not in (GM_GO, GM_GOMOKU):
            raise self.fail(f"GM[{gm}] is neither Go (1) nor gomoku (4)", root, "GM")
        width, height = self.board_size(gm)
        komi = self.number("KM", float, -1e4, 1e4)
        result_text = self.one("RE") or ""
        comment = self.one("GC", simple=False)
        if comment is None:
            comment = self.one("C", simple=False) or ""
        moves, setup_black, setup_white, first = self.main_line(gm, width, height)
        if not moves and "PL" in root.props:
            first = 1 if (self.one("PL") or "").strip().upper().startswith("W") else 0
        return GameRecord(
            game=self.spec(gm, width, height, komi),
            moves=moves,
            result=parse_result(result_text),
            result_text=result_text,
            black=self.one("PB") or "",
            white=self.one("PW") or "",
            komi=komi,
            width=width,
            height=height,
            setup_black=setup_black,
            setup_white=setup_white,
            first_player=first,
            comment=comment,
            date=self.one("DT") or "",
        )

    def main_line(self, gm: int, width: int, height: int) -> tuple[
            list[int], list[int], list[int], int]:
        """Moves, setup stones and first mover along the first variation."""
        size = width * height
        moves: list[int] = []
        black: list[int] = []
        white: list[int] = []
        first = 0
        node: Node | None = self.root
        while node is not None:
            for prop in _SETUP:
                if prop not in node.props:
                    continue
                if moves:
                    raise self.fail(
                        f"setup stones ({prop}) after move {len(moves)} are not supported",
                        node, prop,
                    )
                pts = set(self.points(node, prop, width, height))
                # A point set again (or emptied by AE) loses whatever was there before.
                black[:] = [p for p in black if p not in pts]
                white[:] = [p for p in white if p not in pts]
                if prop == "AB":
                    black.extend(sorted(pts))
                elif prop == "AW":
                    white.extend(sorted(pts))
            colours = [c for c in ("B", "W") if c in node.props]
            if len(colours) == 2:
                raise self.fail("a node with both a B and a W move", node, "W")
            if colours:
                colour = colours[0]
                values = node.props[colour]
                if len(values) != 1:
                    raise self.fail(f"move {colour} with {len(values)} values", node, colour)
                value = values[0].strip()
                if not moves:
                    first = 0 if colour == "B" else 1
                expected = "BW"[(first + len(moves)) % 2]
                if colour != expected:
                    raise self.fail(
                        f"move {len(moves) + 1} is {colour} but {expected} is to play",
                        node, colour,
                    )
                if value == "" or (value == "tt" and width <= 19 and height <= 19):
                    if gm != GM_GO:
                        raise self.fail(
                            f"move {len(moves) + 1} is a pass, which gomoku does not have",
                            node, colour,
                        )
                    moves.append(size)
                else:
                    moves.append(self.point(value, node, colour, width, height))
            node = node.children[0] if node.children else None
        return moves, black, white, first


def read_sgf(text: str) -> list[GameRecord]:
    """Every game of an SGF collection (main lines only); SgfError if any is malformed."""
    return [_Reader(tree, i).record() for i, tree in enumerate(parse_collection(text), 1)]


def read_sgf_file(path: str | os.PathLike[str]) -> list[GameRecord]:
    """The games of one SGF file; SgfError names the file if it is malformed."""
    text = decode(Path(path).read_bytes())
    try:
        return read_sgf(text)
    except SgfError as err:
        raise SgfError(f"{path}: {err}") from None


@dataclass
class SgfDirStats:
    """What ``iter_sgf_dir`` found; filled in while it runs."""

    files: int = 0
    games: int = 0
    skipped_files: int = 0
    """Files that could not be read or parsed at all."""
    skipped_games: int = 0
    """Games inside readable files that were malformed or unsupported."""


def _sgf_paths(directory: Path) -> Iterator[Path]:
    # os.walk does not follow directory symlinks, so a link loop cannot trap us.
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames.sort()
        for name in sorted(filenames):
            if name.lower().endswith(".sgf"):
                yield Path(dirpath) / name


def iter_sgf_dir(directory: str | os.PathLike[str],
                 stats: SgfDirStats | None = None) -> Iterator[GameRecord]:
    """Stream the records of every ``*.sgf`` file under ``directory`` (recursively, sorted).

    Unreadable files and malformed games are skipped with a one-line warning and counted
    in ``stats``: a big corpus always has a few, and one must not stop pre-training.
    """
    root = Path(directory)
    if not root.is_dir():
        raise NotADirectoryError(f"{root} is not a directory")
    stats = SgfDirStats() if stats is None else stats
    for path in _sgf_paths(root):
        stats.files += 1
        try:
            trees = parse_collection(decode(path.read_bytes()))
        except (OSError, SgfError) as err:
            stats.skipped_files += 1
            log.warning("skipping SGF file %s: %s", path, err)
            continue
        for i, tree in enumerate(trees, 1):
            try:
                record = _Reader(tree, i).record()
            except (SgfError, ValueError) as err:
                stats.skipped_games += 1
                log.warning("skipping a game in %s: %s", path, err)
                continue
            stats.games += 1
            yield record


# --- writing -----------------------------------------------------------------------------
def _num(x: float) -> str:
    """A number as SGF expects it: ``6`` rather than ``6.0``, full precision otherwise."""
    x = float(x)
    return str(int(x)) if x.is_integer() else repr(x)


def _coord(point: int, width: int) -> str:
    row, col = divmod(point, width)
    return _LETTERS[col] + _LETTERS[row]


def write_sgf(record: GameRecord) -> str:
    """The record as one SGF FF[4] game tree (ends with a newline)."""
    name = record.name
    if name not in _GM_OF_GAME:
        raise ValueError(f"SGF has no game type for {name!r} (only Go and gomoku)")
    gm = _GM_OF_GAME[name]
    width, height = record.width, record.height
    if not (1 <= width <= _MAX_SIDE and 1 <= height <= _MAX_SIDE):
        raise ValueError(f"board {width}x{height} does not fit SGF coordinates")
    size = width * height
    sz = str(width) if width == height else f"{width}:{height}"
    head = [f"(;FF[4]GM[{gm}]CA[UTF-8]AP[zeroforge]SZ[{sz}]"]
    if record.komi is not None:
        head.append(f"KM[{_num(record.komi)}]")
    head.append(f"ZG[{escape(record.game, simple=True)}]")
    for prop, value in (("PB", record.black), ("PW", record.white), ("DT", record.date),
                        ("RE", record.result_text)):
        if value:
            head.append(f"{prop}[{escape(value, simple=True)}]")
    if record.comment:
        head.append(f"GC[{escape(record.comment)}]")
    for prop, points in (("AB", record.setup_black), ("AW", record.setup_white)):
        for p in points:
            if not 0 <= p < size:
                raise ValueError(f"setup stone {p} is off the {width}x{height} board")
        if points:
            head.append(prop + "".join(f"[{_coord(p, width)}]" for p in points))
    if record.first_player == 1 and not record.moves:
        head.append("PL[W]")
    lines = ["".join(head)]
    last = size if gm == GM_GO else size - 1  # only Go has a pass action (= size)
    moves = []
    for i, action in enumerate(record.moves):
        if not 0 <= action <= last:
            raise ValueError(f"move {i + 1}: action {action} is not on the {width}x{height} board")
        colour = "BW"[(record.first_player + i) % 2]
        moves.append(f";{colour}[{'' if action == size else _coord(action, width)}]")
    # A dozen moves a line keeps files readable and diffs small.
    lines.extend("".join(moves[i:i + 12]) for i in range(0, len(moves), 12))
    return "\n".join(lines) + ")\n"


# --- sessions ----------------------------------------------------------------------------
def _start(record: GameRecord, game: Game) -> GameSession:
    """A session at the record's starting position (set-up stones need the game's help)."""
    if not record.setup_black and not record.setup_white and record.first_player == 0:
        return GameSession(game)
    setup = getattr(game, "setup_state", None)
    if setup is None:
        stones = len(record.setup_black) + len(record.setup_white)
        raise ValueError(
            f"record starts from a set-up position ({stones} AB/AW stones"
            f"{', White first' if record.first_player else ''}) and {game.spec.name} "
            "cannot start from one"
        )
    return GameSession(game, setup(record.setup_black, record.setup_white, record.first_player))


def replay(record: GameRecord, game: Game | None = None) -> GameSession:
    """Play the record's moves through a ``GameSession`` and return it.

    An illegal move raises IllegalMoveError naming the move number. Set-up stones work only
    with a game that has ``setup_state(black_points, white_points, to_play) -> State``;
    otherwise ValueError says so.
    """
    game = make_game(record.game) if game is None else game
    height, width = game.spec.board_shape
    if (record.width, record.height) != (width, height):
        raise ValueError(
            f"record board {record.width}x{record.height} does not match "
            f"{game.spec.spec_string} ({width}x{height})"
        )
    session = _start(record, game)
    for i, action in enumerate(record.moves):
        try:
            session.play(action)
        except IllegalMoveError as err:
            colour = "BW"[(record.first_player + i) % 2]
            raise IllegalMoveError(f"record move {i + 1} ({colour}): {err}") from None
    return session


def _scored_result_text(game: Game, session: GameSession) -> str:
    """``B+3.5``-style text for a Go game that ended by counting."""
    outcome = session.outcome
    if outcome == 0:
        return "0"
    margin = float(np.asarray(game.score(session.state)).reshape(-1)[0])  # type: ignore[attr-defined]
    winner = "B" if outcome > 0 else "W"
    # The score is Black's lead after komi; it must agree with the outcome the rules gave.
    if (margin > 0) != (outcome > 0):
        raise ValueError(f"Go score {margin} disagrees with outcome {outcome:+d}")
    return f"{winner}+{_num(abs(margin))}"


def record_from_session(session: GameSession, *, black: str = "", white: str = "",
                        date: str = "", comment: str = "",
                        result_text: str | None = None) -> GameRecord:
    """A record of the game played in ``session``.

    The result comes from the session's outcome (Go: with the counted margin, ``B+3.5``);
    an unfinished game has none. ``result_text`` overrides it, e.g. ``"W+R"`` for a
    resignation the rules do not know about.
    """
    game = session.game
    if result_text is None:
        if not session.over:
            result_text = ""
        elif game.spec.name == "go" and hasattr(game, "score"):
            result_text = _scored_result_text(game, session)
        else:
            result_text = _default_result_text(session.outcome)
    height, width = game.spec.board_shape
    return GameRecord(
        game=game.spec.spec_string,
        moves=list(session.moves),
        komi=float(game.komi) if game.spec.name == "go" else None,  # type: ignore[attr-defined]
        width=width,
        height=height,
        result_text=result_text,
        black=black,
        white=white,
        date=date,
        comment=comment,
    )
