"""The bundled redis-server does not outlive an owner killed with SIGKILL (it runs in its
own session, so only PR_SET_PDEATHSIG ends it): neither the first server nor one the
supervisor restarted from its own thread."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import psutil

OWNER = """
import os, signal, sys, time
from zeroforge.shared.transport import RedisServer
server = RedisServer().start()
if sys.argv[1] == "restarted":
    first = server.pid
    os.kill(first, signal.SIGKILL)
    while server.restarts < 1 or not server.running:
        time.sleep(0.05)
print(server.pid, flush=True)
time.sleep(600)
"""


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def _owner_killed(mode: str) -> tuple[int, bool]:
    owner = subprocess.Popen([sys.executable, "-c", OWNER, mode], stdout=subprocess.PIPE,
                             text=True, cwd=os.getcwd())
    redis_pid = 0
    try:
        assert owner.stdout is not None
        redis_pid = int(owner.stdout.readline())
        proc = psutil.Process(redis_pid)
        assert proc.ppid() == owner.pid and "redis" in proc.name()
        assert proc.pid != owner.pid and os.getsid(redis_pid) != os.getsid(owner.pid)
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=10)
        return redis_pid, _gone(redis_pid, 5.0)
    finally:
        owner.kill()
        owner.wait()
        if redis_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(redis_pid, signal.SIGKILL)


def test_a_sigkilled_owner_takes_its_redis_server_along():
    pid, gone = _owner_killed("first")
    assert gone, f"redis-server {pid} outlived its SIGKILLed owner"


def test_a_server_the_supervisor_restarted_also_goes_with_its_owner():
    pid, gone = _owner_killed("restarted")
    assert gone, f"restarted redis-server {pid} outlived its SIGKILLed owner"
