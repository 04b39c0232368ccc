"""Exactly once through the faults a cluster really has, on the netns bed (issue 41):

- a learner cut off from its head but not from its Redis lives on beside its replacement
  (Ray's kill cannot reach it): fenced off, it stops in one line and writes nothing more;
- a stream shard down while more games pass than the learner's old duplicate-id window
  held (10,000 ids), then back with copies of games trained before it went down: every
  copy dropped, none trained twice;
- the run's main Redis (weights, pace, controller state) down for three minutes, the
  learner killed in the middle of it: the run goes on and its replacement waits for Redis
  instead of crashing.

Each ends with the per-id ledger: every game id appended to any shard (the auditors, in
the ``redis`` host) is in the final checkpoint exactly once, compared as sets.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from benchmarks.scale_sim import record_games
from tests.fault_report import report
from tests.integration.test_chaos import checkpoint_received
from tests.multihost.bed_run import BedRun, assert_exactly_once, ips
from tests.netbed import LEARNER_RESOURCE, Bed
from tests.processes import gone
from zeroforge.actors.replay_worker import save_games
from zeroforge.learner.learner import load_checkpoint
from zeroforge.shared.samples import decode
from zeroforge.shared.transport import FIELD, connect, stream_key

pytestmark = pytest.mark.slow

FENCED_LINE = "stops without writing anything more"
"""What a fenced-off learner says as it stops (``LearnerService.run``)."""
OLD_WINDOW = 10_000
"""The duplicate-id window before 2026-12-02: max(10,000, 2 x 2,000 x shards) ids, 10,000
for two shards; a copy later than that was trained again."""


def _said_on(bed: Bed, host: str, words: str) -> list[str]:
    """Lines with ``words`` in the Ray worker logs of ``host`` (its learner's log stays
    on the node: a cut-off node forwards nothing to the driver)."""
    found = []
    # each session once (``session_latest`` links to the newest)
    for path in {p.resolve() for p in bed.dir.glob(f"{host}*/session_*/logs/worker-*")}:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        found += [line for line in text.splitlines() if words in line]
    return found


def test_a_learner_cut_off_from_its_head_is_fenced_off_by_its_replacement(bed, start_run):
    """The learner on a worker node (``distributed.learner_resource``); that node cut off
    from the head (the GCS, the controller) but not from Redis. The GCS declares the node
    dead, the controller starts a learner on the other node, and the old one, which Ray's
    kill cannot reach, goes on reading, training and acking until the new one takes its
    epoch: then its next write is refused and it stops in one line. The checkpoint on disk
    is the new learner's, and the ledger is exact."""
    run = start_run("selfplay.workers=2", "distributed.learner_cpus=0",
                    f"distributed.learner_resource={LEARNER_RESOURCE}")
    st = run.status_when(lambda s: len(ips(s, "learner")) == 1 and len(ips(s)) == 2
                         and s["learner_steps"] >= 20, 240, "a learner on a node, training")
    host_of = {bed.ip(h): h for h in ("node1", "node2")}
    zombie = host_of[ips(st, "learner")[0]]
    other = "node2" if zombie == "node1" else "node1"
    old_pid = next(r["pid"] for r in st["actors"]
                   if r["kind"] == "learner" and r["state"] == "alive")
    epoch_file = run.run_dir / "learner.epoch"
    old_epoch = int(epoch_file.read_text())
    try:
        with bed.cut(zombie, "head"):
            cut_at = time.monotonic()
            st = run.status_when(lambda s: ips(s, "learner") == [bed.ip(other)], 180,
                                 f"a replacement learner on {other}")
            replaced_s = time.monotonic() - cut_at
            deadline = time.monotonic() + 120
            while not (said := _said_on(bed, zombie, FENCED_LINE)):
                assert not gone(old_pid), (
                    f"the old learner (pid {old_pid}) ended without being fenced off:\n"
                    + "\n".join(_said_on(bed, zombie, "learner")[-20:]))
                assert time.monotonic() < deadline, "the old learner was never fenced off"
                time.sleep(0.5)
            fenced_s = time.monotonic() - cut_at
            floor = st["learner_steps"]
            run.status_when(lambda s: s["learner_steps"] >= floor + 20, 120,
                            "the replacement training")
    finally:
        # the cut-off node was declared dead: a supervisor starts it anew
        bed.kill_host(zombie)
        bed.start_worker_node(zombie)
    assert len(said) == 1, said  # one line, and nothing after it: it stopped
    new_epoch = int(epoch_file.read_text())
    assert new_epoch > old_epoch
    run.stop()
    saved = load_checkpoint(run.run_dir / "checkpoint.pt")["extra"]
    assert saved["learner_epoch"] == new_epoch  # the last learner's, never the zombie's
    ledger = assert_exactly_once(run)
    print(f"cut at 0 s; replacement learner at {replaced_s:.1f} s; old one fenced off at "
          f"{fenced_s:.1f} s: {said[0].strip()[-200:]}")
    report(**ledger.figures(), replaced_s=replaced_s, fenced_s=fenced_s)


