"""An external Go program spoken to over GTP v2, as a ``Player`` (spec ``gtp:COMMAND``).

``GtpEngine`` runs the program as a subprocess and exchanges one command and one response
at a time (a reader thread, so a hung or dead engine is a one-line ``GtpError``, never a
hang). ``GtpPlayer`` plays Go through it: before each ``genmove`` it brings the engine's
board to the position it is asked about by ``play``-ing the moves it has not seen, or by
``clear_board`` and replaying the whole game when the engine's board went another way
(batches mix games). The move list of a game is found from the Go state's position hashes,
which name every position of the game so far; a position it never saw (a game started
elsewhere) is set up stone by stone, which loses only ko history.

GTP and Go's own notation agree (columns A..T without I, rows from the bottom, ``pass``),
so ``Go.parse_action`` / ``format_action`` translate vertices.
"""

from __future__ import annotations

import os
import queue
import shlex
import shutil
import subprocess
import threading
import weakref
from pathlib import Path

import numpy as np

from zeroforge.shared.games import Game, IllegalMoveError, State

__all__ = ["GtpError", "GtpRefused", "GtpEngine", "GtpPlayer", "Resigned", "resolve_command"]

GNUGO_FALLBACK_DIRS = ("/usr/games",)
"""Where Debian installs programs such as ``gnugo`` outside the usual PATH."""

DEFAULT_TIMEOUT = 120.0
"""Seconds to wait for one response before calling the engine hung."""

_HISTORY_CAP = 4096  # remembered positions (one per game in flight is what is needed)


class GtpError(ValueError):
    """The engine could not be started, died, hung, or answered a command with ``?``."""


class GtpRefused(GtpError):
    """The engine answered a command with ``?`` (it is still running)."""


class Resigned(Exception):
    """The engine answered ``genmove`` with ``resign``: ``index`` is the game in the batch
    that was asked, ``color`` 0 (Black) or 1 (White)."""

    def __init__(self, player: str, index: int, color: int) -> None:
        super().__init__(f"{player} resigned as {'BW'[color]}")
        self.player, self.index, self.color = player, index, color


def resolve_command(command: str | list[str]) -> list[str]:
    """The argument list of ``command`` with its program found on PATH or in /usr/games.

    ValueError in one line if the program does not exist."""
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise ValueError("gtp: empty engine command")
    program = argv[0]
    if os.sep in program:
        if not os.access(program, os.X_OK):
            raise ValueError(f"gtp: engine {program!r} is not an executable file")
        return argv
    found = shutil.which(program) or next(
        (str(Path(d) / program) for d in GNUGO_FALLBACK_DIRS
         if os.access(Path(d) / program, os.X_OK)), None)
    if found is None:
        raise ValueError(f"gtp: engine program {program!r} not found on PATH or in "
                         f"{', '.join(GNUGO_FALLBACK_DIRS)}")
    return [found, *argv[1:]]


def _stop(proc: subprocess.Popen) -> None:
    """Ends an engine process that is still running (quit first, then kill)."""
    if proc.poll() is not None:
        return
    try:
        if proc.stdin and not proc.stdin.closed:
            proc.stdin.write("quit\n")
            proc.stdin.flush()
            proc.stdin.close()
        proc.wait(timeout=2)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()


