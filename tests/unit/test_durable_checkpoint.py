"""The checkpoint is on disk, data and name, before the first ack that depends on it.

A learner's file-system calls (``learner.durable_file.Disk``) go to the real disk and
through a model of a file system after a power loss: a file's data survives once fsynced,
a rename once its directory is fsynced, nothing else. At every ack the checkpoint that a
power loss would leave must be the one just written, which holds the acked games."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import pytest

from tests.unit.memory_learner import memory_learner
from tests.unit.test_sample_fuzz import real_games
from zeroforge.learner.durable_file import Disk
from zeroforge.shared.samples import encode
from zeroforge.shared.transport import MemoryTransport


def tmp_name(path: Path) -> str:
    """``path``'s name, its temp files' ``<pid>-<random>`` shown as ``*``."""
    parts = path.name.split(".")
    return ".".join([*parts[:-2], "*", "tmp"]) if parts[-1] == "tmp" else path.name


class PowerLossModel(Disk):
    """The real calls, and what a power loss right now would leave of them."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self.named: dict[Path, int] = {}
        """Name -> id of the file's contents, as the running system sees it."""
        self.durable: dict[Path, int] = {}
        """Name -> contents id, as the disk would have it after a power loss."""
        self.synced: set[int] = set()
        """Contents whose data is on disk."""
        self.calls: list[str] = []

    def write_synced(self, path: Path, write: Callable[[BinaryIO], None]) -> None:
        super().write_synced(path, write)
        contents = next(self._ids)
        self.named[path] = contents
        self.synced.add(contents)
        self.calls.append(f"write {tmp_name(path)}")

    def replace(self, src: Path, dst: Path) -> None:
        super().replace(src, dst)
        self.named[dst] = self.named.pop(src)
        self.calls.append(f"replace {tmp_name(src)} {dst.name}")

    def sync_dir(self, directory: Path) -> None:
        super().sync_dir(directory)
        self.durable = {p: c for p, c in self.durable.items() if p.parent != directory}
        self.durable.update({p: c for p, c in self.named.items() if p.parent == directory})
        self.calls.append(f"sync {directory.name}")

    def after_power_loss(self, path: Path) -> int | None:
        """The contents a power loss now would leave at ``path`` (None: none whole)."""
        contents = self.durable.get(path)
        return contents if contents in self.synced else None


class DirectorySyncLost(PowerLossModel):
    """A disk on which the directory's fsync does not happen (as before this check)."""

    def sync_dir(self, directory: Path) -> None:
        self.calls.append(f"sync {directory.name} (lost)")


def train_and_ack(tmp_path: Path, disk: PowerLossModel) -> list[str]:
    """A learner over an in-memory stream, checkpointing each turn, fed real games in four
    turns; at each ack the checkpoint a power loss would leave must be the last written.
    Returns the calls and acks in order."""
    transport = MemoryTransport("durable")
    service = memory_learner(tmp_path, transport, checkpoint_every_s=0.0)
    service.learner.disk = disk
    stream_ack = service.stream.ack

    def ack(ids: list[str]) -> int:
        written = disk.named.get(service.checkpoint_path)
        assert written is not None, "an ack before any checkpoint was written"
        assert disk.after_power_loss(service.checkpoint_path) == written, (
            f"ack of {ids} while a power loss would leave checkpoint contents "
            f"{disk.after_power_loss(service.checkpoint_path)}, not {written}: {disk.calls}")
        disk.calls.append(f"ack {len(ids)}")
        return stream_ack(ids)

    service.stream.ack = ack  # type: ignore[method-assign]
    games = real_games(12)
    for turn in range(4):
        transport.samples().append_raw([encode(g) for g in games[3 * turn:3 * turn + 3]])
        service.run_once(max_read=64, block_ms=0)
    assert service.games_received == 12
    assert transport.samples().info().lag == 0
    service.close()
    return disk.calls


def test_every_ack_follows_a_checkpoint_on_disk_name_and_data(tmp_path):
    calls = train_and_ack(tmp_path, PowerLossModel())
    acks = [i for i, call in enumerate(calls) if call.startswith("ack")]
    assert len(acks) >= 4, calls  # one per turn at least
    for i in acks:  # each after the write, rename and directory sync of a checkpoint
        before = [c for c in calls[:i] if not c.startswith("ack")][-3:]
        assert before == ["write checkpoint.pt.*.tmp", "replace checkpoint.pt.*.tmp checkpoint.pt",
                          f"sync {tmp_path.name}"], calls


def test_without_the_directory_sync_the_check_fails(tmp_path):
    """The check above can fail: with the directory's fsync lost, the first ack comes while
    a power loss would leave no checkpoint, or the previous one."""
    with pytest.raises(AssertionError, match="while a power loss would leave"):
        train_and_ack(tmp_path, DirectorySyncLost())
