"""``zeroforge gtp``: a trained Go net as a GTP version 2 engine (Sabaki, GoGui, GnuGo...).

Framing follows the GTP 2 specification: a command line is ``[id] name [arguments]``;
control characters other than tab and newline are dropped, tabs become spaces, ``#`` starts
a comment, and empty lines are ignored. Every command is answered ``=[id] result`` or
``?[id] message`` and a blank line; command names are case-sensitive (as GTP says), colours
and vertices are not. A bad command is a ``?`` answer, never a crash.

The position is the list of moves since ``clear_board`` (each with its colour, so a
controller may play the same colour twice, e.g. for handicap stones); ``undo`` and
``komi`` replay it. Two passes end a game for zeroforge's rules, but a controller may play
on (e.g. to settle dead stones): the next move then continues from the position before the
second pass. Scoring is zeroforge's own: area (Tromp-Taylor) with the current komi,
every stone on the board counted as alive.

``lz-analyze [colour] [interval]`` (Leela Zero's analysis command, which Lizzie uses)
answers ``=`` and then, until the next command arrives, one ``info move ... visits ...
winrate ... prior ... order ... pv ...`` line per interval (win rate and prior in
1/10000), from searches of growing size; the next command's arrival ends the response
with the blank line.

Time: after ``time_settings`` or ``kgs-time_settings`` (and ``time_left`` updates) a
``genmove`` gets a share of the remaining main time (spread over the moves the game is
still expected to last, at most 1/``MIN_MOVES_LEFT`` of it) or of the current byo-yomi
period, turned into simulations by measured speed (``agent.Agent``); of that share the
search uses ``SAFETY`` less ``LATENCY``. Canadian byo-yomi (``time_settings``' only kind)
shares a period's time among its stones; Japanese byo-yomi (``kgs-time_settings byoyomi``)
gives every move one period, and ``time_left``'s third number then counts the periods
left, as KGS sends it; the spare periods are kept as a reserve, never planned to be spent.
Without time settings every move searches ``--simulations``.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

import numpy as np

from zeroforge import __version__
from zeroforge.deploy.engines.agent import DEFAULT_LEAF_BATCH, Agent, engine_agent
from zeroforge.shared.board_sizes import net_plays
from zeroforge.shared.games import Go, GoState, IllegalMoveError

PROTOCOL_VERSION = "2"
ENGINE_NAME = "zeroforge"
SAFETY = 0.8
"""Share of a move's time budget the search may use (the rest covers overhead and I/O)."""
LATENCY = 0.1
"""Seconds kept back per move for the controller's round trip."""
MIN_MOVES_LEFT = 10
"""A move gets at most 1/MIN_MOVES_LEFT of the remaining main time."""


class GtpFailure(Exception):
    """A command that is answered with ``?`` and this message."""


def parse_colour(text: str) -> int:
    """0 for black (``b``/``black``), 1 for white; GtpFailure otherwise."""
    t = text.lower()
    if t in ("b", "black"):
        return 0
    if t in ("w", "white"):
        return 1
    raise GtpFailure("syntax error (colour must be b, black, w or white)")


def clean_line(raw: str) -> str:
    """A command line as GTP preprocesses it: no control characters but tab and newline,
    tabs as spaces, no comment, stripped."""
    kept = "".join(" " if ch == "\t" else ch for ch in raw
                   if ch in "\t\n" or (ord(ch) >= 32 and ord(ch) != 127))
    return kept.split("#", 1)[0].strip()


