"""Several self-play workers in one process (``distributed.workers_per_host``).

A ``WorkerHost`` is a ``Service`` holding K workers (each a ``Service`` of its own, with
its own worker id and counters), each run in a thread of its own (with
``distributed.host_workers=process`` each worker is a ``ProcessWorker``, whose thread
relays to the child process the worker runs in, ``actors/process_worker.py``, and serves
its data plane from the host's one transport, ``actors/worker_relay.py``). To the Ray
controller it is one actor: one ``run``, one ``stats`` (the workers' snapshots merged
here, so the controller merges one snapshot per host, not one per worker), one liveness;
``resize`` adds or stops workers while it runs (a scale of the run's workers). A worker
that raises ends the host with its error (the controller replaces the host, as it would a
crashed worker).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from zeroforge.shared import metrics
from zeroforge.shared.service import Service

log = logging.getLogger(__name__)

WORKER_ROW = ("selfplay_games_total", "selfplay_positions_total")
"""The counters of a hosted worker's status row, after its index."""


class WorkerHost:
    """Workers ``first`` .. ``first + count - 1`` (built by ``make(index)``), run together;
    ``label``: the ``worker`` label their metrics carry in the host's snapshot;
    ``on_close``: called once ``run`` has ended and every worker with it (the host's
    shared transport is closed there, after its last user)."""

    def __init__(self, make: Callable[[int], Service], first: int, count: int,
                 label: str, on_close: Callable[[], None] | None = None) -> None:
        self._make = make
        self._on_close = on_close
        self._first = first
        self.label = label
        self._lock = threading.Lock()
        self._workers: dict[int, Service] = {}
        """Index -> the live workers (stopped ones move to ``_ended``)."""
        self._ended: list[dict] = []
        """Last snapshots of workers a resize stopped: their counters still count."""
        self._ended_ids: list[str] = []
        self._threads: dict[int, tuple[threading.Thread, threading.Event]] = {}
        self._errors: list[BaseException] = []
        self._running = False
        self._total = 0
        for index in range(first, first + count):
            self._workers[index] = make(index)

    @property
    def count(self) -> int:
        """Workers live now."""
        return len(self._workers)

    def run(self, stop: threading.Event) -> int:
        """Run every worker until ``stop`` (or one fails: its error is raised once the others
        have stopped and appended their games); returns the games appended."""
        try:
            with self._lock:
                self._running = True
                for index in self._workers:
                    self._start(index)
            while not stop.wait(0.5):
                if self._errors:
                    break
            with self._lock:
                self._running = False
                for _, event in self._threads.values():
                    event.set()
                threads = list(self._threads.values())
            for thread, _ in threads:
                thread.join()
        finally:
            self._close()
        if self._errors:
            raise self._errors[0]
        return self._total

    def _close(self) -> None:
        if self._on_close is None:
            return
        close, self._on_close = self._on_close, None
        try:
            close()
        except Exception as err:  # the workers' games are in; a failed close loses nothing
            log.warning("worker host %s: closing failed: %s", self.label, err)

    def _start(self, index: int) -> None:
        event = threading.Event()
        thread = threading.Thread(target=self._run_one, args=(index, event), daemon=True,
                                  name=f"worker-{index}")
        self._threads[index] = (thread, event)
        thread.start()

    def _run_one(self, index: int, event: threading.Event) -> None:
        worker = self._workers[index]
        try:
            appended = worker.run(event)
            self._total += int(appended or 0)
        except BaseException as err:  # ends the host (see run)
            log.error("worker %d failed: %s", index, err)
            self._errors.append(err)

    def resize(self, count: int) -> int:
        """Keep ``count`` workers: build and start new ones (next indexes) or stop the
        newest (each appends its finished games first). Returns the live count."""
        if count < 0:
            raise ValueError(f"a worker host's size must be >= 0, got {count}")
        with self._lock:
            while len(self._workers) < count:
                index = self._first + len(self._workers)
                while index in self._workers:
                    index += 1
                self._workers[index] = self._make(index)
                if self._running:
                    self._start(index)
            stopping = sorted(self._workers)[count:]
        for index in stopping:
            self._retire(index)
        return len(self._workers)

    def _retire(self, index: int) -> None:
        with self._lock:
            worker = self._workers[index]
            thread, event = self._threads.pop(index, (None, None))
        if event is not None:
            event.set()
        if thread is not None:
            thread.join()
        with self._lock:
            self._ended.append(worker.stats())
            self._ended_ids.extend(worker.game_ids())
            del self._workers[index]

    def stats(self) -> dict:
        """The workers' snapshots merged under the host's ``worker`` label (the ended ones'
        counters included), and under ``"workers"`` one ``[index, games, positions]`` row
        per live worker (``WORKER_ROW``)."""
        with self._lock:
            workers = sorted(self._workers.items())
            ended = list(self._ended)
        own = [(index, w.stats()) for index, w in workers]
        merged = metrics.merge(metrics.relabel(snap, worker=self.label)
                               for snap in [*ended, *(snap for _, snap in own)])
        out = metrics.as_snapshot(merged)
        out["workers"] = [[index, *(metrics.snapshot_total(snap, name) for name in WORKER_ROW)]
                          for index, snap in own]
        return out

    def game_ids(self) -> list[str]:
        with self._lock:
            workers = list(self._workers.values())
            ids = list(self._ended_ids)
        for worker in workers:
            ids.extend(worker.game_ids())
        return ids
