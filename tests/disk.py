"""A run directory on a disk of its own that a test can fill up or make read-only: a small
tmpfs mounted over the directory (root only, as CI runs; as root ``chmod`` cannot stop a
write, so a read-only mount is the one way to refuse it)."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

FILLER = ".filler"
"""The file that takes up the disk's free space (``SmallDisk.fill``)."""


class SmallDisk:
    """A mounted tmpfs at ``path``; ``fill``/``free`` and ``read_only``/``writable``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def fill(self, leave: int = 0) -> None:
        """Take the free space but ``leave`` bytes (a write of more gets ENOSPC); with
        ``leave=0`` every last page. The run writes meanwhile, so a piece that no longer
        fits is halved until it does, and the space is measured again after each piece.
        The filler grows at its end, so calling this again takes what the run has freed
        since: a checkpoint renamed over the old one frees the old one's pages, so a fill
        measured while both existed leaves room for the next (a test that needs the disk
        to stay full calls ``fill`` again while it waits)."""
        fd = os.open(self.path / FILLER, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while (piece := self.free_bytes() - leave) >= 4096:
                end = os.fstat(fd).st_size
                while piece >= 4096:
                    try:
                        os.posix_fallocate(fd, end, piece)
                        break
                    except OSError as err:
                        if err.errno != errno.ENOSPC:
                            raise
                        piece //= 2
                else:
                    return  # not a page fits any more
        finally:
            os.close(fd)

    def free(self) -> None:
        (self.path / FILLER).unlink(missing_ok=True)

    def read_only(self, timeout: float = 10.0) -> None:
        """Remount read-only; a file open for writing at that moment makes the kernel say
        "busy", so try again until the run's writers are between two writes."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return _run("mount", "-o", "remount,ro", str(self.path))
            except RuntimeError as err:
                if "busy" not in str(err) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def writable(self) -> None:
        _run("mount", "-o", "remount,rw", str(self.path))


def _run(*argv: str) -> None:
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")


@contextlib.contextmanager
def small_disk(path: Path, size_mb: int) -> Iterator[SmallDisk]:
    """A fresh ``size_mb`` MiB tmpfs mounted at ``path`` (created), unmounted after."""
    if os.geteuid() != 0:
        pytest.fail("a full or read-only run directory needs root to mount a tmpfs "
                    "(.ci/run has it)")
    path.mkdir(parents=True, exist_ok=True)
    _run("mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(path))
    try:
        yield SmallDisk(path)
    finally:
        # lazily: a process of the run may still hold a file open; the mount goes with it
        _run("umount", "-l", str(path))
