"""One fault at a time, induced for real in a real distributed run (local Ray, the real
learner and self-play workers, the run's own supervised redis-server): the rows of the
fault table (docs/reliability.md, ``benchmarks/fault_table.py``) that used to rest on
``ray.kill``, client-level tests or hand-made counts.

- kill -9 of the learner's process, of a self-play worker's process and of the run's
  redis-server, each by its pid, three times;
- SIGSTOP of the learner's process for 30 s, then SIGCONT (a hung learner);
- the run directory full (a tmpfs with no space left), then read-only.

Each test waits for the run to recover after each fault and measures how long that took
(``recovery_s``), then stops the run and checks the chaos test's ledger: every game id
appended to the stream (read by an auditor group of the test's own) is in the learner's
final checkpoint exactly once, and no status or Prometheus counter went back meanwhile.
The figures go to the fault table through ``tests/fault_report.py``.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path

from tests.disk import small_disk
from tests.fault_report import report
from tests.integration.test_chaos import SETTINGS, AuditedRun, Ledger
from zeroforge.learner.learner import CHECKPOINT_NAME, load_checkpoint
from zeroforge.shared.transport import connect

KILLS = 3
"""Faults of each kind per test: one could pass by luck (a kill between two turns)."""


def _rows(st: dict, kind: str) -> list[dict]:
    return [r for r in st["actors"] if r["kind"] == kind and r["state"] == "alive"
            and r["pid"]]


def _seconds(run: AuditedRun, check: Callable[[dict], bool], timeout: float) -> float:
    """Seconds until ``check(status)`` holds, polling as the driver does (0.25 s apart:
    the figures are good to about half a second)."""
    start = time.monotonic()
    run.watch.until(check, timeout)
    return time.monotonic() - start


def _check_ledger(run: AuditedRun, ledger: Ledger, final: dict) -> None:
    print(ledger.table())
    assert len(ledger.appended) > 0
    assert ledger.problems() == []
    assert run.watch.decreases == []
    assert run.watch.games_below == []
    assert final["state"] == "stopped", final["error"]
    assert final["games_received"] == ledger.games_received


def test_kill_9_of_the_learner_process(local_ray, run_id, tmp_path):
    """The learner's actor process SIGKILLed three times (each time after its successor
    trained and took games): each successor resumes from the checkpoint, every game is
    trained once, no counter goes back, and the work done again is counted. Checkpoints
    5 s apart, so each kill finds games received since the last one."""
    rng = random.Random(11)
    with AuditedRun(tmp_path, run_id, [*SETTINGS, "learner.checkpoint_every_s=5"]) as run:
        killed: set[int] = set()
        recovery = []
        run.watch.until(lambda st: st["learner_steps"] > 0, 180)
        for _ in range(KILLS):
            run.watch.sleep(rng.uniform(3.0, 8.0))
            pid = run.pid("learner", rng)
            assert pid is not None and pid not in killed
            os.kill(pid, signal.SIGKILL)
            killed.add(pid)
            def trains(st: dict, first: dict[int, float] = {}) -> bool:  # noqa: B006
                # a successor (a new pid) alive and past the steps it restored (``first``:
                # each pid's steps when first seen, a fresh dict for each kill)
                for row in _rows(st, "learner"):
                    if row["pid"] not in killed:
                        first.setdefault(row["pid"], row["steps"])
                        if row["steps"] > first[row["pid"]]:
                            return True
                return False
            recovery.append(_seconds(run, trains, 180))
        ledger, final = run.finish()
        # as of the last poll before the stop (the successor had caught up by then)
        redone = {"steps_redone": run.watch.total("learner_steps_redone_total"),
                  "games_received_again":
                      run.watch.total("learner_games_received_again_total")}
    _check_ledger(run, ledger, final)
    assert final["restarts"]["learner"] == KILLS
    # the dead learners' games since their last checkpoints came again, and were counted
    assert redone["games_received_again"] > 0, redone
    report(**ledger.figures(), kills=KILLS, recovery_s=recovery, **redone)


def test_kill_9_of_a_worker_process(local_ray, run_id, tmp_path):
    """A self-play worker's process SIGKILLed three times: a replacement plays on; the
    games the dead worker appended are trained once; status ``games`` never reads below
    the games the learner received (a worker killed before its next report)."""
    rng = random.Random(12)
    with AuditedRun(tmp_path, run_id) as run:
        recovery = []
        run.watch.until(lambda st: st["learner_steps"] > 0, 180)
        for _ in range(KILLS):
            run.watch.sleep(rng.uniform(2.0, 5.0))
            before = {r["pid"] for r in _rows(run.watch.poll(), "selfplay")}
            pid = run.pid("selfplay", rng)
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            before.add(pid)
            # a replacement (a pid not seen before) alive and its first games reported
            recovery.append(_seconds(run, lambda st, seen=before: any(
                r["pid"] not in seen and r["games"] > 0 for r in _rows(st, "selfplay")),
                180))
        ledger, final = run.finish()
    _check_ledger(run, ledger, final)
    assert final["restarts"]["selfplay"] == KILLS
    assert final["games"] >= final["games_received"]
    report(**ledger.figures(), kills=KILLS, recovery_s=recovery)


def test_kill_9_of_the_runs_redis_server(local_ray, run_id, tmp_path):
    """The run's redis-server SIGKILLed three times mid-run: its supervisor restarts it on
    the same port from its append-only file; workers hold their games and append them
    once it is back, the learner and the auditor ride it out; every game is trained once.
    ``recovery_s``: from the kill to the first game appended after it (Redis' own clock,
    the entry id)."""
    rng = random.Random(13)
    with AuditedRun(tmp_path, run_id) as run:
        port = run.server.port
        recovery = []
        run.watch.until(lambda st: st["learner_steps"] > 0, 180)
        for _ in range(KILLS):
            run.watch.sleep(rng.uniform(3.0, 6.0))
            pid = run.server.pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            killed_at = time.time()
            run.watch.until(lambda st, at=killed_at: run.auditor.first_append_after(at)
                            is not None, 120)
            recovery.append(run.auditor.first_append_after(killed_at))
            assert run.server.pid != pid and run.server.port == port
        ledger, final = run.finish()
    _check_ledger(run, ledger, final)
    assert final["restarts"]["learner"] == 0 and final["restarts"]["selfplay"] == 0
    report(**ledger.figures(), kills=KILLS, recovery_s=recovery)


def test_sigstop_of_the_learner_for_30_s(local_ray, run_id, tmp_path):
    """The learner's process stopped (SIGSTOP) for 30 s, then continued: nothing replaces
    it (a stopped process keeps its sockets: Ray sees nothing die), it trains no step
    meanwhile, workers play on and append (the stream holds up to ``max_backlog`` games
    for it), and after SIGCONT it takes the games in and trains: every game once.
    ``recovery_s``: SIGCONT to its next step."""
    rng = random.Random(14)
    with AuditedRun(tmp_path, run_id) as run:
        run.watch.until(lambda st: st["learner_steps"] > 0, 180)
        run.watch.sleep(3.0)
        pid = run.pid("learner", rng)
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            run.watch.sleep(2.0)  # a turn under way when it stopped may still report
            held = run.watch.poll()
            appended = sum(run.auditor.appended.values())
            run.watch.sleep(28.0)
            during = run.watch.poll()
            appended_meanwhile = sum(run.auditor.appended.values()) - appended
        finally:
            os.kill(pid, signal.SIGCONT)
            stopped_s = time.monotonic() - stopped_at
        assert during["learner_steps"] == held["learner_steps"]  # it was stopped
        assert appended_meanwhile > 0  # the workers were not
        recovery = _seconds(run, lambda st: st["learner_steps"] > during["learner_steps"],
                            180)
        # the same process trains on: nothing took it for dead
        assert [r["pid"] for r in _rows(run.watch.poll(), "learner")] == [pid]
        ledger, final = run.finish()
    _check_ledger(run, ledger, final)
    assert final["restarts"]["learner"] == 0
    report(**ledger.figures(), stopped_s=stopped_s, appended_while_stopped=appended_meanwhile,
           recovery_s=recovery)


def test_a_full_then_read_only_run_dir(local_ray, run_id, tmp_path):
    """The run directory (a 64 MiB tmpfs of its own) filled up, later made read-only:
    each checkpoint write fails and is counted, the learner trains on, the last good
    checkpoint stays byte for byte (no partial file beside it); once the disk takes
    writes again the next checkpoint is written and every game is trained once.
    ``recovery_s``: from the disk freed (or writable) to the next checkpoint. Redis keeps
    its data elsewhere here (as with ``--redis-url``); the bundled Redis's AOF in
    ``RUN_DIR/redis`` would stop appends on that disk too (docs/reliability.md)."""
    with small_disk(tmp_path / "run", 64) as disk, AuditedRun(disk.path, run_id) as run:
        path = disk.path / CHECKPOINT_NAME
        watch = run.watch

        def failures() -> float:
            return watch.total("learner_save_failures_total", file="checkpoint")

        watch.until(lambda st: st["learner_steps"] > 0 and path.exists(), 180)
        recovery, trained_while_failing = [], []
        for fault in ("full", "read-only"):
            before = failures()
            disk.fill(leave=4096) if fault == "full" else disk.read_only()
            st = watch.until(lambda st, n=before, f=fault: _kept_full(disk, f)
                             and failures() > n, 60)
            good = path.read_bytes()  # nothing can replace it while the disk fails
            steps = st["learner_steps"]
            st = watch.until(lambda st, n=before, s=steps, f=fault: _kept_full(disk, f)
                             and failures() >= n + 3 and st["learner_steps"] > s, 120)
            trained_while_failing.append(st["learner_steps"] - steps)
            assert path.read_bytes() == good
            load_checkpoint(path)
            assert not list(disk.path.glob("*.tmp")), list(disk.path.iterdir())
            disk.free() if fault == "full" else disk.writable()
            recovery.append(_seconds(run, lambda st, old=good: _changed(path, old), 60))
        counted = failures()
        ledger, final = run.finish()
    _check_ledger(run, ledger, final)
    assert final["restarts"]["learner"] == 0
    report(**ledger.figures(), checkpoint_failures=counted,
           steps_while_failing=trained_while_failing, recovery_s=recovery)


def _kept_full(disk, fault: str) -> bool:
    """Take again what the run freed since the disk was filled (a checkpoint written while
    ``fill`` measured the space frees its predecessor's pages when renamed over it, room
    enough for the next one; CI's stop 60 failed on that race)."""
    if fault == "full":
        disk.fill(leave=4096)
    return True


def _changed(path: Path, old: bytes) -> bool:
    with contextlib.suppress(OSError):
        return path.read_bytes() != old
    return False


def test_a_full_run_dir_under_the_bundled_redis(local_ray, run_id, tmp_path):
    """As ``zeroforge train`` lays a run out: Redis's append-only file in ``RUN_DIR/redis``,
    on the disk that fills up. Redis refuses writes while it cannot write its AOF
    (MISCONF): workers hold their games and retry, the learner and the auditor wait;
    nothing crashes. Once space is back Redis writes again by itself, and every game is
    trained once. ``recovery_s``: from the space freed to the first game appended."""
    with small_disk(tmp_path / "run", 64) as disk, AuditedRun(
            disk.path, run_id, redis_dir=disk.path / "redis") as run:
        watch = run.watch
        client = connect(run.server.url)

        def aof_status() -> str:
            with contextlib.suppress(Exception):
                return str(client.info("persistence")["aof_last_write_status"])
            return "?"

        watch.until(lambda st: st["learner_steps"] > 0
                    and (disk.path / CHECKPOINT_NAME).exists(), 180)
        disk.fill()
        filled_at = time.time()
        seen = set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # the fault is on: Redis says it cannot write
            disk.fill()  # and stays on: take what a checkpoint's rename freed (_kept_full)
            seen.add(aof_status())
            watch.sleep(0.5)
        during = watch.poll()
        disk.free()
        freed_at = time.time()
        watch.until(lambda st: run.auditor.first_append_after(freed_at) is not None, 120)
        recovery = run.auditor.first_append_after(freed_at)
        after = watch.until(lambda st: st["learner_steps"] > during["learner_steps"], 120)
        assert aof_status() == "ok"
        client.close()
        ledger, final = run.finish()
    assert "err" in seen, seen
    _check_ledger(run, ledger, final)
    assert final["restarts"]["learner"] == 0 and final["restarts"]["selfplay"] == 0
    report(**ledger.figures(), full_s=freed_at - filled_at, recovery_s=recovery,
           steps_after=after["learner_steps"] - during["learner_steps"])
