"""Two runs on one machine: ``status``/``scale``/``stop`` act on the run they are pointed at
(``--run-dir``, ``--run-id``, ``--address``) and refuse to guess between live runs; Ctrl-C
in the terminal of a run (SIGINT to its whole process group) stops it cleanly, Redis last.
Every process a run started is gone at the end, also when a test fails (``TrainProcess``).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import time

from tests.e2e.runs import TrainProcess
from tests.e2e.test_cli import zf
from tests.fault_report import report
from zeroforge.learner.learner import load_checkpoint


def _record(run_dir) -> dict:
    path = run_dir / "run.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    return json.loads(path.read_text())


def _wait_gone(train: TrainProcess, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while train.descendants_alive() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert train.descendants_alive() == [], "left behind"


def test_two_runs_each_command_acts_on_the_run_it_names(tmp_path):
    """B never reaches a learner step (its replay window is out of reach): stopped by
    `zeroforge stop` it did what was asked, so it exits 0 and says it trained nothing
    (a run that ends so at its limits exits 1: test_train_failures.py). Before the stop
    reason, a busy CI host that had not started A's or B's worker by the stop failed this."""
    with TrainProcess(tmp_path / "a", "iso-a") as a, \
            TrainProcess(tmp_path / "b", "iso-b", "--set", "learner.min_replay=100000") as b:
        a.wait_for("metrics at http://127.0.0.1:")
        b.wait_for("metrics at http://127.0.0.1:")
        rec_a, rec_b = _record(tmp_path / "a"), _record(tmp_path / "b")
        assert rec_a["run_id"] == "iso-a" and rec_b["run_id"] == "iso-b"
        assert rec_a["address"] != rec_b["address"]
        assert rec_a["address"].startswith("127.0.0.1:")
        assert a.status()["run_id"] == "iso-a" and b.status()["run_id"] == "iso-b"
        assert b.status("--run-id", "iso-b")["run_id"] == "iso-b"
        # an explicit address works (Ray's token is sent) and finds the run on it
        assert a.status("--address", rec_a["address"])["run_id"] == "iso-a"
        # no option with two live runs: a one-line refusal naming both, not a guess
        r = zf("status")
        assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "several runs are live" in r.stderr
        assert "iso-a" in r.stderr and "iso-b" in r.stderr
        r = zf("scale", "--workers", "2", "--run-dir", str(tmp_path / "b"))
        assert r.returncode == 0 and "run iso-b: desired" in r.stdout, r.stderr
        r = zf("stop", "--run-dir", str(tmp_path / "b"))
        assert r.returncode == 0 and "run iso-b: stopped" in r.stdout, r.stderr
        assert b.wait() == 0, b.output
        assert "run iso-b stopped" in b.output
        assert ("warning: the run stopped (stopped by command) after" in b.output
                and "without one learner step" in b.output), b.output[-3000:]
        _wait_gone(b)
        st = a.status()
        assert st["run_id"] == "iso-a" and st["state"] == "running", st
        assert st["desired"]["selfplay"] == 1  # the scale went to B only
        r = zf("status", "--run-dir", str(tmp_path / "b"))
        assert r.returncode == 1 and "iso-b" in r.stderr and "has ended" in r.stderr
        r = zf("stop", "--run-id", "iso-a")
        assert r.returncode == 0 and "run iso-a: stopped" in r.stdout, r.stderr
        assert a.wait() == 0, a.output
        _wait_gone(a)


def test_ctrl_c_to_the_process_group_stops_cleanly_redis_last(tmp_path):
    """The terminal sends SIGINT to every process of its foreground group: the driver,
    and (before the fix) the bundled redis-server, which then died before the run had
    drained into it."""
    run_dir = tmp_path / "run"
    with TrainProcess(run_dir, "iso-int") as train:
        train.wait_for("metrics at http://127.0.0.1:")
        st = train.status_when(lambda st: st["learner_steps"] > 0, 120)
        assert st["learner_steps"] > 0, st
        os.killpg(train.proc.pid, signal.SIGINT)
        start = time.monotonic()
        redis_pids = set()  # before the fix Redis died and its supervisor started another
        deadline = time.monotonic() + 150
        while train.proc.poll() is None and time.monotonic() < deadline:
            train.remember_descendants()
            redis_pids |= {p.split()[0] for p in train.descendants_alive()
                           if "redis-server" in p}
            time.sleep(0.1)
        code = train.wait()
        stop_s = time.monotonic() - start
        assert code == 0, train.output
        assert len(redis_pids) == 1, f"redis-server restarted during the stop: {redis_pids}"
        out = train.output
        assert "stopping (final checkpoint)" in out and "run iso-int stopped" in out, out
        assert f"checkpoint in {run_dir / 'checkpoint.pt'}" in out, out
        assert "cannot reach Redis" not in out and "Traceback" not in out, out
        [final] = [x for x in out.splitlines() if x.startswith("run iso-int stopped")]
        games = int(final.split(": ", 1)[1].split(" games")[0])
        counters = load_checkpoint(run_dir / "checkpoint.pt")["counters"]
        assert games > 0 and counters["games_seen"] == games, (final, counters)
        _wait_gone(train)
        report(stop_s=stop_s, exit_code=code, games_played=games,
               final_checkpoint_games=counters["games_seen"], redis_servers=len(redis_pids))