def _raw_entries(bed: Bed, run: BedRun, port: int, shard: int, count: int
                 ) -> dict[bytes, bytes]:
    """Entry id -> the entry as stored, of the first ``count`` entries of a shard (read
    inside the redis host)."""
    url = bed.admin_url(port)

    def read() -> dict[bytes, bytes]:
        client = connect(url)
        try:
            got = client.xrange(stream_key(run.run_id, shard), count=count)
            return {entry_id: fields[FIELD] for entry_id, fields in got}
        finally:
            client.close()
    return bed.call_in("redis", read)


def _append_raw(bed: Bed, run: BedRun, port: int, shard: int, blobs: list[bytes]) -> None:
    url = bed.admin_url(port)

    def append() -> None:
        client = connect(url)
        try:
            for blob in blobs:
                client.xadd(stream_key(run.run_id, shard), {FIELD: blob})
        finally:
            client.close()
    bed.call_in("redis", append)


def test_a_shard_down_past_the_old_window_comes_back_with_copies_none_trained_twice(
        bed, start_run, tmp_path: Path):
    """Two stream shards, shard 1 on a redis-server of its own; 20 simulating workers
    (recorded games at 300 a minute each) so that games pass quickly. Shard 1 killed
    (kill -9) and kept down until the learner has received more than ``OLD_WINDOW``
    games since, then started again on its AOF; into it go copies of games it held that
    were in the learner's checkpoint before it went down (what a shard that took a
    pipeline whose sender gave up on it holds when it returns). Every copy is dropped as a
    duplicate; per id, every game is trained exactly once."""
    games_file = tmp_path / "games.msgpack"
    save_games(games_file, record_games("tictactoe", 16, 0))
    main_port, port = bed.config.redis_port, bed.config.redis_port + 2
    second = bed.start_redis(port)
    try:
        run = start_run("selfplay.workers=20", "distributed.workers_per_host=10",
                        f"selfplay.simulate_from={games_file}",
                        "selfplay.simulate_games_per_min=300", "distributed.stream_shards=2",
                        # the learner trains each position once (it keeps up, and waits
                        # for data between)
                        "learner.samples_per_insert=1",
                        f'distributed.stream_redis=["redis://redis:{main_port}/0",'
                        f'"redis://redis:{port}/0"]', shards=((main_port, 0), (port, 1)))
        run.status_when(lambda s: s["alive"]["selfplay"] == 20
                        and s["games_received"] >= 200, 240, "the workers up")
        # shard 1's entries as stored, gathered over 10 s (acked ones are trimmed away)
        held: dict[bytes, bytes] = {}
        until = time.monotonic() + 10
        while time.monotonic() < until:
            held.update(_raw_entries(bed, run, port, 1, 500))
            time.sleep(0.5)
        second.kill()
        second.wait(10)
        down_at = time.monotonic()
        # copies of games already in the learner's checkpoint: trained before the outage
        trained = set(checkpoint_received(load_checkpoint(run.run_dir / "checkpoint.pt")[
            "extra"]))
        early = [b for b in held.values() if decode(b).game_id in trained]
        assert len(early) >= 10, (len(held), len(early))
        at_kill = run.status()["games_received"]
        at_return = run.status_when(lambda s: s["games_received"] > at_kill + OLD_WINDOW,
                                    600, f"{OLD_WINDOW} games received with shard 1 down"
                                    )["games_received"]
        down_s = time.monotonic() - down_at
        second = bed.start_redis(port)  # back on its port, from its AOF
        _append_raw(bed, run, port, 1, early)
        after = run.status_when(lambda s: s["games_received"] > at_return + 200, 180,
                                "games from both shards again")
        assert after["state"] == "running"
        run.stop()
        ledger = assert_exactly_once(run)
        copies = {g for g in _ids_of(early) if ledger.appended[g] >= 2}
        assert len(copies) == len(set(_ids_of(early))) == len(early), len(copies)
        assert ledger.rejected.get("duplicate", 0) >= len(early), ledger.rejected
        passed = at_return - at_kill
        print(f"shard 1 down {down_s:.0f} s while {passed} games were received; "
              f"{len(early)} copies of games trained before came back; duplicates dropped "
              f"{ledger.rejected.get('duplicate')}")
        report(**ledger.figures(), shard_down_s=down_s, games_while_down=passed)
    finally:
        second.kill()
        second.wait(10)


