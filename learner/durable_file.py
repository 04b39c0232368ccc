"""Files that are on disk, name and data, before anything that depends on them happens.

The learner acknowledges stream entries only after the checkpoint that holds them is
written. "Written" must mean durable: the data fsynced *and* the rename that puts it in
place fsynced through its directory. Without the directory's fsync, a power loss within
the file system's commit window can bring the old name back (the previous checkpoint)
while the acks, already in Redis, stay: the games between the two cursors would be lost
without a trace.

``Disk`` is the seam of those calls, so that a test can record their order against the
acks (``tests/unit/test_durable_checkpoint.py`` replays them through a model of a file
system that keeps only what was fsynced).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO


class Disk:
    """The file-system calls a durable write is made of."""

    def write_synced(self, path: Path, write: Callable[[BinaryIO], None]) -> None:
        """A new file at ``path`` holding what ``write`` writes, its data fsynced."""
        with open(path, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())

    def replace(self, src: Path, dst: Path) -> None:
        """Rename ``src`` over ``dst`` (atomic; durable only once its directory is synced)."""
        os.replace(src, dst)

    def sync_dir(self, directory: Path) -> None:
        """fsync ``directory``: the names created or replaced in it are on disk."""
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_durably(path: Path, write: Callable[[BinaryIO], None], disk: Disk,
                  guard: Callable[[], AbstractContextManager[None]] | None = None) -> None:
    """Replace ``path`` with what ``write`` writes, atomically and durably: a temp file
    beside it (``<name>.<pid>-<random>.tmp``), fsynced, renamed over it, the directory
    fsynced. A failure (a full or read-only disk, or ``guard`` refusing) leaves ``path`` as
    it was and no temp file. ``guard``: held around the rename (the run directory's fence)."""
    # a name of its own: a learner fenced off but still writing must not write into the
    # temp file its successor is about to rename into place
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{secrets.token_hex(3)}.tmp")
    try:
        disk.write_synced(tmp, write)
        with guard() if guard is not None else contextlib.nullcontext():
            disk.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    disk.sync_dir(path.parent)
