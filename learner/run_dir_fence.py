"""The checkpoint's fence: a learner that a newer one has replaced never commits one.

The Redis side of fencing (``shared.transport.fencing``) refuses an old learner's acks,
publishes and pace; the checkpoint is a file, so it gets a fence of its own. Each learner
incarnation *claims* the run directory when it starts, before it restores anything: under
an exclusive ``flock`` of ``RUN_DIR/learner.lock`` it raises the counter in
``RUN_DIR/learner.epoch`` by one and takes that as its epoch. Its checkpoint is renamed into
place only under the same lock and only while the counter is still its own; otherwise the
commit raises ``FencedError`` and the checkpoint on disk stays the newer learner's.

Either the old learner's rename happens before the new one's claim (and the new learner
restores that checkpoint), or after it (and is refused): never a stale checkpoint over a
newer one. ``flock`` holds on a local disk and on shared storage that implements it (NFS
v4, CephFS); the run directory must be on one of them when learners move between nodes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from zeroforge.shared.transport import FencedError

log = logging.getLogger(__name__)

LOCK_NAME = "learner.lock"
EPOCH_NAME = "learner.epoch"
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS)
"""``flock`` errors of a file system that has no locks."""


class RunDirFence:
    """One learner incarnation's claim on ``run_dir`` (see the module docstring)."""

    def __init__(self, run_dir: str | os.PathLike) -> None:
        self.run_dir = Path(run_dir)
        self.epoch = 0
        """This learner's epoch in the run directory (0 until ``claim``)."""
        self._warned = False

    def claim(self) -> int:
        """Take the next epoch of the run directory; returns it."""
        with self._locked():
            self.epoch = self._stored() + 1
            tmp = self.run_dir / (EPOCH_NAME + ".tmp")
            with open(tmp, "w", encoding="ascii") as f:
                f.write(f"{self.epoch}\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.run_dir / EPOCH_NAME)
        return self.epoch

    @contextlib.contextmanager
    def commit(self) -> Iterator[None]:
        """Hold the directory while a checkpoint is renamed into place: ``FencedError``
        (nothing done) if a newer learner has claimed it since."""
        with self._locked():
            stored = self._stored()
            if stored != self.epoch:
                raise FencedError("checkpoint commit", self.epoch, stored)
            yield

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError as err:
                if err.errno not in _NO_LOCKS:
                    raise
                # a file system without locks (an NFS v3 volume without lockd): the
                # epoch check still refuses a learner that was replaced before it got here
                if not self._warned:
                    self._warned = True
                    log.warning("the run directory %s cannot be locked (%s): the "
                                "checkpoint's fence checks its epoch without a lock",
                                self.run_dir, err.strerror)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _stored(self) -> int:
        try:
            text = (self.run_dir / EPOCH_NAME).read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return 0
        return int(text) if text.isdigit() else 0
