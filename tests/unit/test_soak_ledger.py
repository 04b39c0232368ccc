"""The soak's ledger from id sets (``benchmarks/soak.py``): lost, doubled and strangers
each found, and the id files read back as the sets written."""

from __future__ import annotations

import lzma
from pathlib import Path

from benchmarks.soak import ledger_by_sets, write_ids


def test_an_exact_ledger_has_nothing_lost_doubled_or_strange():
    ids = {"w0-1", "w0-2", "w1-1"}
    assert ledger_by_sets(ids, set(ids), 3) == {
        "appended": 3, "trained": 3, "lost": 0, "doubled": 0, "strangers": 0}


def test_a_lost_game_and_a_doubled_one_do_not_cancel_out():
    appended = {"w0-1", "w0-2", "w1-1"}
    trained = {"w0-1", "w1-1"}  # w0-2 lost ...
    # ... and one game counted twice: by count alone, 3 appended and 3 received agree
    got = ledger_by_sets(appended, trained, 3)
    assert got["lost"] == 1 and got["doubled"] == 1 and got["trained"] == 2


def test_a_trained_id_never_appended_is_a_stranger():
    got = ledger_by_sets({"a"}, {"a", "b"}, 2)
    assert got["strangers"] == 1 and got["lost"] == 0 and got["doubled"] == 0


def test_id_files_read_back_as_the_set_written(tmp_path: Path):
    ids = {f"worker-{w}-{n}" for w in range(3) for n in range(50)}
    path = tmp_path / "ids.txt.xz"
    write_ids(path, ids)
    with lzma.open(path, "rt") as f:
        lines = f.read().splitlines()
    assert lines == sorted(ids)