@dataclass
class Clock:
    """The time settings of ``time_settings`` and what ``time_left`` last said."""

    main: float = 0.0
    byo_time: float = 0.0
    byo_stones: int = 0
    """Canadian: stones per period; Japanese: the number of periods."""
    japanese: bool = False
    """Japanese byo-yomi: each move has a whole period (``byo_time``), ``byo_stones``
    periods in all (``kgs-time_settings byoyomi``)."""
    left: dict[int, tuple[float, int]] = field(default_factory=dict)
    """colour -> (seconds left, stones left in the period, or periods left under Japanese
    byo-yomi; 0 while in main time)."""

    @property
    def limited(self) -> bool:
        # GTP: byo-yomi time with zero stones means no time limit; so do all-zero settings
        return not (self.byo_time > 0 and self.byo_stones == 0) and (
            self.main > 0 or self.byo_time > 0)

    def budget(self, colour: int, ply: int, expected_plies: int) -> float | None:
        """Seconds the next move of ``colour`` may take, or None without a time limit."""
        if not self.limited:
            return None
        seconds, stones = self.left.get(
            colour, (self.main, 0) if self.main > 0 else (self.byo_time, self.byo_stones))
        if stones > 0 and self.japanese:  # in byo-yomi: one period for this move
            share = min(seconds, self.byo_time) if seconds > 0 else self.byo_time
        elif stones > 0:  # in byo-yomi: the rest of the period shared by its stones
            share = seconds / stones
        else:
            moves_left = max(MIN_MOVES_LEFT, (expected_plies - ply) / 2)
            share = seconds / moves_left
            if self.byo_stones > 0:  # byo-yomi follows: each move may at least use its part
                per_move = self.byo_time if self.japanese else self.byo_time / self.byo_stones
                share = max(share, 0.5 * per_move)
        return max(0.0, share * SAFETY - LATENCY)

    def spend(self, colour: int, seconds: float) -> None:
        """Our own bookkeeping between ``time_left`` updates."""
        if colour not in self.left:
            return
        left, stones = self.left[colour]
        left -= seconds
        if stones > 0 and self.japanese:
            # a move within its period costs nothing; one that overran used up a period
            left, stones = self.byo_time, stones - (1 if left < 0 else 0)
        elif stones > 0:
            stones -= 1
            if stones == 0:
                left, stones = self.byo_time, self.byo_stones
        elif left <= 0 and self.byo_stones > 0:
            left, stones = self.byo_time, self.byo_stones
        self.left[colour] = (max(left, 0.0), stones)


