"""One hosted self-play worker in a child process of its own (``distributed.host_workers``).

A ``WorkerHost`` runs its K workers in threads of one process: right for workers that
mostly wait (on inference servers, or the load simulator's replaying ones), wrong for
workers that search on the CPU with their own net, whose Python-heavy tree search holds
the GIL, so K threads get about one core between them. A ``ProcessWorker`` is the same
``Service`` to its host (``run(stop)`` returns the games appended, ``stats`` and
``game_ids`` answer at once), but the worker runs in a child process, started with
multiprocessing's ``spawn`` (a fork of a Ray actor's process, with its threads, gRPC
channels and torch's state, is not safe; spawn starts a fresh interpreter).

What crosses the boundary is plain data only, as everywhere a process boundary is crossed
here (``shared.config``): the child gets a ``"module:function"`` name (its builder), a dict
of plain arguments (a config as ``cfg.to_dict``, a ``RunContext.to_dict``...) and the
worker's index, imports the builder and builds its worker there. It reports back over a
pipe, every ``report_s`` and once at its end, its metrics snapshot (``Recorder.snapshot``:
dicts and lists of numbers) and the ids of the games it appended since its last report;
the parent keeps the last report, so ``stats`` needs no round trip to the child.

Its data plane: given ``serve`` (the host's ``HostEndpoints``), the parent opens a second
pipe, the relay, and serves it in a thread while the child runs; the builder gets the
child's end (``relay=``) and builds the worker over ``RelayTransport`` proxies, so the
child opens no Redis connection and the host's one transport serves all its workers
(``actors/worker_relay.py``). Without ``serve`` the builder opens a transport of its own.

Ends:

- stop: the parent sends ``stop`` down the same (duplex) pipe; the child stops its worker
  the way a thread worker is stopped (it appends its finished games first), sends its
  final report and exits; ``run`` returns the child's count. Not a multiprocessing
  ``Event``: a child killed while it waits on one leaves the ``Event``'s condition
  counting a sleeper that never wakes, and the parent's next ``set`` blocks forever.
- the child dies (killed, or its worker raises): ``run`` raises ``WorkerProcessError``, one
  line naming the worker index and the exit code or the child's error line, and the host
  fails as it does for a thread worker that raises.
- the parent dies (a Ray actor killed with SIGKILL): the child sees its pipe's end (or
  its parent change, ``os.getppid``) within ``report_s``, stops its worker cleanly and
  exits, so no worker outlives its host. A relayed worker's appends went through the
  host, so they can only fail now: after ``ORPHAN_S`` the child exits without waiting
  for its worker's retries.
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Protocol

from zeroforge.shared.service import Service

if TYPE_CHECKING:
    from zeroforge.actors.worker_relay import HostEndpoints

log = logging.getLogger(__name__)

REPORT_S = 0.5
"""Seconds between two reports of a child (its stats and new game ids)."""
STOP_GRACE_S = 120.0
"""How long a stopped child may take to stop its worker (its last move, its final append,
which a worker retries for up to ``STOP_APPEND_GRACE_S`` while Redis restarts) before the
parent kills it and ``run`` raises."""
JOIN_S = 10.0
"""How long the parent waits for a child's exit after its final report (or its pipe's
end) before it kills it."""
ORPHAN_S = 5.0
"""How long an orphaned child (its parent gone) whose worker reaches the run through its
host waits for its worker to end before it exits without it."""
IDS_KEPT = 100_000
"""Game ids the parent keeps (newest), as a thread worker keeps its own."""
EMPTY_STATS: dict = {"values": {}, "hists": {}}
"""The snapshot of a worker that has not reported yet."""

Builder = Callable[[Mapping[str, Any], int], Service]
"""What a ``"module:function"`` names: (plain args, worker index) -> the worker."""


class RelayedBuilder(Protocol):
    """What a ``"module:function"`` names for a served worker (``ProcessWorker(serve=)``):
    a ``Builder`` that also takes the child's end of the relay pipe."""

    def __call__(self, args: Mapping[str, Any], index: int, *,
                 relay: Connection) -> Service: ...


class WorkerProcessError(RuntimeError):
    """A hosted worker's process failed or died; the message is one line."""


