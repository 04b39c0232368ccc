"""Ending a process a test started the way a user would: Ctrl-C, then a kill if it hangs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable

import psutil


def interrupt(proc: subprocess.Popen, timeout: float = 20) -> None:
    """SIGINT to ``proc``, then wait up to ``timeout`` s; killed (and reaped) if it has not
    ended by then, so ``returncode`` says which it was."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def ignores_sigint(pid: int) -> bool:
    """Whether process ``pid`` has SIGINT ignored (its ``SigIgn`` mask in /proc)."""
    with open(f"/proc/{pid}/status") as f:
        ignored = int(next(x for x in f if x.startswith("SigIgn:")).split()[1], 16)
    return bool(ignored & (1 << (signal.SIGINT - 1)))


def end_session(leader: subprocess.Popen, members: Callable[[], list[psutil.Process]],
                grace_s: float = 15) -> None:
    """End a process tree a test started in its own session (``ray start --block``):
    SIGTERM to ``leader``'s group (Ray stops its processes in order), SIGKILL to whatever
    of ``members()`` outlives ``grace_s``, and ``leader`` reaped."""
    procs = members()
    with contextlib.suppress(OSError):
        os.killpg(leader.pid, signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive + members():
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(members(), timeout=grace_s)
    with contextlib.suppress(subprocess.TimeoutExpired):
        leader.wait(timeout=10)


def naming(mark: str) -> list[psutil.Process]:
    """Live processes whose command line contains ``mark`` (a run directory, a Ray
    session's folder): the processes of one run among others on the machine."""
    return [p for p in psutil.process_iter(["cmdline"])
            if mark in " ".join(p.info["cmdline"] or [])]


def gone(pid: int) -> bool:
    """Whether no process ``pid`` exists (any more)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def read_lines(proc: subprocess.Popen) -> tuple[list[str], threading.Thread]:
    """Read ``proc``'s text stdout on a daemon thread: the list grows a line at a time while
    the process runs (a test polls it without blocking); the thread ends at end of file."""
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return lines, reader
