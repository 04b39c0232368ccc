"""Keys from the terminal without Enter and without echo (cbreak mode), read with a
timeout so the view goes on refreshing; the terminal's settings are put back on exit,
however the program leaves (``q``, Ctrl-C, an error).

cbreak keeps signals on: Ctrl-C still raises KeyboardInterrupt.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import termios
import time
import tty
from typing import Any, TextIO


class KeyReader:
    """``with KeyReader() as keys: keys.wait(1.0)`` -> the keys typed within a second
    ("" if none). Not a terminal (stdin from a file or /dev/null): no keys, just waits."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdin
        self._fd = -1
        self._saved: list[Any] | None = None

    def __enter__(self) -> KeyReader:
        with contextlib.suppress(AttributeError, ValueError, OSError):
            fd = self.stream.fileno()
            if os.isatty(fd):
                self._saved = termios.tcgetattr(fd)
                tty.setcbreak(fd, termios.TCSANOW)
                self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def restore(self) -> None:
        """Put the terminal back as it was (idempotent)."""
        if self._saved is not None and self._fd >= 0:
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    @property
    def interactive(self) -> bool:
        return self._saved is not None

    def wait(self, timeout_s: float) -> str:
        """Keys typed before ``timeout_s`` passes (returns at the first one)."""
        if not self.interactive:
            time.sleep(max(timeout_s, 0.0))
            return ""
        ready, _, _ = select.select([self._fd], [], [], max(timeout_s, 0.0))
        if not ready:
            return ""
        data = os.read(self._fd, 64)
        return data.decode("utf-8", errors="replace")
