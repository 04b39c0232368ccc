"""`zeroforge train --local` on two board sizes (``selfplay.board_sizes``), as a user runs
it: self-play plays both, the learner's window holds both and trains on both, evaluation
stays at the run's own size, and ``--resume`` continues with the mixed window."""

from __future__ import annotations

import json

from tests.e2e.test_cli import zf
from zeroforge.learner.learner import load_checkpoint

CONFIG = """\
game: go:size=7,obs=features
net:
  preset: go_cpu
  channels: 16
  blocks: 2
  global_pool_every: 2
  pool_channels: 4
  policy_channels: 4
  value_channels: 4
  value_hidden: [16]
search:
  num_simulations: 8
selfplay:
  games_in_parallel: 8
  board_sizes: [5, 7]
  record_every: 1
learner:
  min_replay: 64
  batch_size: 32
evaluation:
  games: 2
  anchors: [random]
run:
  progress_every_s: 1
"""


def test_a_local_run_on_two_board_sizes_trains_both_and_resumes(tmp_path):
    config, run_dir = tmp_path / "sizes.yaml", tmp_path / "run"
    config.write_text(CONFIG)
    r = zf("train", "--local", "--config", str(config), "--steps", "30", "--run-dir",
           str(run_dir), timeout=600)
    assert r.returncode == 0, r.stderr
    assert "score vs random" in r.stdout and "checkpoint:" in r.stdout
    blob = load_checkpoint(run_dir / "checkpoint.pt")
    assert blob["game"] == "go:size=7,komi=7.5,ko=superko,obs=features"
    replay = blob["replay"]
    # the evaluation size's part under the plain keys, the other size's beside it
    assert tuple(replay["obs"].shape[2:]) == (7, 7) and len(replay["obs"]) > 0
    assert tuple(replay["size5.obs"].shape[2:]) == (5, 5) and len(replay["size5.obs"]) > 0
    assert replay["size5.policy"].shape[1] == 26 and replay["policy"].shape[1] == 50
    first = blob["counters"]
    assert first["steps"] >= 30
    assert {k for k, n in first["batches_by_size"].items() if n > 0} == {"5", "7"}
    # games of both sizes were played (SGF records of every game), evaluation at 7x7
    records = [p.read_text() for p in (run_dir / "games" / "selfplay").glob("*.sgf")]
    assert any("SZ[5]" in t for t in records) and any("SZ[7]" in t for t in records)
    evaluated = [p.read_text() for p in (run_dir / "games" / "eval").glob("*.sgf")]
    assert evaluated and all("SZ[7]" in t for t in evaluated)
    # the run's status shows the mix
    status = json.loads((run_dir / "status.json").read_text())
    assert set(status["replay_by_size"]) == {"5", "7"}
    assert sum(status["replay_by_size"].values()) == status["replay_positions"]
    assert set(status["batches_by_size"]) == {"5", "7"}

    r = zf("train", "--local", "--config", str(config), "--steps", "45", "--run-dir",
           str(run_dir), "--resume", timeout=600)
    assert r.returncode == 0, r.stderr
    assert f"resumed from {run_dir / 'checkpoint.pt'}: step {first['steps']}" in r.stdout
    second = load_checkpoint(run_dir / "checkpoint.pt")
    assert second["counters"]["steps"] >= 45
    assert second["counters"]["games_seen"] > first["games_seen"]
    for size, n in first["batches_by_size"].items():
        assert second["counters"]["batches_by_size"][size] >= n
    assert int(second["replay"]["size5.inserted"]) >= int(replay["size5.inserted"])
    assert int(second["replay"]["inserted"]) >= int(replay["inserted"])
