"""SIGTERM handled as Ctrl-C: a clean stop (drain, final checkpoint, report) when
``kill`` or a scheduler ends a run. Used by ``zeroforge train`` (``commands.py``) and,
after ``ray.init`` replaced the handler, by the distributed driver (``distributed.py``).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (``kill``, a scheduler ending the job) is handled like Ctrl-C: the first
    one raises KeyboardInterrupt in the main thread (drain, final checkpoint, report);
    later ones are ignored so that the clean stop can finish. ``install_sigterm`` puts the
    handler back after a library (``ray.init``) replaced it.

    SIGINT too stops the run cleanly when it arrives, even if this process was started with
    it ignored: a shell without job control starts ``cmd &`` that way (so ``nohup zeroforge
    train ... &`` from a script), and Python then leaves it ignored, so ``kill -INT`` or a
    supervisor's Ctrl-C would do nothing. Such a run now stops as a foreground one does."""
    previous = signal.getsignal(signal.SIGTERM)
    previous_int = signal.getsignal(signal.SIGINT)
    install_sigterm()
    if previous_int == signal.SIG_IGN and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, previous_int)


def install_sigterm() -> None:
    """Make SIGTERM raise KeyboardInterrupt once (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    fired: list[int] = []

    def handler(signum: int, frame: object) -> None:
        if not fired:
            fired.append(signum)
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)
