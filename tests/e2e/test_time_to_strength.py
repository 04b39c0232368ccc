"""benchmarks/time_to_strength.py as its user runs it: a real tic-tac-toe run whose
snapshots are evaluated as they appear, stopped once three in a row hold the target; and a
target no snapshot can reach (50% is the best anyone scores against minimax)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from tests.processes import naming
from zeroforge.shared.run_files import snapshot_files

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def bench_cmd(tmp_path: Path, *extra: str) -> list[str]:
    """The script on a small tic-tac-toe run, its runs and rows under ``tmp_path``."""
    return [sys.executable, "time_to_strength.py", "--config", "tictactoe", "--seeds", "0",
            "--snapshot-every", "6", "--games", "4", "--sims", "16", "--label", "t",
            "--out", str(tmp_path / "runs"), "--json", str(tmp_path / "rows.json"), *extra]


STAGED = ("--minutes", "0.6", "--anchor", "minimax", "--target", "0.9", "--eval-after",
          "--train-cpus", "0", "--stages", "0.2", "0.4")
"""A run of 36 s of learner time in three stages (12, 24, 36 s), 6-second snapshots."""


def run_bench(tmp_path: Path, *extra: str) -> tuple[str, dict]:
    proc = subprocess.run(bench_cmd(tmp_path, *extra), cwd=BENCH, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, json.loads((tmp_path / "rows.json").read_text())


def test_stops_the_run_once_three_snapshots_in_a_row_hold_the_target(tmp_path):
    out, data = run_bench(tmp_path, "--minutes", "6", "--anchor", "random",
                          "--target", "0.75")
    (row,) = data["rows"]
    reached = row["minutes_to_target"]
    assert reached is not None and row["hold"] == 3 and data["hold"] == 3
    # the time reported is that of a snapshot the run wrote, the last of the first three
    # in a row whose median score is at the target; the first crossing came no later
    run_dir = tmp_path / "runs" / "t" / "tictactoe-seed0"
    assert any(abs(s / 60 - reached) < 1e-9 for s, _ in snapshot_files(run_dir))
    scores = [p["score"] for p in row["points"]]
    assert row["points"][-1]["minutes"] == reached and len(scores) >= 3
    assert statistics.median(scores[-3:]) >= 0.75
    assert all(statistics.median(scores[end - 3:end]) < 0.75
               for end in range(3, len(scores)))
    first = next(p["minutes"] for p in row["points"] if p["score"] >= 0.75)
    assert row["first_crossing"] == first <= reached
    # stopped there, not at the 6-minute limit: Ctrl-C's clean stop (a run at its limit
    # does not say "stopping") with a final checkpoint
    assert row["run_minutes"] < 6
    # when and under what load it ran, for the table's readers
    assert row["started"].endswith(" UTC") and row["machine"].startswith("machine: ")
    assert len(row["load_end"].split(", ")) == 3
    assert "stopping (final checkpoint)" in (run_dir / "train.log").read_text()
    assert (run_dir / "checkpoint.pt").exists()
    assert f"| tictactoe | {reached:.1f} | {reached:.1f} |" in out


def test_a_target_never_reached_counts_as_more_than_the_limit(tmp_path):
    out, data = run_bench(tmp_path, "--minutes", "0.5", "--anchor", "minimax",
                          "--target", "0.9")
    (row,) = data["rows"]
    assert row["minutes_to_target"] is None
    assert row["points"] and all(p["score"] <= 0.5 for p in row["points"])
    assert "| tictactoe | >0.5 | >0.5 |" in out
    # a second call finds the row in --json and runs nothing again
    again, _ = run_bench(tmp_path, "--minutes", "0.5", "--anchor", "minimax",
                         "--target", "0.9")
    assert "seed 0:" not in again and "| tictactoe | >0.5 | >0.5 |" in again


def test_eval_after_judges_the_snapshots_once_the_whole_run_has_ended(tmp_path):
    """--eval-after: the run lasts its --minutes (no stop at the target), is stopped by
    Ctrl-C without a final evaluation, and then the first three snapshots in a row whose
    median is at the target count (the last of them)."""
    out, data = run_bench(tmp_path, "--minutes", "0.8", "--anchor", "random",
                          "--target", "0.75", "--eval-after", "--train-cpus", "0")
    assert data["eval_after"] is True
    (row,) = data["rows"]
    run_dir = tmp_path / "runs" / "t" / "tictactoe-seed0"
    snapshots = [s / 60 for s, _ in snapshot_files(run_dir)]
    # every snapshot was written before judging began: the run was not cut short
    assert row["run_minutes"] >= 0.8 and len(snapshots) >= 2
    assert "stopping (final checkpoint)" in (run_dir / "train.log").read_text()
    judged = [p["minutes"] for p in row["points"]]
    assert judged == snapshots[:len(judged)]
    if row["minutes_to_target"] is not None:
        assert row["points"][-1]["minutes"] == row["minutes_to_target"]
    scores = [p["score"] for p in row["points"]]
    medians = [statistics.median(scores[end - 3:end]) for end in range(3, len(scores) + 1)]
    if row["minutes_to_target"] is not None:
        assert medians[-1] >= 0.75 and all(m < 0.75 for m in medians[:-1]), scores
    else:
        assert len(judged) == len(snapshots) and all(m < 0.75 for m in medians), scores


def test_judging_on_several_cores_gives_the_serial_scores_in_order(tmp_path):
    """--judge-cpus: the snapshots are scored by children on two cores at once, and the
    row is what judging them one at a time here gives, in snapshot order."""
    # 0.5 minutes of learner time: up to five 6-second snapshots; two at least, one for
    # each core (a CI run beside other heavy work once got only two)
    out, data = run_bench(tmp_path, "--minutes", "0.5", "--anchor", "uct:50",
                          "--target", "1.0", "--eval-after", "--train-cpus", "0",
                          "--judge-cpus", "0", "1")
    (row,) = data["rows"]
    run_dir = tmp_path / "runs" / "t" / "tictactoe-seed0"
    snapshots = snapshot_files(run_dir)
    assert len(snapshots) >= 2, snapshots
    assert f"judging {len(snapshots)} snapshots, a child on each of cores 0 1" in out
    if row["minutes_to_target"] is not None:  # a perfect snapshot ends the judging there
        snapshots = [(s, p) for s, p in snapshots if s / 60 <= row["minutes_to_target"]]
    assert [p["minutes"] for p in row["points"]] == [s / 60 for s, _ in snapshots]
    sys.path.insert(0, str(BENCH))
    import time_to_strength as tts

    args = argparse.Namespace(overrides=[], eval_overrides=[], sims=16, anchor="uct:50",
                              games=4, target=1.0, judge_cpus=None)
    judge = tts.SnapshotJudge(args, "tictactoe", 0, run_dir, tts.SeedResult("tictactoe", 0))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the script judges
    try:
        serial = [judge.score(path) for _, path in snapshots]
    finally:
        torch.set_num_threads(threads)
    # every field the judge gives (the score and the distinct and effective games)
    assert [{k: v for k, v in p.items() if k != "minutes"} for p in row["points"]] == serial
    assert not list(run_dir.glob("snapshots/*.judge.log"))  # each child's output tidied


def test_stages_pause_the_run_and_resume_it_until_the_target_or_the_limit(tmp_path):
    """--eval-after --stages: the run stops at each bound of learner time, its snapshots
    are judged, and it goes on from its checkpoint (--resume) when none reached the
    target: one run's learner clock across the stages, every snapshot judged in order."""
    out, data = run_bench(tmp_path, *STAGED)
    assert data["stages"] == [0.2, 0.4]
    (row,) = data["rows"]
    assert row["minutes_to_target"] is None  # 50% is the best against minimax
    run_dir = tmp_path / "runs" / "t" / "tictactoe-seed0"
    log = (run_dir / "train.log").read_text()
    # three invocations: a fresh start, then two resumes, each stopped by Ctrl-C
    assert log.count("stopping (final checkpoint)") == 3
    assert log.count("resumed from") == 2
    seconds = [s for s, _ in snapshot_files(run_dir)]
    # the learner clock went on across the pauses (no stage started again from 0) and
    # each stage ended at the snapshot nearest its bound, the last one near 0.6 minutes
    assert all(b - a > 3 for a, b in zip(seconds, seconds[1:], strict=False))
    assert 36 - 3 <= seconds[-1] < 36 + 6
    assert any(12 - 3 <= s < 12 + 6 for s in seconds)
    assert [p["minutes"] for p in row["points"]] == [s / 60 for s in seconds]
    assert row["positions_per_s"] > 0 and row["steps_per_s"] > 0
    assert "| tictactoe | >0.6 | >0.6 |" in out