class GtpEngine:
    """One GTP engine subprocess: ``send("genmove b") -> "C3"``; GtpError on ``?``."""

    def __init__(self, command: str | list[str], timeout: float = DEFAULT_TIMEOUT,
                 cwd: str | None = None) -> None:
        self.argv = resolve_command(command)
        self.label = " ".join([Path(self.argv[0]).name, *self.argv[1:]])
        self.timeout = timeout
        try:
            self._proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, bufsize=1, cwd=cwd)
        except OSError as err:
            raise GtpError(f"gtp engine {self.label!r} did not start: {err}") from None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._pump, args=(self._proc.stdout, self._lines),
                         daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_reader.start()
        self._finalizer = weakref.finalize(self, _stop, self._proc)

    @staticmethod
    def _pump(stream, lines: queue.Queue) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    def _drain_stderr(self) -> None:
        for line in self._proc.stderr:  # type: ignore[union-attr]
            self._stderr.append(line.rstrip())
            del self._stderr[:-5]  # the last few lines say why an engine died

    def _died(self, command: str) -> GtpError:
        try:
            code = self._proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            code = None
        else:
            self._stderr_reader.join(timeout=1)  # its last words, if it wrote any
        tail = next((line for line in reversed(self._stderr) if line.strip()), "")
        why = f"exited with code {code}" if code is not None else "closed its output"
        return GtpError(f"gtp engine {self.label!r} {why} while answering {command!r}"
                        + (f": {tail}" if tail else ""))

    def send(self, command: str) -> str:
        """The engine's answer to ``command`` (without ``=`` and the blank line)."""
        if self._proc.poll() is not None:
            raise self._died(command)
        try:
            self._proc.stdin.write(command + "\n")  # type: ignore[union-attr]
            self._proc.stdin.flush()  # type: ignore[union-attr]
        except (OSError, ValueError):
            raise self._died(command) from None
        response: list[str] = []
        while True:
            try:
                line = self._lines.get(timeout=self.timeout)
            except queue.Empty:
                raise GtpError(f"gtp engine {self.label!r} gave no answer to {command!r} "
                               f"in {self.timeout:g} s") from None
            if line is None:
                raise self._died(command)
            line = line.rstrip("\r\n")
            if not response and not line.strip():
                continue  # stray blank lines between responses
            if response and not line.strip():
                break
            response.append(line)
        head, body = response[0], "\n".join(response)
        if head.startswith("="):
            return body[1:].lstrip("0123456789").strip()
        if head.startswith("?"):
            message = body[1:].lstrip("0123456789").strip()
            raise GtpRefused(f"gtp engine {self.label!r} refused {command!r}: {message}")
        raise GtpError(f"gtp engine {self.label!r} answered {command!r} with {head!r}, "
                       "not a GTP response")

    def close(self) -> None:
        """Quits the engine (killing it if it does not quit at once)."""
        self._finalizer()

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None


