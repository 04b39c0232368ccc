"""``zeroforge pbrain``: a trained gomoku net as a Gomocup (piskvork) brain on stdin/stdout.

The manager sends one command a line (case-insensitive); the brain answers a move as
``x,y`` (0-based column and row, 0,0 the top-left point), or ``OK``, ``ERROR message``,
``UNKNOWN message``; it may also send ``MESSAGE text`` (for the user) and ``DEBUG text``
at any time. Commands:

- ``START size`` / ``RECTSTART w,h``: a new game on that board (``OK``, or ``ERROR`` if the
  net plays another size); ``RESTART``: a new game on the same board (``OK``);
- ``BEGIN``: the brain moves first; ``TURN x,y``: the opponent played there, the brain
  answers its move; ``PLAY x,y``: the brain must play exactly that move (answers it);
- ``BOARD`` then ``x,y,who`` lines (1 the brain's stone, 2 the opponent's, 3 a stone of
  the winning line this brain found in a continuous game, so its own) and ``DONE``: this position,
  the brain to move (answers its move);
- ``TAKEBACK x,y``: remove that (last played) stone (``OK``);
- ``INFO key value``: ``timeout_turn`` / ``timeout_match`` / ``time_left`` (milliseconds;
  0 turn timeout: play at once, 0 match timeout: no limit), ``max_memory``, ``game_type``,
  ``rule`` (bit 1: exactly five wins; renju and caro bits are not played, said in a
  ``MESSAGE``), ``evaluate``, ``folder``: no answer;
- ``ABOUT``: ``name="zeroforge", version="...", ...``; ``END``: exit, no answer.

Moves are searched with ``--simulations``, or, once the manager sent time limits, with
the simulations that fit the move's share of time (measured speed, ``agent.Agent``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from zeroforge import __version__
from zeroforge.deploy.engines.agent import DEFAULT_LEAF_BATCH, Agent, engine_agent
from zeroforge.shared.board_sizes import net_plays
from zeroforge.shared.games import Game, GameSession, Gomoku, IllegalMoveError

SAFETY = 0.7
"""Share of a move's time the search may use (the rest is overhead and I/O)."""
LATENCY = 0.05
"""Seconds kept back per move."""
MIN_MOVES_LEFT = 10
"""A move gets at most 1/MIN_MOVES_LEFT of the match time left."""
RULE_EXACT, RULE_CONTINUOUS, RULE_RENJU, RULE_CARO = 1, 2, 4, 8


class BrainError(Exception):
    """Answered ``ERROR message``."""


