"""A distributed ``zeroforge train`` as a test runs it: a real process in its own session,
its output read by a thread, and everything it started (Redis, Ray's processes) killed at
the end even when the test fails (``with TrainProcess(...) as train``)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil

from tests.e2e.test_cli import ZF, zf
from tests.processes import read_lines

TINY = ["--set", "net=tiny", "--set", "search.num_simulations=12",
        "--set", "selfplay.games_in_parallel=8", "--set", "learner.min_replay=64",
        "--set", "learner.batch_size=32", "--set", "evaluation.games=4",
        "--set", "run.progress_every_s=1", "--set", "distributed.evaluator=false",
        "--set", "distributed.worker_cpus=0.25", "--set", "distributed.learner_cpus=0.25",
        "--set", "selfplay.cpu_share=0.25"]


class TrainProcess:
    """``zeroforge train`` (distributed) with ``--run-dir DIR --run-id ID``."""

    def __init__(self, run_dir: Path, run_id: str, *extra: str) -> None:
        self.run_dir = run_dir
        self.run_id = run_id
        args = ["train", "--config", "tictactoe", "--run-dir", str(run_dir), "--run-id",
                run_id, *TINY, *extra]
        self.proc = subprocess.Popen([*ZF, *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        self.lines, self._reader = read_lines(self.proc)
        self._descendants: dict[int, psutil.Process] = {}

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, text: str, timeout: float = 150) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            assert self.proc.poll() is None or self._reader.is_alive(), \
                f"train ended before {text!r}:\n{self.output[-3000:]}"
            assert time.monotonic() < deadline, f"no {text!r} in:\n{self.output[-3000:]}"
            time.sleep(0.2)
        self.remember_descendants()

    def remember_descendants(self) -> None:
        """Note every process the driver has started (to kill them if the test fails)."""
        with contextlib.suppress(psutil.Error):
            for p in psutil.Process(self.proc.pid).children(recursive=True):
                self._descendants.setdefault(p.pid, p)

    def descendants_alive(self) -> list[str]:
        alive = []
        for p in self._descendants.values():
            with contextlib.suppress(psutil.Error):
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{p.pid} {p.name()}")
        return alive

    def status(self, *how: str) -> dict:
        r = zf("status", "--json", *(how or ("--run-dir", str(self.run_dir))))
        assert r.returncode == 0, f"{r.stderr}\ntrain output:\n{self.output[-3000:]}"
        return json.loads(r.stdout)

    def status_when(self, check, timeout: float = 60) -> dict:
        """Poll ``status --json`` once a second until ``check(status)`` holds or about
        ``timeout`` seconds pass; returns the last status (the caller asserts on it)."""
        st = self.status()
        for _ in range(int(timeout)):
            if check(st):
                break
            time.sleep(1)
            st = self.status()
        return st

    def wait(self, timeout: float = 150) -> int:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return code

    def kill(self) -> None:
        self.remember_descendants()
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        for p in self._descendants.values():
            with contextlib.suppress(psutil.Error):
                p.kill()
        self._reader.join(timeout=10)

    def __enter__(self) -> TrainProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
