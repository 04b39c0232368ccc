"""Weights fetched once per node: a publish crosses the network once per node, not once
per worker.

Every self-play worker that runs its own net fetches each published version. Straight
from Redis that costs the run's Redis ``workers x blob`` bytes a publish (1,000 workers x a
90 MB ``resnet20x256`` blob is 90 GB). ``NodeCachedWeights`` wraps the run's weight
store: the first worker of a node to want a version fetches it from Redis (verified
against its sha256, as always) and writes it into the node's cache directory; the node's
other workers read that file. Each worker still asks Redis for the newest version and its
recorded sha256 (a few hundred bytes), and checks the file against it, so a stale,
truncated or tampered file is never applied: it is dropped and fetched again. With a
verifier on the store, that record's signature is checked first (``WeightStore.signed_info``):
a version the learner did not sign is refused before any file or blob is trusted.

Why files, and not Ray's object store: a file in the node's shared memory (``/dev/shm``)
is one copy per node, read at memory speed, and needs nothing but the filesystem, so the
cache works the same under Ray, KubeRay or bare processes, and a worker reads it without
any actor being alive (docs/architecture.md, "Weights once per node").

A node whose cache fails (directory not writable, disk full, a lock held too long) makes
its workers fetch straight from Redis: counted in ``fallbacks`` and logged once.

Each user holds a shared lock on the directory's ``.users`` file while it is open; the last
one to ``close`` removes the directory (a crashed process's lock goes with it, so the
next clean close cleans up after it too).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from zeroforge.shared.formats import StateDict
from zeroforge.shared.transport.weight_store import (
    WeightsIntegrityError,
    WeightStore,
    WeightSubscription,
    decoded_blob,
    verified_blob,
)

log = logging.getLogger(__name__)

LOCK_WAIT_S = 60.0
"""How long a worker waits for the node's fetch of a version by another worker before it
fetches for itself (a 90 MB blob over a slow link takes seconds, not minutes)."""
KEEP_FILES = 2
"""Versions kept in the cache directory: the newest and the one before (a worker may still
be reading it)."""


def default_cache_root() -> Path:
    """Shared memory where the system has it (``/dev/shm``), else the temp directory."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(
        os.environ.get("TMPDIR", "/tmp"))