class Brain:
    """The Gomocup command handler: ``handle(line)`` returns the lines to send (possibly
    none); ``serve`` runs it until ``END`` or end of input."""

    def __init__(self, agent: Agent, version: str = __version__,
                 log: Callable[[str], None] | None = None) -> None:
        if not isinstance(agent.game, Gomoku):
            raise ValueError(f"zeroforge pbrain plays gomoku; the net is for "
                             f"{agent.net_game.spec.spec_string}")
        self.agent = agent
        self.game: Gomoku = agent.game
        self.version = version
        self.log = log or (lambda text: None)
        self.session: GameSession | None = None
        self.board_lines: list[str] | None = None  # collecting a BOARD ... DONE block
        self.info: dict[str, int] = {}
        self.ended = False

    # --- framing -----------------------------------------------------------------------------
    def handle(self, raw: str) -> list[str]:
        line = raw.strip()
        if not line:
            return []
        if self.board_lines is not None:
            if line.upper() == "DONE":
                lines, self.board_lines = self.board_lines, None
                return self._guard(lambda: self.board(lines))
            self.board_lines.append(line)
            return []
        word, _, rest = line.partition(" ")
        word, rest = word.upper(), rest.strip()
        handlers: dict[str, Callable[[str], list[str]]] = {
            "START": self.start, "RECTSTART": self.rectstart, "RESTART": self.restart,
            "BEGIN": self.begin, "TURN": self.turn, "PLAY": self.play,
            "TAKEBACK": self.takeback, "INFO": self.set_info, "ABOUT": self.about,
            "END": self.end,
        }
        if word == "BOARD":
            if self.session is None:
                return ["ERROR BOARD before START"]
            self.board_lines = []
            return []
        handler = handlers.get(word)
        if handler is None:
            return [f"UNKNOWN command {word}"]
        return self._guard(lambda: handler(rest))

    def _guard(self, call: Callable[[], list[str]]) -> list[str]:
        try:
            return call()
        except BrainError as err:
            return [f"ERROR {err}"]
        except Exception as err:  # a brain bug must not end the match
            self.log(f"pbrain: {type(err).__name__}: {err}")
            return [f"ERROR internal error: {type(err).__name__}: {err}"]

    def serve(self, inp: TextIO, out: TextIO) -> int:
        for raw in inp:
            for answer in self.handle(raw):
                out.write(answer + "\n")
            out.flush()
            if self.ended:
                break
        return 0

    # --- helpers -------------------------------------------------------------------------------
    def _session(self) -> GameSession:
        if self.session is None:
            raise BrainError("no game: send START first")
        return self.session

    def _point(self, text: str) -> int:
        parts = [p.strip() for p in text.split(",")]
        if len(parts) < 2 or not all(p.lstrip("-").isdigit() for p in parts[:2]):
            raise BrainError(f"bad coordinate {text!r} (want x,y)")
        x, y = int(parts[0]), int(parts[1])
        if not (0 <= x < self.game.width and 0 <= y < self.game.height):
            raise BrainError(f"coordinate {x},{y} is off the "
                             f"{self.game.width}x{self.game.height} board")
        return y * self.game.width + x

    def _coord(self, action: int) -> str:
        y, x = divmod(int(action), self.game.width)
        return f"{x},{y}"

    def _play(self, session: GameSession, action: int) -> None:
        try:
            session.play(action)
        except IllegalMoveError as err:
            raise BrainError(f"{self._coord(action)}: {err}") from None

    def _budget(self, session: GameSession) -> float | None:
        """Seconds this move may take, or None if the manager set no time limits."""
        turn, match = self.info.get("timeout_turn"), self.info.get("timeout_match")
        if turn is None and match is None:
            return None
        budget = float("inf")
        if turn is not None:
            budget = turn / 1000.0
        left = self.info.get("time_left")
        if match and left is not None:
            empty = self.game.width * self.game.height - int(session.state.ply[0])
            budget = min(budget, left / 1000.0 / max(MIN_MOVES_LEFT, empty / 2))
        if budget == float("inf"):
            return None
        return max(0.0, budget * SAFETY - LATENCY)

    def _move(self) -> list[str]:
        session = self._session()
        if session.over:
            raise BrainError("the game is over")
        budget = self._budget(session)
        choice = self.agent.choose(self.game, session.state, budget, seed=len(session.moves))
        if "time_left" in self.info:
            self.info["time_left"] = max(0, self.info["time_left"] - int(choice.seconds * 1000))
        self._play(session, choice.action)
        out = []
        if self.info.get("debug"):
            out.append(f"DEBUG value {choice.value:+.3f}, {choice.simulations} simulations in "
                       f"{choice.seconds:.2f} s")
        return [*out, self._coord(choice.action)]

    def _new_game(self, width: int, height: int) -> list[str]:
        net_h, net_w = self.agent.net_game.spec.board_shape
        if (width, height) != (net_w, net_h):
            return [f"ERROR unsupported size {width}x{height}: this net plays {net_w}x{net_h}"]
        self.session = GameSession(self.game)
        return ["OK"]

    # --- commands ------------------------------------------------------------------------------
    def start(self, rest: str) -> list[str]:
        if not rest.isdigit():
            raise BrainError(f"START wants a board size, not {rest!r}")
        return self._new_game(int(rest), int(rest))

    def rectstart(self, rest: str) -> list[str]:
        parts = [p.strip() for p in rest.split(",")]
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise BrainError(f"RECTSTART wants width,height, not {rest!r}")
        return self._new_game(int(parts[0]), int(parts[1]))

    def restart(self, rest: str) -> list[str]:
        self._session()
        self.session = GameSession(self.game)
        return ["OK"]

    def begin(self, rest: str) -> list[str]:
        if self._session().moves:
            raise BrainError("BEGIN on a board that is not empty")
        return self._move()

    def turn(self, rest: str) -> list[str]:
        session = self._session()
        self._play(session, self._point(rest))
        return self._move()

    def play(self, rest: str) -> list[str]:
        session = self._session()
        action = self._point(rest)
        self._play(session, action)
        return [self._coord(action)]

    def takeback(self, rest: str) -> list[str]:
        session = self._session()
        action = self._point(rest)
        if not session.moves or session.moves[-1] != action:
            raise BrainError(f"TAKEBACK {rest}: not the last move played")
        session.undo()
        return ["OK"]

    def board(self, lines: list[str]) -> list[str]:
        self._session()
        own: list[int] = []
        theirs: list[int] = []
        for line in lines:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 3 or parts[2] not in ("1", "2", "3"):
                raise BrainError(f"BOARD line {line!r}: want x,y,1|2|3")
            (theirs if parts[2] == "2" else own).append(self._point(line))
        if len(set(own + theirs)) != len(own) + len(theirs):
            raise BrainError("BOARD names a point twice")
        # The brain is to move: with equal counts it moved first, else the opponent did.
        if len(theirs) == len(own):
            first, second = own, theirs
        elif len(theirs) == len(own) + 1:
            first, second = theirs, own
        else:
            raise BrainError(f"BOARD with {len(own)} own and {len(theirs)} opponent stones "
                             "is not a position with the brain to move")
        session = GameSession(self.game)
        for i in range(len(first) + len(second)):
            self._play(session, (first if i % 2 == 0 else second)[i // 2])
        self.session = session
        return self._move()

    def set_info(self, rest: str) -> list[str]:
        key, _, value = rest.partition(" ")
        key, value = key.lower(), value.strip()
        if key in ("timeout_turn", "timeout_match", "time_left", "max_memory", "game_type"):
            if not value.lstrip("-").isdigit():
                return [f"ERROR INFO {key} wants an integer, not {value!r}"]
            self.info[key] = int(value)
        elif key == "rule":
            if not value.isdigit():
                return [f"ERROR INFO rule wants an integer, not {value!r}"]
            return self._rule(int(value))
        return []  # evaluate, folder and keys from newer managers need no answer

    def _rule(self, rule: int) -> list[str]:
        exact = bool(rule & RULE_EXACT)
        out = []
        if rule & (RULE_RENJU | RULE_CARO):
            out.append("MESSAGE zeroforge plays free-style or exact-five gomoku, not renju "
                       "or caro; playing " + ("exact five" if exact else "free-style"))
        if exact != self.game.exact:
            game: Game = Gomoku(width=self.game.width, height=self.game.height,
                                k=self.game.k, exact=exact)
            if not net_plays(game, self.agent.net_game):
                return [*out, "MESSAGE the net cannot play that rule; keeping the old one"]
            moves = self.session.moves if self.session is not None else []
            self.game = game  # type: ignore[assignment]
            if self.session is not None:
                session = GameSession(self.game)
                for action in moves:
                    session.play(action)
                self.session = session
        return out

    def about(self, rest: str) -> list[str]:
        return [f'name="zeroforge", version="{self.version}", author="zeroforge", '
                f'game="{self.agent.net_game.spec.spec_string}"']

    def end(self, rest: str) -> list[str]:
        self.ended = True
        return []


def run(checkpoint: str, simulations: int = 200, game: str | None = None,
        max_simulations: int = 20000, device: str = "auto", verbose: bool = False,
        inp: TextIO | None = None, out: TextIO | None = None,
        leaf_batch: int = DEFAULT_LEAF_BATCH) -> int:
    """``zeroforge pbrain``: loads the net, then speaks the brain protocol until ``END``."""
    agent, log = engine_agent("pbrain", checkpoint, game, simulations, max_simulations,
                              device, leaf_batch, verbose)
    brain = Brain(agent, version=__version__, log=log)
    if verbose:
        brain.info["debug"] = 1
    return brain.serve(inp or sys.stdin, out or sys.stdout)
