"""The test disk the run-directory fault tests fill up (tests/disk.py): a fill leaves only
what it was asked to, and filling again takes what was freed since."""

from __future__ import annotations

import errno

import pytest

from tests.disk import FILLER, small_disk


def test_fill_leaves_what_it_is_asked_and_takes_again_what_was_freed_since(tmp_path):
    with small_disk(tmp_path / "disk", 4) as disk:
        old = disk.path / "checkpoint.pt"
        old.write_bytes(b"x" * (1 << 20))
        disk.fill(leave=4096)
        assert disk.free_bytes() <= 2 * 4096
        filled = (disk.path / FILLER).stat().st_size
        old.unlink()  # as a checkpoint renamed over its predecessor frees its pages
        assert disk.free_bytes() >= 1 << 20
        disk.fill(leave=4096)
        assert disk.free_bytes() <= 2 * 4096
        assert (disk.path / FILLER).stat().st_size >= filled + (1 << 20) - 2 * 4096
        with pytest.raises(OSError) as err:
            (disk.path / "next.pt").write_bytes(b"y" * (64 << 10))
        assert err.value.errno == errno.ENOSPC
        disk.free()
        (disk.path / "next.pt").write_bytes(b"y" * (64 << 10))


def test_fill_without_leave_takes_every_page(tmp_path):
    with small_disk(tmp_path / "disk", 4) as disk:
        disk.fill()
        assert disk.free_bytes() < 4096