class NodeCachedWeights:
    """A ``WeightSink`` over ``store`` whose ``fetch`` goes through the node's cache in
    ``cache_dir`` (created if missing; one directory per node and run)."""

    def __init__(self, store: WeightStore, cache_dir: str | Path,
                 lock_wait_s: float = LOCK_WAIT_S) -> None:
        self.store = store
        self.cache_dir = Path(cache_dir)
        self.lock_wait_s = lock_wait_s
        self.from_cache = 0
        """Fetches served from the node's file."""
        self.from_redis = 0
        """Fetches that read the blob from Redis (into the cache, or past it)."""
        self.fallbacks = 0
        """Fetches that went straight to Redis because the cache failed."""
        self._warned = False
        self._users: Any = None
        """The open ``.users`` file whose shared lock says this process uses the cache."""

    # --- the sink's side, unchanged --------------------------------------------------------
    def publish(self, weights: Any, version: int) -> str:
        return self.store.publish(weights, version)

    def subscribe(self) -> WeightSubscription:
        return self.store.subscribe()

    def latest_version(self) -> int | None:
        return self.store.latest_version()

    def fetch_counts(self) -> dict[str, int]:
        return {"node_cache": self.from_cache, "redis": self.from_redis - self.fallbacks,
                "redis_fallback": self.fallbacks}

    # --- cached reads ----------------------------------------------------------------------
    def fetch(self, newer_than: int = -1) -> tuple[int, StateDict] | None:
        """``(version, state_dict)`` of the latest version if it is > ``newer_than``; the
        blob from the node's cache when a worker of the node fetched it already."""
        got = self.fetch_bytes(newer_than)
        return None if got is None else (got[0], decoded_blob(got[0], got[1],
                                                               self.store.run_id))

    def fetch_bytes(self, newer_than: int = -1) -> tuple[int, bytes] | None:
        """Like ``fetch`` but the verified blob undecoded."""
        latest = self.store.latest_version()
        if latest is None or latest <= newer_than:
            return None
        info = self.store.signed_info(latest)  # WeightsSignatureError: not the learner's
        if info is None:  # pruned since: fetch whatever is newest now
            return self._direct(newer_than)
        path = self.cache_dir / f"{latest}.blob"
        try:
            self._join()
            blob = self._read(path)
            if blob is None:
                with self._lock():
                    blob = self._read(path)  # another worker may have written it meanwhile
                    if blob is None:
                        got = self.store.fetch_bytes(newer_than)
                        self.from_redis += 1
                        if got is None:
                            return None
                        # the version asked for, or a newer one that raced it (verified
                        # all the same): either way the node's next readers find it
                        self._write(self.cache_dir / f"{got[0]}.blob", got[1])
                        self._prune(got[0])
                        return got
            self.from_cache += 1
            try:
                return latest, verified_blob(latest, blob, info, self.store.run_id)
            except WeightsIntegrityError:
                log.warning("weights cache %s: version %d does not match its sha256; "
                            "dropped and fetched again", self.cache_dir, latest)
                path.unlink(missing_ok=True)
                return self._direct(newer_than)
        except (OSError, TimeoutError) as err:
            self.fallbacks += 1
            if not self._warned:
                self._warned = True
                log.warning("weights cache %s failed (%s); fetching from Redis directly",
                            self.cache_dir, err)
            return self._direct(newer_than)

    def _direct(self, newer_than: int) -> tuple[int, bytes] | None:
        self.from_redis += 1
        return self.store.fetch_bytes(newer_than)

    @staticmethod
    def _read(path: Path) -> bytes | None:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None

    def _write(self, path: Path, blob: bytes) -> None:
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temp.write_bytes(blob)
        os.replace(temp, path)  # readers see the whole file or none

    def _prune(self, newest: int) -> None:
        for old in self.cache_dir.glob("*.blob"):
            with contextlib.suppress(ValueError, OSError):
                if int(old.stem) <= newest - KEEP_FILES:
                    old.unlink()  # a reader that has it open keeps reading it

    def close(self) -> None:
        """Stop using the cache; the node's last user removes its directory."""
        if self._users is None:
            return
        users, self._users = self._users, None
        with contextlib.suppress(OSError):
            fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)  # no other user holds it
            shutil.rmtree(self.cache_dir, ignore_errors=True)
        users.close()

    def _join(self) -> None:
        if self._users is None:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            users = open(self.cache_dir / ".users", "a+b")  # noqa: SIM115 - held until close
            fcntl.flock(users, fcntl.LOCK_SH)
            self._users = users

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """The node's fetch lock (one fetch from Redis per node and version). Threads of
        one process (a host of many workers) first queue on a lock of the process, so at
        most one of them polls the file lock: 500 threads polling it every 10 ms once
        starved the holder of the interpreter for over a minute."""
        self._join()
        deadline = time.monotonic() + self.lock_wait_s
        local = _process_lock(self.cache_dir)
        if not local.acquire(timeout=self.lock_wait_s):
            raise TimeoutError(f"lock held over {self.lock_wait_s:.0f} s (in this process)")
        try:
            with open(self.cache_dir / ".lock", "a+b") as handle:
                pause = 0.01
                while True:
                    try:
                        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() >= deadline:
                            raise TimeoutError(
                                f"lock held over {self.lock_wait_s:.0f} s") from None
                        time.sleep(pause)
                        pause = min(pause * 2, 0.2)
                try:
                    yield
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        finally:
            local.release()


_PROCESS_LOCKS: dict[str, threading.Lock] = {}
_PROCESS_LOCKS_GUARD = threading.Lock()


def _process_lock(cache_dir: Path) -> threading.Lock:
    """This process's lock for one cache directory (shared by its workers' threads)."""
    with _PROCESS_LOCKS_GUARD:
        return _PROCESS_LOCKS.setdefault(str(cache_dir), threading.Lock())


def node_cache_dir(root: str | Path, run_id: str, node: str) -> Path:
    """The cache directory of ``run_id`` on node ``node`` under ``root``."""
    return Path(root) / "zeroforge-weights" / run_id / node