def _ids_of(blobs: list[bytes]) -> list[str]:
    return [decode(b).game_id for b in blobs]


def test_the_main_redis_down_three_minutes_and_the_learner_killed_meanwhile(
        bed, start_run):
    """The stream shards on a redis-server of their own, the run's main Redis (weights,
    pace, controller state, the learner's epoch) killed and kept down for 180 s, then
    started on its AOF. Meanwhile the learner goes on reading, training and checkpointing;
    60 s in it is killed (kill -9), and its replacement waits for the main Redis to take
    its epoch instead of crashing. No run failure; after it, new weights are published and
    the ledger is exact."""
    port = bed.config.redis_port + 2
    shards = bed.start_redis(port)
    try:
        run = start_run("selfplay.workers=2", "distributed.stream_shards=2",
                        f'distributed.stream_redis=["redis://redis:{port}/0"]',
                        shards=((port, 0), (port, 1)))
        st = run.status_when(lambda s: s["learner_steps"] >= 20 and len(ips(s)) == 2,
                             240, "two workers and a training learner")
        version = st["weights_version"]
        checkpoint = run.run_dir / "checkpoint.pt"
        os.kill(bed.redis_pid(), signal.SIGKILL)
        down_at = time.monotonic()
        # the learner trains and checkpoints on what it reads from the shards
        mtime = checkpoint.stat().st_mtime
        during = run.status_when(
            lambda s: s["learner_steps"] >= st["learner_steps"] + 20
            and s["games_received"] > st["games_received"]
            and checkpoint.stat().st_mtime > mtime, 60, "training with the main Redis down")
        while time.monotonic() - down_at < 60:
            time.sleep(1)
        learner_pid = next(r["pid"] for r in run.status()["actors"]
                           if r["kind"] == "learner" and r["state"] == "alive")
        os.kill(learner_pid, signal.SIGKILL)
        while time.monotonic() - down_at < 180:
            assert run.status()["state"] == "running", run.output[-4000:]
            time.sleep(5)
        bed.start_redis()  # on its AOF
        back_at = time.monotonic()
        after = run.status_when(
            lambda s: s["weights_version"] > version and s["alive"]["learner"] == 1
            and s["learner_steps"] > during["learner_steps"], 180,
            "new weights from a live learner after the outage")
        recovery_s = time.monotonic() - back_at
        assert after["state"] == "running"
        assert after["restarts"]["learner"] == 1, after["restarts"]
        run.stop()
        ledger = assert_exactly_once(run)
        print(f"main Redis down 180 s, the learner killed 60 s in; new weights "
              f"{recovery_s:.1f} s after Redis came back")
        report(**ledger.figures(), redis_down_s=180, recovery_s=recovery_s)
    finally:
        shards.kill()
        shards.wait(10)
