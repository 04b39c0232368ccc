"""``zeroforge play --web`` started for a test: the board's URL, stopped with Ctrl-C."""

from __future__ import annotations

import contextlib
import re
import subprocess
from collections.abc import Iterator
from typing import Any

from tests.processes import interrupt


@contextlib.contextmanager
def play_board(zeroforge: list[str], **popen: Any) -> Iterator[str]:
    """Runs ``zeroforge play --web`` (``zeroforge``: the command, e.g. ``[EXE]``) on a free
    loopback port; yields the URL it printed; ``popen``: cwd, env ... for ``Popen``."""
    proc = subprocess.Popen([*zeroforge, "play", "--web", "--port", "0", "--seed", "4"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            **popen)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.match(r"board at (http://127\.0\.0\.1:\d+/)$", line.strip())
        assert found, line + (proc.stdout.read() if proc.poll() is not None else "")
        yield found.group(1)
    finally:
        interrupt(proc)
