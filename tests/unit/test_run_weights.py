"""benchmarks/run_weights.py: a run's config, last snapshots and final checkpoint's weights
as a small run directory (what a lent GPU machine sends back to be judged here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

from zeroforge.learner.learner import CHECKPOINT_NAME, Learner, LearnerConfig
from zeroforge.shared.formats import load_weights, save_weights
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import NetConfig, build_net
from zeroforge.shared.players import load_net
from zeroforge.shared.run_files import CONFIG_NAME, snapshot_files, snapshot_path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "run_weights.py"


def run_weights(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def a_run(run_dir: Path, snapshots: list[int], trained_s: float | None) -> Learner:
    """A tic-tac-toe run directory: its config, snapshots of random nets at these seconds
    and a checkpoint of another net (a learner service's ``trained_s`` in its extra)."""
    run_dir.mkdir(parents=True)
    (run_dir / CONFIG_NAME).write_text("game: tictactoe\nnet: tiny\n")
    for seconds in snapshots:
        path = snapshot_path(run_dir, seconds)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_weights(build_net(NetConfig.preset("tiny"), make_game("tictactoe").spec), path)
    learner = Learner(LearnerConfig(replay_capacity=16, device="cpu"), "tictactoe",
                      NetConfig.preset("tiny"))
    extra = {} if trained_s is None else {"trained_s": trained_s}
    learner.save(run_dir / CHECKPOINT_NAME, extra)
    return learner


def test_the_last_snapshots_and_the_final_weights_after_them(tmp_path: Path) -> None:
    learner = a_run(tmp_path / "run", [60, 120, 180], trained_s=200.4)
    r = run_weights(tmp_path / "run", tmp_path / "small", "--snapshots", "2")
    assert r.returncode == 0, r.stderr
    assert "weights-000200s.safetensors" in r.stdout and "\n" not in r.stdout.strip()
    kept = snapshot_files(tmp_path / "small")
    assert [s for s, _ in kept] == [120, 180, 200]
    assert kept[1][1].read_bytes() == snapshot_path(tmp_path / "run", 180).read_bytes()
    final = load_weights(kept[-1][1])
    assert all(torch.equal(final[k], v) for k, v in learner.weights().items())
    assert (tmp_path / "small" / CONFIG_NAME).read_text() == "game: tictactoe\nnet: tiny\n"
    assert not (tmp_path / "small" / CHECKPOINT_NAME).exists()
    load_net(kept[-1][1], make_game("tictactoe"))  # its shape from the copied config


def test_a_final_saved_in_a_snapshot_s_second_comes_after_it(tmp_path: Path) -> None:
    """A local run's checkpoint has no ``trained_s`` (its run_seconds name it) and may be
    saved in the second of the run's last snapshot: it must not overwrite that one."""
    a_run(tmp_path / "run", [0], trained_s=None)  # run_seconds 0 in a fresh learner
    r = run_weights(tmp_path / "run", tmp_path / "small", "--snapshots", "1")
    assert r.returncode == 0, r.stderr
    assert [s for s, _ in snapshot_files(tmp_path / "small")] == [0, 1]


def test_a_folder_that_is_no_run_is_one_line(tmp_path: Path) -> None:
    r = run_weights(tmp_path, tmp_path / "small")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("run_weights: ") and r.stderr.count("\n") == 1
    assert f"{tmp_path / CONFIG_NAME}: not there" in r.stderr
    assert not (tmp_path / "small").exists()