def _stopped_part_way(tmp_path: Path, how: int, resumes: int) -> subprocess.Popen:
    """The staged command of ``run_bench``, stopped by signal ``how`` (to its whole process
    group, as the end of a sitting stops it) once its run has been resumed ``resumes``
    times and has written a snapshot not judged yet."""
    proc = subprocess.Popen(bench_cmd(tmp_path, *STAGED), cwd=BENCH, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    run_dir = tmp_path / "runs" / "t" / "tictactoe-seed0"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        log = run_dir / "train.log"
        if log.is_file() and log.read_text().count("resumed from") >= resumes:
            judged = json.loads((run_dir / "tts-progress.json").read_text())["judged"]
            if any(p.name not in judged for p in (run_dir / "snapshots").iterdir()):
                break
        time.sleep(0.5)
    assert proc.poll() is None, proc.communicate()[0]
    if how == signal.SIGTERM:  # `kill PID`: the script alone, which must stop its run
        proc.send_signal(how)
    else:
        os.killpg(proc.pid, how)
    proc.communicate(timeout=180)
    return proc


def test_a_staged_run_stopped_part_way_goes_on_from_its_progress(tmp_path):
    """Stopped by SIGTERM, the run unwinds like Ctrl-C (the run's clean stop, exit 143, no
    row yet); the same command goes on from the checkpoint. Killed (SIGKILL to the group,
    no clean stop), the snapshots past its last checkpoint are deleted, as the resumed
    learner trains that stretch again. In the end one learner clock, every snapshot judged
    once, in order, and the row says which sittings it took."""
    run_dir = tmp_path / "runs" / "t" / "tictactoe-seed0"
    proc = _stopped_part_way(tmp_path, signal.SIGTERM, resumes=1)
    assert proc.returncode == 143
    # the script alone got the signal, and its run stopped with it (no orphan training on)
    assert [" ".join(p.info["cmdline"]) for p in naming(str(run_dir))] == []
    assert not (tmp_path / "rows.json").exists()
    proc = _stopped_part_way(tmp_path, signal.SIGKILL, resumes=2)
    assert proc.returncode == -signal.SIGKILL
    out, data = run_bench(tmp_path, *STAGED)
    (row,) = data["rows"]
    assert "going on from tts-progress.json" in out
    assert len(row["resumed"]) == 2 and row["resumed"][0].startswith("machine: ")
    seconds = [s for s, _ in snapshot_files(run_dir)]
    assert all(b - a > 3 for a, b in zip(seconds, seconds[1:], strict=False))
    assert [p["minutes"] for p in row["points"]] == [s / 60 for s in seconds]
    assert 36 - 3 <= seconds[-1] < 36 + 6 and row["minutes_to_target"] is None
    assert row["run_minutes"] > 0.4 and row["positions_per_s"] > 0
    assert (run_dir / "train.log").read_text().count("resumed from") >= 3
