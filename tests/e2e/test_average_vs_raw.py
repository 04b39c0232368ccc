"""benchmarks/average_vs_raw.py as its user runs it: a checkpoint's averaged model plays
its raw model (a tiny tic-tac-toe learner that averaged), and a checkpoint of a run that
did not average is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.unit.test_learner import make_learner, one_hot_game
from zeroforge.learner.learner import CHECKPOINT_NAME

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def checkpoint(run_dir: Path, **learner: object) -> None:
    """A tic-tac-toe learner (the preset's tiny net) after four steps, saved in ``run_dir``."""
    lrn = make_learner(samples_per_insert=0, **learner)
    lrn.add([one_hot_game(lrn.game, 30, s) for s in range(3)])
    lrn.train_available(4)
    lrn.save(run_dir / CHECKPOINT_NAME)


def average_vs_raw(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "average_vs_raw.py", "--config", "tictactoe",
                           "--games", "4", "--sims", "8", *args], cwd=BENCH,
                          capture_output=True, text=True, timeout=300)


def test_the_average_plays_the_raw_weights_of_the_same_checkpoint(tmp_path):
    checkpoint(tmp_path / "run", average_horizon=160)
    out = tmp_path / "rows.json"
    proc = average_vs_raw("--run", f"{tmp_path / 'run'}:7", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (row,) = json.loads(out.read_text())["rows"]
    assert (row["seed"], row["steps"], row["averaged_steps"]) == (7, 4, 4)
    assert row["wins"] + row["draws"] + row["losses"] == 4
    assert row["score"] == (row["wins"] + row["draws"] / 2) / 4
    # as every judge's row: how many of the games were distinct, and their effective size
    assert 1 <= row["distinct_games"] <= 4 and 1 <= row["effective_games"] <= 4
    assert f"| run | 7 | 4 | {row['score']:.0%} (+{row['wins']}" in proc.stdout


def test_a_run_that_did_not_average_is_refused_in_one_line(tmp_path):
    checkpoint(tmp_path / "plain")
    proc = average_vs_raw("--run", f"{tmp_path / 'plain'}:0")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        f"average_vs_raw: {tmp_path / 'plain' / CHECKPOINT_NAME}: no raw_model (the run did "
        "not average: learner.average_horizon was 0)"]
    proc = average_vs_raw("--run", str(tmp_path / "plain"))
    assert proc.returncode != 0 and "expected DIR:SEED" in proc.stderr
