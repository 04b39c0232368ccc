"""Game records a run keeps: SGF files of evaluation games and a sample of self-play games.

```
RUN_DIR/games/eval/v<version>-<anchor>-<n>.sgf      every evaluation game (the evaluator)
RUN_DIR/games/selfplay/<game id>.sgf               1 in ``selfplay.record_every`` games
```

Written with ``shared.formats.sgf`` (GM[1] for Go, GM[4] for gomoku and tic-tac-toe); a
game SGF has no type for (five-stone) is not recorded. Each directory keeps at most
``keep`` files: past that the oldest (by name order within a writer's own files, then
modification time) are deleted, so a long run's disk use stays bounded. Writing a record
never stops the run: an OS error is logged and counted (``errors``).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path

from zeroforge.shared.formats import record_from_session, write_sgf
from zeroforge.shared.games import Game, GameSession

log = logging.getLogger(__name__)

GAMES_DIR = "games"
EVAL_DIR = "eval"
SELFPLAY_DIR = "selfplay"
DEFAULT_KEEP = 2000
"""Records kept per directory unless told otherwise (~1-3 KB each)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]+")


def recordable(game: Game) -> bool:
    """Whether SGF has a game type for ``game`` (Go, gomoku, tic-tac-toe)."""
    return game.spec.name in ("go", "gomoku", "tictactoe")


def safe_name(text: str) -> str:
    """``text`` as a file-name part: ``uct:100`` -> ``uct100``, no path separators."""
    return _UNSAFE.sub("", text.replace(":", "")) or "x"


def sgf_of_moves(game: Game, moves: Sequence[int], *, black: str = "", white: str = "",
                 comment: str = "") -> str:
    """The SGF of a game played from the start with ``moves``, its result from replaying
    them (Go: the counted margin). IllegalMoveError if a move is illegal."""
    session = GameSession(game)
    for action in moves:
        session.play(int(action))
    return write_sgf(record_from_session(session, black=black, white=white, comment=comment))


class RecordWriter:
    """Writes SGF files into one directory, keeping at most ``keep`` of them."""

    def __init__(self, directory: str | Path, game: Game, keep: int = DEFAULT_KEEP) -> None:
        if keep < 1:
            raise ValueError(f"RecordWriter: keep must be >= 1, got {keep}")
        self.directory = Path(directory)
        self.game = game
        self.keep = keep
        self.enabled = recordable(game)
        self.written = 0
        self.errors = 0
        self._since_prune = keep  # prune on the first write: a restarted run's leftovers

    def write(self, name: str, moves: Sequence[int], *, black: str = "", white: str = "",
              comment: str = "") -> Path | None:
        """``DIRECTORY/<name>.sgf`` (name made file-safe); None when not written (a game
        SGF cannot hold, or an OS error, which is logged and counted)."""
        if not self.enabled:
            return None
        path = self.directory / f"{safe_name(name)}.sgf"
        try:
            text = sgf_of_moves(self.game, moves, black=black, white=white, comment=comment)
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
        except (OSError, ValueError) as err:
            self.errors += 1
            log.warning("cannot write game record %s: %s", path, str(err).splitlines()[0])
            return None
        self.written += 1
        self._since_prune += 1
        # Listing the directory every write would cost more than the write: every
        # keep/10 writes is enough to stay within 10 % of the bound.
        if self._since_prune >= max(self.keep // 10, 1):
            self._since_prune = 0
            self.prune()
        return path

    def prune(self) -> int:
        """Delete the oldest records beyond ``keep``; returns how many were deleted."""
        try:
            files = [(p.stat().st_mtime, p.name, p) for p in self.directory.glob("*.sgf")]
        except OSError:
            return 0
        excess = len(files) - self.keep
        if excess <= 0:
            return 0
        deleted = 0
        for _, _, p in sorted(files)[:excess]:
            try:
                p.unlink()
                deleted += 1
            except FileNotFoundError:  # another writer of this directory was first
                pass
            except OSError as err:
                log.warning("cannot delete old game record %s: %s", p, err)
        return deleted


def eval_writer(run_dir: str | Path, game: Game, keep: int = DEFAULT_KEEP) -> RecordWriter:
    return RecordWriter(Path(run_dir) / GAMES_DIR / EVAL_DIR, game, keep)


def selfplay_writer(run_dir: str | Path, game: Game, keep: int = DEFAULT_KEEP) -> RecordWriter:
    return RecordWriter(Path(run_dir) / GAMES_DIR / SELFPLAY_DIR, game, keep)