class GtpEngine:
    """The GTP command handler: ``handle(line)`` returns the full response (or None for
    a line GTP ignores); ``serve`` runs it over streams until ``quit`` or end of input."""

    def __init__(self, agent: Agent, resign_below: float = -0.95, version: str = __version__,
                 log: Callable[[str], None] | None = None) -> None:
        if not isinstance(agent.game, Go):
            raise ValueError(f"zeroforge gtp plays Go; the net is for "
                             f"{agent.net_game.spec.spec_string}")
        self.agent = agent
        self.game: Go = agent.game
        self.resign_below = resign_below
        self.version = version
        self.log = log or (lambda text: None)
        self.moves: list[tuple[int, int]] = []  # (colour, action) since clear_board
        self.state: GoState = self.game.init(1)
        self.previous: GoState | None = None  # the state before the last move
        self.clock = Clock()
        self.quit = False
        self.commands: dict[str, Callable[[list[str]], str]] = {
            "protocol_version": lambda a: PROTOCOL_VERSION,
            "name": lambda a: ENGINE_NAME,
            "version": lambda a: self.version,
            "known_command": self.known_command,
            "list_commands": lambda a: "\n".join(self.commands),
            "quit": self.cmd_quit,
            "boardsize": self.boardsize,
            "clear_board": self.clear_board,
            "komi": self.komi,
            "play": self.play,
            "genmove": self.genmove,
            "reg_genmove": self.reg_genmove,
            "undo": self.undo,
            "final_score": self.final_score,
            "showboard": lambda a: "\n" + self.game.render(self.state, 0),
            "time_settings": self.time_settings,
            "time_left": self.time_left,
            "kgs-time_settings": self.kgs_time_settings,
            "set_free_handicap": self.set_free_handicap,
            "lz-analyze": self.lz_analyze,
        }
        self.analysis: tuple[int, float] | None = None  # (colour, seconds between lines)

    # --- framing ---------------------------------------------------------------------------
    def handle(self, raw: str) -> str | None:
        line = clean_line(raw)
        if not line:
            return None
        words = line.split()
        ident = ""
        if words[0].isdigit():
            ident = words.pop(0)
            if not words:
                return f"?{ident} syntax error (no command after the id)\n\n"
        name, args = words[0], words[1:]
        command = self.commands.get(name)
        try:
            if command is None:
                raise GtpFailure("unknown command")
            result = command(args)
        except GtpFailure as err:
            return f"?{ident} {err}\n\n"
        except Exception as err:  # an engine bug must not end the session
            self.log(f"gtp: {name} failed: {type(err).__name__}: {err}")
            first = (str(err).strip().splitlines() or [""])[0]  # one line keeps the framing
            return f"?{ident} internal error: {type(err).__name__}: {first}\n\n"
        if self.analysis is not None:  # the response goes on with info lines
            return f"={ident}\n"
        # a blank line would end the response early: multi-line results drop them
        text = "\n".join(part for part in result.split("\n") if part.strip()) if result else ""
        if result.startswith("\n"):
            text = "\n" + text
        return f"={ident} {text}\n\n" if text else f"={ident}\n\n"

    def serve(self, inp: TextIO, out: TextIO) -> int:
        lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:  # a thread, so that analysis can watch for the next command
            for raw in inp:
                lines.put(raw)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        while not self.quit:
            raw = lines.get()
            if raw is None:
                break
            response = self.handle(raw)
            if response is not None:
                out.write(response)
                out.flush()
            if self.analysis is not None:
                self._analyse_until_input(lines, out)
        return 0

    def _analyse_until_input(self, lines: queue.Queue, out: TextIO) -> None:
        """lz-analyze: info lines until the next command is waiting (at least one)."""
        assert self.analysis is not None
        colour, interval = self.analysis
        state = self.state
        if int(state.to_play[0]) != colour and not state.terminal[0]:
            state = self.game.with_to_play(state, colour)
        sims = 16
        try:
            while not state.terminal[0]:
                start = time.perf_counter()
                moves = self.agent.analyse(self.game, state, sims, seed=len(self.moves))
                out.write(" ".join(
                    f"info move {self.game.format_action(a)} visits {n} winrate "
                    f"{round(w * 10000)} prior {round(p * 10000)} order {i} pv "
                    f"{self.game.format_action(a)}"
                    for i, (a, n, w, p) in enumerate(moves)) + "\n")
                out.flush()
                sims = min(self.agent.max_simulations, sims * 2)
                wait = interval - (time.perf_counter() - start)
                if lines.qsize() or (wait > 0 and self._input_within(lines, wait)):
                    break
        finally:
            self.analysis = None
            out.write("\n")
            out.flush()

    @staticmethod
    def _input_within(lines: queue.Queue, seconds: float) -> bool:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            if lines.qsize():
                return True
            time.sleep(min(0.02, seconds))
        return False

    # --- the position ----------------------------------------------------------------------
    def _replay(self, moves: list[tuple[int, int]]) -> GoState:
        """The position after ``moves``; also sets ``previous``."""
        state, self.previous = self.game.init(1), None
        for colour, action in moves:
            state = self._advance(state, colour, action)
        return state

    def _advance(self, state: GoState, colour: int, action: int) -> GoState:
        """``state`` after a move, playing on after two passes; sets ``previous``."""
        base = state
        if state.terminal[0] and int(state.passes[0]) >= 2 and self.previous is not None:
            base = self.previous  # drop the game-ending pass and continue
        after = self._step(base, colour, action)
        self.previous = state
        return after

    def _step(self, state: GoState, colour: int, action: int) -> GoState:
        if int(state.to_play[0]) != colour and not state.terminal[0]:
            state = self.game.with_to_play(state, colour)
        reason = self.game.illegal_reason(state, 0, action)
        if reason is not None:
            raise GtpFailure(f"illegal move ({reason})")
        return self.game.step(state, np.array([action]))

    def _rebuild(self, size: int, komi: float) -> None:
        # a move cap that is the old size's default (2 N^2) becomes the new size's
        cap = self.game.max_moves
        default_cap = cap == 2 * self.game.size ** 2
        try:
            game = Go(size=size, komi=komi, ko=self.game.ko, history=self.game.history,
                      obs=self.game.obs, max_moves=None if default_cap else cap)
        except ValueError as err:
            raise GtpFailure(f"unacceptable size ({err})") from None
        if not net_plays(game, self.agent.net_game, self.agent.any_size):
            raise GtpFailure("unacceptable size")
        self.game = game

    # --- commands --------------------------------------------------------------------------
    def known_command(self, args: list[str]) -> str:
        if len(args) != 1:
            raise GtpFailure("syntax error (known_command takes a command name)")
        return "true" if args[0] in self.commands else "false"

    def cmd_quit(self, args: list[str]) -> str:
        self.quit = True
        return ""

    def boardsize(self, args: list[str]) -> str:
        if len(args) != 1 or not args[0].isdigit():
            raise GtpFailure("syntax error (boardsize takes one integer)")
        size = int(args[0])
        net_size = self.agent.net_game.spec.board_shape[0]
        if size != net_size and not self.agent.any_size:
            raise GtpFailure(f"unacceptable size (this net plays {net_size}x{net_size} only)")
        if size != self.game.size:
            self._rebuild(size, self.game.komi)
        self.clear_board([])
        return ""

    def clear_board(self, args: list[str]) -> str:
        self.moves = []
        self.state, self.previous = self.game.init(1), None
        return ""

    def komi(self, args: list[str]) -> str:
        try:
            komi = float(args[0]) if len(args) == 1 else float("nan")
        except ValueError:
            komi = float("nan")
        if not np.isfinite(komi):
            raise GtpFailure("syntax error (komi takes one number)")
        if komi != self.game.komi:
            self._rebuild(self.game.size, komi)
            self.state = self._replay(self.moves)
        return ""

    def _vertex(self, text: str) -> int:
        try:
            return self.game.parse_action(text)
        except IllegalMoveError:
            raise GtpFailure(f"syntax error (invalid vertex {text!r})") from None

    def play(self, args: list[str]) -> str:
        if len(args) != 2:
            raise GtpFailure("syntax error (play takes a colour and a vertex)")
        colour = parse_colour(args[0])
        if args[1].lower() == "resign":
            return ""  # the controller records a resignation; the board does not change
        action = self._vertex(args[1])
        self.state = self._advance(self.state, colour, action)
        self.moves.append((colour, action))
        return ""

    def _think(self, args: list[str]) -> tuple[int, str]:
        if len(args) != 1:
            raise GtpFailure("syntax error (genmove takes a colour)")
        colour = parse_colour(args[0])
        state = self.state
        if state.terminal[0] and int(state.passes[0]) >= 2 and self.previous is not None:
            state = self.previous  # asked to play on after two passes
        if state.terminal[0]:
            return -1, "pass"  # the move cap ended the game
        if int(state.to_play[0]) != colour:
            state = self.game.with_to_play(state, colour)
        budget = self.clock.budget(colour, int(state.ply[0]), self._expected_plies())
        choice = self.agent.choose(self.game, state, budget, seed=len(self.moves))
        self.clock.spend(colour, choice.seconds)
        self.log(f"genmove {'BW'[colour]}: {self.game.format_action(choice.action)} value "
                 f"{choice.value:+.3f}, {choice.simulations} simulations in "
                 f"{choice.seconds:.2f} s" + (f" (budget {budget:.2f} s)" if budget else ""))
        if choice.value < self.resign_below:
            return -1, "resign"
        return choice.action, self.game.format_action(choice.action)

    def _expected_plies(self) -> int:
        # typical game lengths: ~100 plies on 9x9, ~250 on 19x19 (more than the points'
        # 0.7 on big boards, since small boards fill up further)
        return max(60, int(0.7 * self.game.num_points) + 20)

    def genmove(self, args: list[str]) -> str:
        action, vertex = self._think(args)
        if action >= 0:
            colour = parse_colour(args[0])
            self.state = self._advance(self.state, colour, action)
            self.moves.append((colour, action))
        return vertex

    def reg_genmove(self, args: list[str]) -> str:
        return self._think(args)[1]

    def undo(self, args: list[str]) -> str:
        if not self.moves:
            raise GtpFailure("cannot undo")
        self.moves.pop()
        self.state = self._replay(self.moves)
        return ""

    def final_score(self, args: list[str]) -> str:
        return self.game.result_string(self.state, 0)

    def time_settings(self, args: list[str]) -> str:
        try:
            main, byo_time, stones = float(args[0]), float(args[1]), int(args[2])
        except (ValueError, IndexError):
            raise GtpFailure("syntax error (time_settings main_time byo_yomi_time "
                             "byo_yomi_stones)") from None
        if len(args) != 3 or min(main, byo_time, stones) < 0:
            raise GtpFailure("syntax error (time_settings takes three non-negative numbers)")
        self.clock = Clock(main, byo_time, stones)
        return ""

    def kgs_time_settings(self, args: list[str]) -> str:
        """KGS's extension: ``none``, ``absolute main``, ``byoyomi main period periods``
        (Japanese) or ``canadian main period stones``."""
        usage = ("syntax error (kgs-time_settings none | absolute main_time | byoyomi "
                 "main_time period_time periods | canadian main_time period_time stones)")
        kind = args[0].lower() if args else ""
        sizes = {"none": 0, "absolute": 1, "byoyomi": 3, "canadian": 3}
        if kind not in sizes or len(args) != 1 + sizes[kind]:
            raise GtpFailure(usage)
        try:
            numbers = [float(a) for a in args[1:]]
        except ValueError:
            raise GtpFailure(usage) from None
        if any(n < 0 for n in numbers) or (len(numbers) == 3 and not numbers[2].is_integer()):
            raise GtpFailure(usage)
        if kind == "none":
            self.clock = Clock()
        elif kind == "absolute":
            self.clock = Clock(numbers[0])
        else:
            self.clock = Clock(numbers[0], numbers[1], int(numbers[2]),
                               japanese=kind == "byoyomi")
        return ""

    def time_left(self, args: list[str]) -> str:
        try:
            colour = parse_colour(args[0]) if args else -1
            seconds, stones = float(args[1]), int(args[2])
        except (ValueError, IndexError):
            raise GtpFailure("syntax error (time_left colour time stones)") from None
        if len(args) != 3 or seconds < 0 or stones < 0:
            raise GtpFailure("syntax error (time_left takes a colour and two non-negative "
                             "numbers)")
        self.clock.left[colour] = (seconds, stones)
        return ""

    def lz_analyze(self, args: list[str]) -> str:
        colour, interval = int(self.state.to_play[0]), 1.0
        rest = list(args)
        if rest and rest[0].lower() in ("b", "black", "w", "white"):
            colour = parse_colour(rest.pop(0))
        if rest and rest[0] == "interval":
            rest.pop(0)
        if rest:
            if not rest[0].isdigit():
                raise GtpFailure("syntax error (lz-analyze [colour] [interval])")
            interval = int(rest[0]) / 100  # centiseconds
        self.analysis = (colour, max(interval, 0.0))
        return ""

    def set_free_handicap(self, args: list[str]) -> str:
        if self.moves or not args:
            raise GtpFailure("board not empty" if self.moves else "syntax error (no vertices)")
        points = [self._vertex(v) for v in args]
        if len(set(points)) != len(points) or self.game.pass_action in points:
            raise GtpFailure("bad vertex list")
        moves = [(0, p) for p in points]
        for p in points:
            self._step(self.state, 0, p)  # each alone is legal on the empty board
        self.moves = moves
        self.state = self._replay(moves)
        return ""


def run(checkpoint: str, simulations: int = 200, game: str | None = None,
        resign_below: float = -0.95, max_simulations: int = 20000, device: str = "auto",
        verbose: bool = False, inp: TextIO | None = None, out: TextIO | None = None,
        leaf_batch: int = DEFAULT_LEAF_BATCH) -> int:
    """``zeroforge gtp``: loads the net, then answers GTP on stdin/stdout until ``quit``."""
    agent, log = engine_agent("gtp", checkpoint, game, simulations, max_simulations, device,
                              leaf_batch, verbose)
    engine = GtpEngine(agent, resign_below=resign_below, version=__version__, log=log)
    return engine.serve(inp or sys.stdin, out or sys.stdout)
