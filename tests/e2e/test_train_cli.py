"""`zeroforge train` as a user runs it: local loop with resume, and the distributed job
driven from a second terminal with status, scale and stop."""

from __future__ import annotations

import json
import re
import stat
import time

import pytest
import redis

from tests.e2e.runs import TrainProcess
from tests.e2e.test_cli import zf
from zeroforge.learner.learner import load_checkpoint
from zeroforge.shared.transport import TransportError, acl, connect

FAST = ["--set", "net=tiny", "--set", "search.num_simulations=12",
        "--set", "selfplay.games_in_parallel=8", "--set", "learner.min_replay=64",
        "--set", "learner.batch_size=32", "--set", "evaluation.games=4",
        "--set", "run.progress_every_s=1"]


def test_local_training_writes_a_checkpoint_and_resumes(tmp_path):
    run_dir = tmp_path / "run"
    r = zf("train", "--local", "--config", "tictactoe", "--steps", "20", "--run-dir",
           str(run_dir), *FAST, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "score vs random" in r.stdout and "checkpoint:" in r.stdout
    assert "final evaluation: 4 games a match against random, minimax (" in r.stdout
    first = load_checkpoint(run_dir / "checkpoint.pt")["counters"]
    assert first["steps"] >= 20
    r = zf("train", "--local", "--config", "tictactoe", "--steps", "40", "--run-dir",
           str(run_dir), "--resume", *FAST, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"resumed from {run_dir / 'checkpoint.pt'}: step {first['steps']}" in r.stdout
    second = load_checkpoint(run_dir / "checkpoint.pt")["counters"]
    assert second["steps"] >= 40 and second["games_seen"] > first["games_seen"]
    # a fresh run (no --resume) in the same folder moves the earlier checkpoint aside
    r = zf("train", "--local", "--config", "tictactoe", "--steps", "5", "--run-dir",
           str(run_dir), *FAST, timeout=300)
    assert r.returncode == 0, r.stderr
    [kept] = run_dir.glob("checkpoint-*.pt")
    assert f"kept as {kept}" in r.stdout
    assert load_checkpoint(kept)["counters"]["steps"] == second["steps"]
    assert load_checkpoint(run_dir / "checkpoint.pt")["counters"]["steps"] < second["steps"]
    # `--resume auto`, as a job's restart command: the same command twice continues
    third = load_checkpoint(run_dir / "checkpoint.pt")["counters"]
    for limit in (30, 50):
        r = zf("train", "--local", "--config", "tictactoe", "--steps", str(limit),
               "--run-dir", str(run_dir), "--resume", "auto", *FAST, timeout=300)
        assert r.returncode == 0, r.stderr
        assert f"resumed from {run_dir / 'checkpoint.pt'}: step {third['steps']}" in r.stdout
        third = load_checkpoint(run_dir / "checkpoint.pt")["counters"]
        assert third["steps"] >= limit
    assert len(list(run_dir.glob("checkpoint-*.pt"))) == 1  # nothing more moved aside
    # in an empty folder it starts fresh
    r = zf("train", "--local", "--config", "tictactoe", "--steps", "3", "--run-dir",
           str(tmp_path / "fresh"), "--resume", "auto", *FAST, timeout=300)
    assert r.returncode == 0 and "resumed from" not in r.stdout, r.stderr


def test_resume_from_a_corrupt_checkpoint_is_one_line(tmp_path):
    (tmp_path / "checkpoint.pt").write_bytes(b"not a checkpoint")
    r = zf("train", "--local", "--config", "tictactoe", "--run-dir", str(tmp_path), "--resume")
    assert r.returncode == 1
    assert "corrupt or not a checkpoint" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_distributed_job_train_status_scale_stop(tmp_path):
    """Driven with --run-dir, so other runs on the machine cannot be picked by mistake;
    every process the run started is gone at the end (killed if the test fails). Its
    games go through two stream shards on a Redis server of their own."""
    run_dir = tmp_path / "run"
    where = ("--run-dir", str(run_dir))
    shards = ("--set", "distributed.stream_shards=2", "--set", "distributed.stream_servers=1")
    with TrainProcess(run_dir, "e2e-run", *shards) as train:
        train.wait_for("metrics at http://127.0.0.1:")
        st = train.status_when(lambda st: st["games_received"] > 0, 60)
        assert st["run_id"] == "e2e-run" and st["alive"]["selfplay"] == 1
        r = zf("scale", "--workers", "2", *where)
        assert r.returncode == 0 and "selfplay 2" in r.stdout, r.stderr
        st = train.status_when(lambda st: st["alive"]["selfplay"] == 2, 60)
        assert st["desired"]["selfplay"] == 2 and st["alive"]["selfplay"] == 2
        text = zf("status", *where).stdout
        assert "actors (alive/desired, restarts): " in text and "selfplay 2/2" in text
        # the workers one by one, a page from the run's server (status: a row an actor)
        r = zf("status", "--workers", "0", "--json", *where)
        page = json.loads(r.stdout)
        assert r.returncode == 0 and page["workers"] == 2 and page["pages"] == 1, r.stderr
        assert sorted(row["index"] for row in page["rows"]) == [0, 1]
        text = zf("status", "--workers", "0", *where).stdout
        assert "worker 1 (host 1)" in text and "page 0 of 0..0 (2 workers)" in text
        # the run's servers: a user a role, the default user off, each role's password in
        # a 0600 file of the run dir (shared/transport/acl.py)
        auth = run_dir / "redis-auth"
        assert sorted(p.name for p in auth.iterdir()) == sorted(acl.ROLES)
        assert {stat.S_IMODE(p.stat().st_mode) for p in auth.iterdir()} == {0o600}
        for server in ("redis", "redis-stream-0"):
            port = json.loads((run_dir / server / "endpoint.json").read_text())["port"]
            with pytest.raises(TransportError, match="rejected our credentials"):
                connect(f"redis://:guess@127.0.0.1:{port}/0")
            worker = connect(f"redis://127.0.0.1:{port}/0", role="worker", auth_dir=str(auth))
            with pytest.raises(redis.exceptions.NoPermissionError):
                worker.set("zf:{e2e-run}:weights:latest", b"99")
            worker.close()
        r = zf("scale", "--inference-servers", "2", *where)
        assert r.returncode == 1 and "inference=local" in r.stderr
        r = zf("stop", *where)
        assert r.returncode == 0 and "stopped after" in r.stdout, r.stderr
        assert train.wait(timeout=120) == 0, train.output
        assert "run e2e-run stopped" in train.output
        # both shards' streams were written to the stream server, none to the run's Redis
        stream_log = (run_dir / "redis-stream-0" / "appendonly.aof").read_bytes()
        assert b"zf:{e2e-run}:samples\r\n" in stream_log
        assert b"zf:{e2e-run}:samples:1\r\n" in stream_log
        assert b":samples" not in (run_dir / "redis" / "appendonly.aof").read_bytes()
        # the job is gone, and so is its Ray cluster: a clear one-line error
        r = zf("status", *where)
        assert r.returncode == 1 and "error:" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        deadline = time.monotonic() + 30
        while train.descendants_alive() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert train.descendants_alive() == []


def test_a_run_scaled_up_sizes_its_redis_for_the_workers_and_keeps_it_scaled_down(tmp_path):
    """``zeroforge scale`` up grows the maxmemory of the Redis the driver started: without
    the node cache every worker reads each new weights version at once (a blob each, here
    a 6x64 net's ~1.8 MB), so one more worker is one more blob in flight. The driver says
    so in one line, the server runs with it (CONFIG GET as its admin), and scaling back
    down keeps it (deploy/redis_follow.py)."""
    run_dir = tmp_path / "run"
    where = ("--run-dir", str(run_dir))
    # run.minutes: the preset's 3 minutes can pass on a loaded machine before the stop;
    # two simulations a move and small batches keep the 6x64 net's run light
    with TrainProcess(run_dir, "e2e-sized", "--set", "net=resnet6x64", "--set", "run.minutes=15",
                      "--set", "distributed.weights_per_node=false",
                      "--set", "search.num_simulations=2", "--set", "learner.batch_size=8",
                      "--set", "selfplay.games_in_parallel=2") as train:
        train.wait_for("metrics at http://127.0.0.1:")
        endpoint = json.loads((run_dir / "redis" / "endpoint.json").read_text())
        admin = redis.Redis(port=endpoint["port"], username=acl.ADMIN_USER,
                            password=endpoint["password"], decode_responses=True)

        def maxmemory() -> int:
            return int(admin.config_get("maxmemory")["maxmemory"])

        started = maxmemory()
        r = zf("scale", "--workers", "2", *where, timeout=300)
        assert r.returncode == 0 and "selfplay 2" in r.stdout, r.stderr
        train.wait_for("run's Redis sized for 2 workers (zeroforge scale): maxmemory ", 60)
        line = next(x for x in train.lines if "run's Redis sized for 2 workers" in x)
        before, after = re.search(r"maxmemory (\d+)mb -> (\d+)mb", line).groups()
        assert int(before) << 20 == started and maxmemory() == int(after) << 20 > started
        r = zf("scale", "--workers", "1", *where, timeout=300)
        assert r.returncode == 0, r.stderr
        train.status_when(lambda st: st["alive"]["selfplay"] == 1, 60)
        assert maxmemory() == int(after) << 20  # never smaller
        admin.close()
        r = zf("stop", *where, timeout=300)
        assert r.returncode == 0, r.stderr
        assert train.wait(timeout=120) == 0, train.output
        assert sum("sized for" in x for x in train.lines) == 1, train.output
