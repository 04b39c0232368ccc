"""Ending a process a test started the way a user would: Ctrl-C, then a kill if it hangs."""

from __future__ import annotations

import signal
import subprocess


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
