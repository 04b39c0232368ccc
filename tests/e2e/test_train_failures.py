"""`zeroforge train` fails loudly and loses nothing (docs/reliability.md): bad input is one
line on stderr and exit 1 before anything starts or moves; SIGTERM stops a distributed run
like Ctrl-C (final checkpoint, exit 0), and SIGINT stops a run that a script started in
the background; actors that cannot be scheduled are reported."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time

import pytest

from tests.e2e.runs import TrainProcess
from tests.e2e.test_cli import ZF, zf
from tests.fault_report import report
from tests.processes import ignores_sigint
from zeroforge.shared.transport import RedisServer


def one_line_error(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture(scope="module")
def redis_url():
    with RedisServer() as server:
        yield server.url


@pytest.mark.parametrize("args,words", [
    (["--game", "go:size=abc"], ["size", "go:size=abc"]),
    (["--set", "learner.lr=-5"], ["learner.lr"]),
    (["--redis-url", "redis://:nope@127.0.0.1:1/0"], ["--redis-url", "cannot reach Redis"]),
    (["--redis-url", "WRONG_PASSWORD"], ["--redis-url", "rejected our credentials"]),
    (["--address", "127.0.0.1:1"], ["no Ray cluster answers at 127.0.0.1:1"]),
    (["--resume"], ["--resume", "corrupt or not a checkpoint"]),
])
def test_bad_input_is_one_line_and_moves_nothing(tmp_path, redis_url, args, words):
    """Checked before Redis, Ray or any actor starts, and before an earlier checkpoint is
    moved aside: a later --resume still finds it."""
    earlier = tmp_path / "checkpoint.pt"
    earlier.write_bytes(b"an earlier run's checkpoint (not a real one)")
    if "WRONG_PASSWORD" in args:
        args = ["--redis-url", redis_url.replace("://:", "://:wrong", 1)]
    start = time.monotonic()
    r = zf("train", "--run-dir", str(tmp_path), *args, timeout=60)
    one_line_error(r, *words)
    assert time.monotonic() - start < 30
    assert earlier.exists() and not list(tmp_path.glob("checkpoint-*.pt"))


def test_sigterm_stops_cleanly_and_pending_actors_are_reported(tmp_path):
    """An evaluator no cluster can hold: a warning at start, status says it is pending and
    why (not alive), and SIGTERM stops the run at once with a final checkpoint, exit 0."""
    run_dir = tmp_path / "run"
    where = ("--run-dir", str(run_dir))
    with TrainProcess(run_dir, "e2e-term", "--set", "distributed.evaluator=true",
                      "--set", "distributed.evaluator_cpus=4096") as train:
        train.wait_for("metrics at http://127.0.0.1:")
        st = train.status_when(lambda st: st["learner_steps"] > 0, 90)
        assert st["learner_steps"] > 0, st
        assert st["alive"]["evaluator"] == 0 and st["desired"]["evaluator"] == 1
        assert st["actor_states"]["evaluator"] == {"pending": 1}, st["actor_states"]
        assert "4096 CPU" in st["waiting"]["evaluator"]
        assert st["alive"]["selfplay"] == 1 and st["error"] == ""
        assert "pending evaluator: 1 waiting for 4096 CPU" in zf("status", *where).stdout
        start = time.monotonic()
        train.proc.send_signal(signal.SIGTERM)
        code = train.wait(timeout=90)
        stop_s = time.monotonic() - start
        assert code == 0, train.output
        out = train.output
        assert stop_s < 45  # no wait for the evaluator that never ran
        assert "stopping (final checkpoint)" in out and "run e2e-term stopped" in out
        assert f"checkpoint in {run_dir / 'checkpoint.pt'}" in out
        [warning] = [x for x in out.splitlines() if "zeroforge train: warning:" in x]
        assert "cannot hold all the asked actors" in warning and "1 evaluator" in warning
        assert "Traceback" not in out
        from zeroforge.learner.learner import load_checkpoint

        saved = load_checkpoint(run_dir / "checkpoint.pt")
        assert saved["counters"]["steps"] > 0
        report(stop_s=stop_s, exit_code=code, pending_reported=st["actor_states"]["evaluator"][
            "pending"], final_checkpoint_games=int(saved["extra"]["games_received"]))


def test_sigint_stops_a_run_a_script_started_in_the_background(tmp_path):
    """A shell without job control (``sh -c``, a script) starts ``cmd &`` with SIGINT
    ignored, and Python keeps it so: ``kill -INT`` did nothing. The run must still stop
    cleanly on SIGINT (final checkpoint, exit 0), as in the foreground."""
    run_dir = tmp_path / "run"
    train = [*ZF, "train", "--local", "--config", "tictactoe", "--minutes", "5",
            "--run-dir", str(run_dir), "--set", "net=tiny",
            "--set", "search.num_simulations=8", "--set", "run.progress_every_s=1",
            "--set", "learner.min_replay=64"]
    script = f"{shlex.join(train)} & echo pid=$!; wait $!"
    proc = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("pid="), first
        pid = int(first.removeprefix("pid="))
        lines = []
        for line in proc.stdout:  # the first progress line after a learner step (a run
            lines.append(line)    # that trained nothing would rightly exit 1)
            steps = re.search(r"\| steps (\d+) \|", line)
            if steps and int(steps[1]) > 0:
                break
        assert not ignores_sigint(pid), "SIGINT still ignored"
        os.kill(pid, signal.SIGINT)
        rest, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    out = "".join(lines) + rest
    assert proc.returncode == 0, out[-3000:]  # `wait $!` passes on the run's exit status
    assert "stopping (final checkpoint)" in out and "Traceback" not in out, out[-3000:]
    assert (run_dir / "checkpoint.pt").exists()


def test_a_run_that_trained_nothing_does_not_exit_0(tmp_path):
    """Limits too short to fill the replay window: the run ends cleanly (games appended,
    checkpoint written), but a job that took no learner step is not a success."""
    r = zf("train", "--local", "--config", "tictactoe", "--minutes", "0.01",
           "--set", "learner.min_replay=100000", "--run-dir", str(tmp_path), timeout=120)
    assert r.returncode == 1, (r.stdout, r.stderr)
    line = r.stderr.strip().splitlines()[-1]
    assert "without one learner step" in line, r.stderr
    assert "did not fill the replay window to learner.min_replay=100000" in line, line


def test_a_local_run_whose_run_dir_fills_up_says_what_it_kept(tmp_path):
    """The run directory (a tmpfs of its own) filled up mid-run (3,000 steps would take
    about 30 s here): the local run stops at the first failed checkpoint write (one log
    line) rather than wait for good at its in-memory stream's backlog limit, the last good
    checkpoint stays byte for byte, and the run ends with one error line, exit 1: its
    final checkpoint was not written, and the games since are lost with the process."""
    from tests.disk import small_disk
    from zeroforge.learner.learner import load_checkpoint

    with small_disk(tmp_path / "run", 64) as disk:
        path = disk.path / "checkpoint.pt"
        train = ZF
        proc = subprocess.Popen(
            [*train, "train", "--local", "--config", "tictactoe", "--steps", "3000",
             "--run-dir", str(disk.path), "--set", "net=tiny", "--set",
             "search.num_simulations=8", "--set", "learner.min_replay=64", "--set",
             "learner.checkpoint_every_s=1", "--set", "evaluation.games=4"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while not path.exists() and proc.poll() is None:
                assert time.monotonic() < deadline, "no first checkpoint"
                time.sleep(0.1)
            disk.fill()
            good = path.read_bytes()  # no write can replace it now
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert path.read_bytes() == good
        kept = load_checkpoint(path)["counters"]["steps"]
    assert proc.returncode == 1, out[-2000:] + err[-2000:]
    assert "Traceback" not in out + err
    [line] = [x for x in err.splitlines() if x.startswith("zeroforge train: error:")]
    assert "the final checkpoint was not written" in line and "No space left" in line
    assert [x for x in (out + err).splitlines() if "checkpoint not written" in x] != []
    assert len([x for x in (out + err).splitlines() if "checkpoint not written" in x]) == 1
    assert kept < 3000
    report(local_run_kept_steps=kept, local_run_error_lines=len([line]))


def test_a_stop_during_the_final_evaluation_skips_it_and_keeps_the_run(tmp_path):
    """The end-of-run evaluation runs after the final checkpoint and can take minutes;
    the log says so, and SIGTERM (or Ctrl-C) then skips it: exit 0, the run's report."""
    run_dir = tmp_path / "run"
    train = [*ZF, "train", "--local", "--config", "tictactoe", "--steps", "5",
            "--run-dir", str(run_dir), "--set", "net=tiny",
            "--set", "search.num_simulations=8", "--set", "learner.min_replay=64",
            "--set", "evaluation.every_s=0", "--set", "evaluation.games=100000"]
    proc = subprocess.Popen(train, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("final evaluation:"):
                break
        said = "".join(lines)
        assert ("final evaluation: 100000 games a match against random, minimax "
                "(the checkpoint is written; Ctrl-C skips this)") in said, said[-3000:]
        time.sleep(1)  # into the evaluation's games
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    out = said + rest
    assert proc.returncode == 0, out[-3000:]
    assert "final evaluation skipped" in rest and "Traceback" not in out, out[-3000:]
    assert f"checkpoint: {run_dir / 'checkpoint.pt'}" in rest
    from zeroforge.learner.learner import load_checkpoint

    assert load_checkpoint(run_dir / "checkpoint.pt")["counters"]["steps"] >= 5