def _plain(value: Any, where: str) -> None:
    """Raise ``TypeError`` unless ``value`` is plain data (dicts with str keys, lists,
    tuples, str, int, float, bool, None): nothing of ours is pickled into the child."""
    if value is None or isinstance(value, str | int | float | bool):
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _plain(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: key {key!r} is not a str")
            _plain(item, f"{where}.{key}")
        return
    raise TypeError(f"{where}: a {type(value).__name__} is not plain data (send dicts, "
                    "lists, str and numbers to a worker's process)")


def _one_line(err: BaseException) -> str:
    """``Type: message`` on one line."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _exit_text(code: int | None) -> str:
    """An exit code as words: ``exit code -9 (SIGKILL)``."""
    if code is not None and code < 0:
        try:
            return f"exit code {code} ({signal.Signals(-code).name})"
        except ValueError:
            pass
    return f"exit code {code}"


class ProcessWorker:
    """Worker ``index`` built in a child process by ``build`` (``"module:function"``, a
    ``Builder``) from ``args`` (plain data); a ``Service`` to its host. With ``serve``
    (the host's shared endpoints) ``build`` is a ``RelayedBuilder`` and the worker's data
    plane goes through the host (module docstring)."""

    def __init__(self, build: str, args: Mapping[str, Any], index: int, *,
                 serve: HostEndpoints | None = None, report_s: float = REPORT_S,
                 stop_grace_s: float = STOP_GRACE_S) -> None:
        module, _, function = build.partition(":")
        if not module or not function:
            raise ValueError(f"ProcessWorker: build must be 'module:function', got {build!r}")
        _plain(dict(args), "ProcessWorker args")
        self.build = build
        self.args = dict(args)
        self.index = index
        self.serve = serve
        self.report_s = report_s
        self.stop_grace_s = stop_grace_s
        self.pid: int | None = None
        """The child's process id once ``run`` started it (tests kill it)."""
        self._lock = threading.Lock()
        self._stats: dict = EMPTY_STATS
        self._ids: collections.deque[str] = collections.deque(maxlen=IDS_KEPT)
        self._started = False

    def run(self, stop: threading.Event) -> int:
        """Start the child, relay ``stop`` to it and take its reports until its final one;
        returns the games it appended. Raises ``WorkerProcessError`` if it fails, dies or
        does not stop within ``stop_grace_s``."""
        with self._lock:
            if self._started:
                raise RuntimeError(f"hosted worker {self.index}: run was called twice")
            self._started = True
        spawn = multiprocessing.get_context("spawn")
        conn, child_end = spawn.Pipe(duplex=True)
        relay, relay_end = spawn.Pipe(duplex=True) if self.serve is not None else (None, None)
        process = spawn.Process(
            target=child_main, name=f"zeroforge-w{self.index}", daemon=True,
            args=(self.build, self.args, self.index, child_end, os.getpid(), self.report_s,
                  relay_end))
        process.start()
        child_end.close()  # the child holds the only other end: its death is the pipe's end
        self.pid = process.pid
        served = threading.Event()
        serving = self._serve(relay, relay_end, served)
        deadline: float | None = None
        ended = overdue = False
        try:
            while True:
                if stop.is_set() and deadline is None:
                    _send(conn, {"kind": "stop"})
                    deadline = time.monotonic() + self.stop_grace_s
                if not conn.poll(0.2):
                    if deadline is not None and time.monotonic() > deadline:
                        overdue = True
                        raise WorkerProcessError(
                            f"hosted worker {self.index} (pid {process.pid}) did not stop "
                            f"within {self.stop_grace_s:g} s; killed")
                    continue
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    ended = True
                    process.join(JOIN_S)
                    raise WorkerProcessError(
                        f"hosted worker {self.index} (pid {process.pid}) died: "
                        f"{_exit_text(process.exitcode)}") from None
                self._take(message)
                ended = message["kind"] in ("done", "failed")
                if message["kind"] == "done":
                    return int(message["appended"])
                if message["kind"] == "failed":
                    process.join(JOIN_S)
                    raise WorkerProcessError(
                        f"hosted worker {self.index} failed in its process "
                        f"(pid {process.pid}, {_exit_text(process.exitcode)}): "
                        f"{message['error']}")
        finally:
            if not ended and not overdue:  # we failed (an interrupt): stop it cleanly first
                _send(conn, {"kind": "stop"})
                process.join(self.stop_grace_s)
            process.join(0 if overdue else JOIN_S)
            if process.is_alive():
                process.kill()
                process.join()
            conn.close()
            served.set()
            if serving is not None:  # it ends at the relay's end: the child's exit
                serving.join(JOIN_S)  # (a call still in the host's hands: it closes later)

    def _serve(self, relay: Connection | None, relay_end: Connection | None,
               served: threading.Event) -> threading.Thread | None:
        """Start the thread that answers the child's relay (None without ``serve``)."""
        if self.serve is None or relay is None or relay_end is None:
            return None
        from zeroforge.actors.worker_relay import serve

        relay_end.close()  # as with the report pipe: the child's exit ends the relay
        thread = threading.Thread(target=serve, args=(relay, self.serve, served),
                                  name=f"relay-{self.index}", daemon=True)
        thread.start()
        return thread

    def _take(self, message: Mapping[str, Any]) -> None:
        with self._lock:
            self._stats = message["stats"]
            self._ids.extend(message["ids"])

    def stats(self) -> dict:
        """The worker's snapshot as of the child's last report."""
        with self._lock:
            return self._stats

    def game_ids(self) -> list[str]:
        """Ids of the games the child reported appended (newest ``IDS_KEPT``)."""
        with self._lock:
            return list(self._ids)


# ------------------------------------------------------------------------------------------
# the child
# ------------------------------------------------------------------------------------------

class _NewIds:
    """The ids a worker appended since the last call: a worker keeps its newest ones in a
    bounded deque, so the last id sent marks where the new ones begin."""

    def __init__(self, service: Service) -> None:
        self._service = service
        self._last: str | None = None

    def __call__(self) -> list[str]:
        ids = self._service.game_ids()
        start = 0
        if self._last is not None:
            for i in range(len(ids) - 1, -1, -1):
                if ids[i] == self._last:
                    start = i + 1
                    break
        new = ids[start:]
        if new:
            self._last = new[-1]
        return new


def _send(conn: Connection, message: dict) -> bool:
    """Send one message; False when the other side is gone (its end of the pipe closed)."""
    try:
        conn.send(message)
        return True
    except (BrokenPipeError, ConnectionError, OSError):
        return False


def _told_to_stop(conn: Connection, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for the parent's ``stop``; True on it, or on the pipe's end
    (the parent is gone)."""
    if not conn.poll(timeout_s):
        return False
    with contextlib.suppress(EOFError, OSError):
        conn.recv()  # the parent sends nothing but its stop
    return True


def child_main(build: str, args: dict, index: int, conn: Connection, parent_pid: int,
               report_s: float, relay: Connection | None = None) -> None:
    """The child process: build the worker (``relay``: the relay pipe's end, handed to the
    builder), run it in a thread, report every ``report_s`` and at the end; stop it on the
    parent's ``stop``, on SIGTERM, or when the parent is gone. Exits 1 after a failure
    (its one line sent first)."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format=f"%(asctime)s w{index}[%(process)d] %(name)s %(levelname)s "
                               f"%(message)s")
    stopping = threading.Event()
    # a terminal's Ctrl-C reaches the whole process group: the parent decides the stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # multiprocessing ends daemonic children with SIGTERM at the parent's exit: stop cleanly
    # (a flag the loop reads: the handler must not take the lock of the Event it would set)
    terminated: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _: terminated.append(signum))
    try:
        module, _, function = build.partition(":")
        found = getattr(importlib.import_module(module), function)
        if relay is None:
            plain: Builder = found
            service = plain(args, index)
        else:
            relayed: RelayedBuilder = found
            service = relayed(args, index, relay=relay)
    except BaseException as err:
        log.exception("hosted worker %d could not be built", index)
        _send(conn, {"kind": "failed", "error": _one_line(err), "stats": EMPTY_STATS,
                     "ids": []})
        conn.close()
        sys.exit(1)
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["appended"] = int(service.run(stopping) or 0)
        except BaseException as err:  # sent to the parent as its one line
            log.exception("hosted worker %d failed", index)
            outcome["error"] = _one_line(err)

    thread = threading.Thread(target=work, name=f"worker-{index}", daemon=True)
    thread.start()
    new_ids = _NewIds(service)
    orphaned: float | None = None
    while thread.is_alive():
        if stopping.is_set():
            thread.join(report_s)
        elif (_told_to_stop(conn, report_s) or terminated
              or os.getppid() != parent_pid):
            stopping.set()
        if not _send(conn, {"kind": "report", "stats": service.stats(), "ids": new_ids()}):
            stopping.set()  # the parent is gone: stop, appending the finished games
            orphaned = orphaned or time.monotonic()
        if relay is not None and orphaned and time.monotonic() - orphaned > ORPHAN_S:
            # its appends went through the host: they can only fail now
            log.warning("hosted worker %d: its host is gone; exiting without its "
                        "unappended games", index)
            sys.exit(1)
    thread.join()
    final = {"stats": service.stats(), "ids": new_ids()}
    if "error" in outcome:
        _send(conn, {"kind": "failed", "error": outcome["error"], **final})
    else:
        _send(conn, {"kind": "done", "appended": outcome["appended"], **final})
    conn.close()
    if "error" in outcome:
        sys.exit(1)
