"""A hosted worker in a child process of its own (``actors.process_worker``), against a real
redis-server and the real builder (``deploy.runtime.builder.hosted_worker``): the child
reports its stats and game ids to the parent, stops cleanly with every game it appended in
the stream, a child killed with SIGKILL or one that fails makes ``run`` raise one line
naming the worker, and a parent killed with SIGKILL leaves no child running."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psutil
import pytest

from zeroforge.actors.config import SelfPlayConfig
from zeroforge.actors.process_worker import ProcessWorker, WorkerProcessError
from zeroforge.deploy.config import RunConfig, TrainConfig
from zeroforge.deploy.runtime.builder import HOSTED_WORKER
from zeroforge.shared import config as cfg
from zeroforge.shared.metrics import snapshot_total
from zeroforge.shared.nets import NetConfig
from zeroforge.shared.search import SearchConfig
from zeroforge.shared.transport import open_transport

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def worker_args(url: str, run_id: str, run_dir: str) -> dict[str, Any]:
    """The plain data a hosted worker's child builds from: tic-tac-toe, a tiny net, two
    simulations a move (a game in well under a second)."""
    config = TrainConfig(game="tictactoe", net=NetConfig.preset("tiny"),
                         search=SearchConfig(num_simulations=2),
                         selfplay=SelfPlayConfig(games_in_parallel=4),
                         run=RunConfig(torch_threads=1))
    ctx = dataclasses.replace(config.context(run_id, url), run_dir=run_dir)
    return {"config": cfg.to_dict(config), "ctx": ctx.to_dict(),
            "transport": {"role": "worker", "weights_cache_dir": None}}


def wait_until(condition: Callable[[], Any], timeout_s: float = 120.0,
               what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:g} s")
        time.sleep(0.05)
    return value


def gone(pid: int) -> bool:
    """The process has exited (a zombie not yet reaped by whoever adopted it counts)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class Running:
    """A ``ProcessWorker``'s ``run`` in a thread, with its result or error."""

    def __init__(self, worker: ProcessWorker) -> None:
        self.worker, self.stop = worker, threading.Event()
        self.result: int | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.result = self.worker.run(self.stop)
        except BaseException as err:
            self.error = err

    def end(self, timeout_s: float = 120.0) -> None:
        self.stop.set()
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), "the worker's run did not return"


@pytest.fixture
def running() -> Iterator[Callable[[ProcessWorker], Running]]:
    started: list[Running] = []

    def start(worker: ProcessWorker) -> Running:
        started.append(Running(worker))
        return started[-1]

    yield start
    for r in started:  # a failed test leaves no child behind
        r.end()


def games_reported(worker: ProcessWorker) -> float:
    return snapshot_total(worker.stats(), "selfplay_games_total")


def test_a_worker_process_reports_and_stops_with_its_games_in_the_stream(
        redis_server, run_id, tmp_path, running):
    worker = ProcessWorker(HOSTED_WORKER, worker_args(redis_server.url, run_id,
                                                     str(tmp_path)), 3, report_s=0.3)
    assert worker.stats() == {"values": {}, "hists": {}} and worker.game_ids() == []
    r = running(worker)
    # the parent answers from the child's reports, without asking it
    wait_until(lambda: games_reported(worker) >= 8, what="8 games reported")
    labels = {tuple(map(tuple, lb)) for lb, _ in worker.stats()["values"]["selfplay_games_total"]}
    assert all(("worker", "3") in lb for lb in labels)
    assert len(worker.game_ids()) >= 8
    pid = worker.pid
    assert pid is not None and pid != os.getpid()
    assert psutil.Process(pid).ppid() == os.getpid()

    r.end()
    assert r.error is None, r.error
    assert r.result is not None and r.result >= 8
    assert gone(pid)
    # its final report came in: every game it appended, counted and listed
    assert games_reported(worker) == r.result
    ids = worker.game_ids()
    assert len(ids) == len(set(ids)) == r.result
    samples = open_transport(redis_server.url, run_id).samples()
    in_stream = [g.game_id for _, g in samples.read(max_count=10_000, block_ms=0)]
    assert sorted(in_stream) == sorted(ids)


def test_a_killed_worker_process_fails_run_with_one_line(redis_server, run_id, tmp_path,
                                                          running):
    worker = ProcessWorker(HOSTED_WORKER, worker_args(redis_server.url, run_id,
                                                     str(tmp_path)), 4, report_s=0.3)
    r = running(worker)
    wait_until(lambda: games_reported(worker) >= 1, what="a game reported")
    assert worker.pid is not None
    os.kill(worker.pid, signal.SIGKILL)
    r.thread.join(30)
    assert not r.thread.is_alive()
    assert isinstance(r.error, WorkerProcessError)
    assert str(r.error) == (f"hosted worker 4 (pid {worker.pid}) died: exit code -9 "
                            f"(SIGKILL)")


def test_a_worker_that_cannot_be_built_fails_run_with_its_error_line(
        redis_server, run_id, tmp_path, running):
    args = worker_args(redis_server.url, run_id, str(tmp_path))
    args["ctx"]["transport"] = "bogus://nowhere"
    worker = ProcessWorker(HOSTED_WORKER, args, 5)
    r = running(worker)
    r.thread.join(120)
    assert isinstance(r.error, WorkerProcessError)
    text = str(r.error)
    assert "\n" not in text
    assert text.startswith(f"hosted worker 5 failed in its process (pid {worker.pid}, "
                           "exit code 1): ValueError: transport URL 'bogus'")


def test_only_plain_data_crosses_into_the_child():
    with pytest.raises(TypeError, match=r"args\.config: a SelfPlayConfig is not plain data"):
        ProcessWorker(HOSTED_WORKER, {"config": SelfPlayConfig()}, 0)
    with pytest.raises(ValueError, match="module:function"):
        ProcessWorker("zeroforge.deploy.runtime.builder", {}, 0)


PARENT = """
import json, sys, threading, time
from zeroforge.actors.process_worker import ProcessWorker
from zeroforge.deploy.runtime.builder import HOSTED_WORKER

worker = ProcessWorker(HOSTED_WORKER, json.loads(sys.argv[1]), 6, report_s=0.3)
threading.Thread(target=worker.run, args=(threading.Event(),), daemon=True).start()
while not worker.stats()["values"]:
    time.sleep(0.05)
print(worker.pid, flush=True)
time.sleep(600)
"""


def test_a_dead_parent_leaves_no_worker_process(redis_server, run_id, tmp_path):
    args = worker_args(redis_server.url, run_id, str(tmp_path))
    parent = subprocess.Popen([sys.executable, "-c", PARENT, json.dumps(args)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert psutil.Process(child).ppid() == parent.pid
        parent.send_signal(signal.SIGKILL)
        parent.wait(30)
        # the child sees its parent gone, stops its worker (appending its games) and exits
        wait_until(lambda: gone(child), timeout_s=60, what="the orphaned child's exit")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
