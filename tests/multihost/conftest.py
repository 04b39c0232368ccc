"""The multi-host test bed (``tests/netbed``): one bed per test module, rebuilt when a
test left it unusable; a run per test, always ended."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.multihost.bed_run import BedRun
from tests.netbed import Bed, BedConfig, namespaces


def _check_machine() -> None:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.fail("the multi-host bed needs root and iproute2 (.ci/run has both)")


class Beds:
    """The module's bed, built on first use and rebuilt after a test that broke it."""

    def __init__(self, config: BedConfig) -> None:
        self.config = config
        self.bed: Bed | None = None

    def get(self) -> Bed:
        if self.bed is None:
            self.bed = Bed(self.config).up()
        return self.bed

    def discard(self) -> None:
        if self.bed is not None:
            self.bed.down()
            self.bed = None


@pytest.fixture(scope="module")
def beds() -> Iterator[Beds]:
    yield from hold_beds(BedConfig(worker_slots=3))


def hold_beds(config: BedConfig) -> Iterator[Beds]:
    """A module's beds of ``config`` (a module that needs another bed overrides ``beds``
    with this), checked gone at the end."""
    _check_machine()
    holder = Beds(config)
    try:
        yield holder
    finally:
        prefix = holder.bed.prefix if holder.bed else None
        holder.discard()
        if prefix:
            assert namespaces(prefix) == [], "bed namespaces left behind"


@pytest.fixture
def bed(beds: Beds) -> Bed:
    return beds.get()


@pytest.fixture
def start_run(beds: Beds, tmp_path: Path) -> Iterator:
    """``start_run(*settings, redis_url=None, resume=None)`` -> a BedRun; ended after the
    test (a run whose driver had to be killed may leave actors: the bed is rebuilt)."""
    runs: list[BedRun] = []

    def start(*settings: str, redis_url: str | None = None, resume: BedRun | None = None,
              shards: tuple[tuple[int, int], ...] = ()) -> BedRun:
        """A fresh run, or (``resume``) that run again with ``--resume``; ``shards``: the
        stream shards to audit (``BedRun``)."""
        run_id = resume.run_id if resume else f"mh-{uuid.uuid4().hex[:10]}"
        run_dir = resume.run_dir if resume else tmp_path / run_id
        run = BedRun(beds.get(), run_dir, run_id, *settings, redis_url=redis_url,
                     args=("--resume",) if resume else (), shards=shards)
        runs.append(run)
        return run

    yield start
    for run in runs:
        run.close()
        if run.killed:
            beds.discard()
