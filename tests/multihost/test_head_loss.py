"""The head lost mid-run on the bed: every process of the ``head`` host killed (the GCS,
its raylet, the driver, the controller, the learner). With Ray's GCS fault tolerance
(the GCS's tables in a Redis of its own) the head is started again as docs/cluster.md
says, and the same ``zeroforge train --resume auto`` as before re-attaches: the self-play
workers on node1/node2 are adopted (their games kept, their appends went on into the
run's Redis), the learner resumes from its checkpoint, and the ledger is exact."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.multihost.bed_run import BedRun, ips
from tests.multihost.conftest import Beds, hold_beds
from tests.netbed import Bed, BedConfig

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def beds() -> Iterator[Beds]:
    yield from hold_beds(BedConfig(worker_slots=3, gcs_ft=True))


def _pids(st: dict, kind: str) -> set[tuple[str, int]]:
    return {(row["ip"], row["pid"]) for row in st["actors"]
            if row["kind"] == kind and row["state"] == "alive"}


def test_the_head_killed_and_restarted_the_run_goes_on_and_loses_no_game(bed: Bed,
                                                                           tmp_path: Path):
    run_id = f"mh-head-{uuid.uuid4().hex[:8]}"
    run_dir = tmp_path / run_id
    settings = ("selfplay.workers=2",)
    again = ("--resume", "auto")
    first = BedRun(bed, run_dir, run_id, *settings, args=again)
    second = None
    try:
        before = first.status_when(lambda s: s["learner_steps"] >= 30 and len(ips(s)) == 2,
                                   what="two workers and 30 learner steps")
        workers = _pids(before, "selfplay")
        lost_at = time.monotonic()
        killed = bed.kill_host("head")
        assert first.proc.pid in killed or first.proc.poll() is not None
        first.proc.wait(timeout=30)
        bed.start_head()
        head_back = time.monotonic() - lost_at
        second = BedRun(bed, run_dir, run_id, *settings, args=again,
                        auditors=first.auditors)
        deadline = time.monotonic() + 120
        while not any("re-attached" in line for line in second.lines):
            assert second.proc.poll() is None, second.output[-3000:]
            assert time.monotonic() < deadline, second.output[-3000:]
            time.sleep(0.5)
        reattached = time.monotonic() - lost_at
        # the counters' floors come back with the re-attach (the saved state may be newer
        # than ``before``): training again is 20 steps past the first answer's, by a
        # live learner
        floor = second.status_when(lambda s: True, timeout=60)["learner_steps"]
        after = second.status_when(
            lambda s: s["learner_steps"] > max(floor, before["learner_steps"]) + 20
            and s["alive"]["learner"] == 1, timeout=240,
            what="the replacement learner training past the steps before the loss")
        training = time.monotonic() - lost_at
        # the workers on node1/node2 lived through it and were adopted, not replaced
        assert workers <= _pids(after, "selfplay"), (workers, after["actors"])
        assert after["restarts"].get("selfplay", 0) == 0, after["restarts"]
        print(f"head loss: head back in {head_back:.1f} s, re-attached at {reattached:.1f} s, "
              f"learner past its old steps at {training:.1f} s")
        second.stop()
        ledger = second.ledger()
        print(ledger.table())
        assert len(ledger.appended) > 0
        assert ledger.problems() == []
    finally:
        first.close()
        if second is not None:
            second.close()
