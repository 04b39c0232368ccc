"""The checkpoint's fence (``learner.run_dir_fence``): the newest claim on a run directory
commits, an older one is refused and leaves the file as it was."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from zeroforge.learner.durable_file import Disk, write_durably
from zeroforge.learner.run_dir_fence import RunDirFence
from zeroforge.shared.transport import FencedError


def commit(fence: RunDirFence, path: Path, text: bytes) -> None:
    write_durably(path, lambda f: f.write(text), Disk(), fence.commit)


def test_an_older_claim_cannot_commit_over_a_newer_one(tmp_path):
    old, new = RunDirFence(tmp_path), RunDirFence(tmp_path)
    assert old.claim() == 1
    path = tmp_path / "checkpoint.pt"
    commit(old, path, b"old")
    assert new.claim() == 2
    with pytest.raises(FencedError, match="checkpoint commit refused: this learner holds "
                                          "epoch 1, a newer learner of the run took epoch 2"):
        commit(old, path, b"stale")
    assert path.read_bytes() == b"old" and not list(tmp_path.glob("*.tmp"))
    commit(new, path, b"new")
    assert path.read_bytes() == b"new"
    assert RunDirFence(tmp_path).claim() == 3  # the count goes on across incarnations


def test_a_claim_waits_for_a_commit_in_progress(tmp_path):
    """Claim and commit exclude each other (flock): a claim that comes while an old
    learner renames waits, and the new learner restores what the rename put there."""
    old = RunDirFence(tmp_path)
    old.claim()
    renaming = threading.Event()
    claimed: list[float] = []

    def claim_later() -> None:
        renaming.wait()
        RunDirFence(tmp_path).claim()
        claimed.append(time.monotonic())

    thread = threading.Thread(target=claim_later)
    thread.start()
    with old.commit():
        renaming.set()
        time.sleep(0.3)
        left = time.monotonic()
    thread.join(5)
    assert claimed and claimed[0] >= left


def test_a_file_system_without_locks_still_checks_the_epoch(tmp_path, monkeypatch, caplog):
    """NFS v3 without lockd: ``flock`` fails with ENOLCK; each learner's fence warns once
    and checks the epoch without the lock."""
    import errno
    import fcntl

    def no_lock(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_lock)
    old, new = RunDirFence(tmp_path), RunDirFence(tmp_path)
    old.claim()
    path = tmp_path / "checkpoint.pt"
    commit(old, path, b"old")
    new.claim()
    with pytest.raises(FencedError):
        commit(old, path, b"stale")
    assert path.read_bytes() == b"old"
    assert [r.getMessage() for r in caplog.records].count(
        f"the run directory {tmp_path} cannot be locked (No locks available): the "
        "checkpoint's fence checks its epoch without a lock") == 2  # one per learner