class GtpPlayer:
    """A Go program over GTP as a ``Player`` (``make_player("gtp:gnugo --mode gtp")``).

    ``on_resign``: ``"raise"`` raises ``Resigned`` (the match runner scores it ``B+R`` /
    ``W+R``); ``"pass"`` plays a pass instead, for callers that only know moves. A move the
    engine chose that zeroforge's rules forbid (its ko rule is weaker than positional
    superko) is taken back in the engine and replaced by a pass; ``replaced_moves`` counts
    them. ``replays`` counts clear_board-and-replay syncs, ``setups`` positions set up
    stone by stone (their move list was unknown).
    """

    def __init__(self, command: str | list[str], name: str | None = None,
                 on_resign: str = "raise", timeout: float = DEFAULT_TIMEOUT) -> None:
        if on_resign not in ("raise", "pass"):
            raise ValueError(f"GtpPlayer on_resign={on_resign!r}: must be 'raise' or 'pass'")
        self.engine = GtpEngine(command, timeout=timeout)
        self.name = name or self.engine.label
        self.on_resign = on_resign
        self.replaced_moves = self.replays = self.setups = 0
        self._setup: tuple[int, float] | None = None  # (size, komi) sent to the engine
        self._engine_moves: list[tuple[int, int]] | None = None  # (colour, action) played
        self._games: dict[bytes, list[tuple[int, int]]] = {}

    # --- keeping the engine's board in step ----------------------------------------------
    def _configure(self, game: Game) -> None:
        if game.spec.name != "go":
            raise ValueError(f"gtp player {self.name!r} plays Go, not {game.spec.spec_string}")
        size, komi = int(game.size), float(game.komi)  # type: ignore[attr-defined]
        if self._setup != (size, komi):
            try:
                self.engine.send(f"boardsize {size}")
            except GtpRefused as err:
                raise GtpError(f"{err} (the engine cannot play {size}x{size})") from None
            self.engine.send(f"komi {komi:g}")
            self.engine.send("clear_board")
            self._setup, self._engine_moves = (size, komi), []

    @staticmethod
    def _key(states: State, index: int, length: int | None = None) -> bytes:
        n = int(states.num_positions[index]) if length is None else length  # type: ignore[attr-defined]
        return states.position_hashes[index, :n].tobytes()  # type: ignore[attr-defined]

    def _moves_of(self, game: Game, states: State, index: int) -> list[tuple[int, int]] | None:
        """(colour, action) moves that led to game ``index``, or None if not known."""
        ply = int(states.ply[index])
        if ply == 0:
            return []
        n = int(states.num_positions[index])  # type: ignore[attr-defined]
        if ply == 1:  # the opponent made the first move
            before: list[tuple[int, int]] | None = []
        else:
            before = self._games.pop(self._key(states, index, n - 1), None) if n >= 2 else None
        if before is None or len(before) != ply - 1:
            return None
        return [*before, (1 - int(states.to_play[index]), int(states.last_action[index]))]

    def _play(self, game: Game, colour: int, action: int) -> None:
        self.engine.send(f"play {'BW'[colour]} {game.format_action(action)}")

    def _sync(self, game: Game, states: State, index: int
              ) -> list[tuple[int, int]] | None:
        """Puts game ``index`` on the engine's board; returns its moves (None: set up)."""
        moves = self._moves_of(game, states, index)
        current = self._engine_moves
        if moves is not None and current is not None and moves[:len(current)] == current:
            for colour, action in moves[len(current):]:
                self._play(game, colour, action)
            self._engine_moves = moves
            return moves
        self.engine.send("clear_board")
        self._engine_moves = None
        if moves is None:
            self.setups += 1
            # Stones only: all Black first, then all White. Nothing can be captured or be
            # suicide on the way, since each group has a liberty in the final position.
            board = states.board[index]  # type: ignore[attr-defined]
            for colour in (0, 1):
                for point in np.flatnonzero(board == colour + 1):
                    self._play(game, colour, int(point))
            return None
        self.replays += 1
        for colour, action in moves:
            self._play(game, colour, action)
        self._engine_moves = moves
        return moves

    # --- the Player protocol ---------------------------------------------------------------
    def select(self, game: Game, states: State, rng: np.random.Generator) -> np.ndarray:
        """[B] actions for ``states`` [B] (-1 for finished games); one ``genmove`` each."""
        self._configure(game)
        actions = np.full(states.batch_size, -1, np.int32)
        for i in np.flatnonzero(~states.terminal):
            actions[i] = self._genmove(game, states, int(i))
        return actions

    def _genmove(self, game: Game, states: State, index: int) -> int:
        moves = self._sync(game, states, index)
        colour = int(states.to_play[index])
        answer = self.engine.send(f"genmove {'BW'[colour]}").strip()
        if answer.lower() == "resign":
            self._engine_moves = None  # the engine did not play anything, but be safe
            if self.on_resign == "raise":
                raise Resigned(self.name, index, colour)
            answer = "pass"
        try:
            action = game.parse_action(answer)
        except IllegalMoveError:
            raise GtpError(f"gtp engine {self.engine.label!r} answered genmove with "
                           f"{answer!r}, not a move on this board") from None
        if game.illegal_reason(states, index, action) is not None:
            # e.g. a retake that positional superko forbids and the engine's ko rule allows
            self.replaced_moves += 1
            self.engine.send("undo")
            self._play(game, colour, game.spec.num_actions - 1)
            action = game.spec.num_actions - 1
        if moves is not None and self._engine_moves is not None:
            self._engine_moves = [*moves, (colour, action)]
            self._remember(game, states, index, action, self._engine_moves)
        return action

    def forced(self, game: Game, states: State, index: int, action: int) -> None:
        """``action`` was played for the engine in game ``index`` (an opening's move,
        ``play_match``'s ``openings``): remembered as if it had chosen it, so that the
        game's moves are known the next time it is asked (and its board is brought there
        by ``play``, not set up stone by stone, which would lose ko history each move)."""
        moves = self._moves_of(game, states, index)
        if moves is not None:
            colour = int(states.to_play[index])
            self._remember(game, states, index, action, [*moves, (colour, action)])

    def _remember(self, game: Game, states: State, index: int, action: int,
                  moves: list[tuple[int, int]]) -> None:
        """Keep ``moves`` (those of game ``index`` and then ``action``) under the position
        they lead to, where ``_moves_of`` looks for them."""
        after = game.step(states.take([index]), np.array([action]))
        if len(self._games) >= _HISTORY_CAP:
            self._games.clear()
        self._games[self._key(after, 0)] = moves

    # --- scoring ---------------------------------------------------------------------------
    def final_score(self, game: Game, moves: list[int]) -> str:
        """The engine's ``final_score`` (e.g. ``B+3.5``) after the game ``moves`` (actions,
        alternating from Black) of ``game``; its own dead-stone judgement included."""
        self._configure(game)
        played = [(i % 2, int(a)) for i, a in enumerate(moves)]
        current = self._engine_moves
        if current is None or played[:len(current)] != current:
            self.engine.send("clear_board")
            current = []
        for colour, action in played[len(current):]:
            self._play(game, colour, action)
        self._engine_moves = played
        return self.engine.send("final_score")

    def seki_stones(self) -> list[str]:
        """The stones the engine calls alive in seki (``final_status_list seki``) in the
        position of the last ``final_score``; empty when it has none or lacks the command.
        A seki is where an engine's count and Tromp-Taylor's may differ: area scoring gives
        an eye inside a seki to the colour around it, an engine may leave it uncounted."""
        try:
            return self.engine.send("final_status_list seki").split()
        except GtpRefused:
            return []

    def close(self) -> None:
        self.engine.close()
