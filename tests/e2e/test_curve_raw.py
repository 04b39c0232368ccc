"""benchmarks/learn_vs_uct.py --curve --raw as its user runs it: the raw weights of a run
that kept its average apart from self-play (``snapshots/raw/`` and the checkpoint's
``raw_model``) judged like the averaged curve, and a run without them refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.e2e.test_average_vs_raw import BENCH
from tests.unit.test_learner import make_learner, one_hot_game
from zeroforge.learner.learner import CHECKPOINT_NAME
from zeroforge.learner.snapshots import WeightSnapshots
from zeroforge.shared.metrics import Recorder


def averaged_run(run_dir: Path, horizon: int) -> None:
    """A tiny tic-tac-toe learner's run dir: a snapshot after four steps (with its raw twin
    when the learner averages) and the checkpoint."""
    lrn = make_learner(samples_per_insert=0, average_horizon=horizon)
    lrn.add([one_hot_game(lrn.game, 30, s) for s in range(3)])
    lrn.train_available(4)
    raw = lrn.raw_weights if lrn.separate_average else None
    assert WeightSnapshots(run_dir, 1e-9, Recorder()).maybe_write(lrn.weights, raw)
    lrn.save(run_dir / CHECKPOINT_NAME)


def curve(run_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "learn_vs_uct.py", "--config", "tictactoe",
                           "--minutes", "1", "--curve", str(run_dir), "--no-untrained",
                           "--games", "2", "--sims", "8", "--anchor", "random", *args],
                          cwd=BENCH, capture_output=True, text=True, timeout=300)


def test_the_raw_curve_judges_the_raw_snapshots_and_the_checkpoints_raw_weights(tmp_path):
    averaged_run(tmp_path / "run", 160)
    out = tmp_path / "raw.json"
    proc = curve(tmp_path / "run", "--raw", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = json.loads(out.read_text())
    assert table["weights"] == "raw"
    snap, final = table["rows"]
    assert Path(snap["weights"]).parent == tmp_path / "run" / "snapshots" / "raw"
    assert final["label"] == "1 min (final)"
    assert final["weights"] == str(tmp_path / "run" / CHECKPOINT_NAME)
    for row in (snap, final):
        r = row["results"]["random"]
        assert r["wins"] + r["draws"] + r["losses"] == 2
    # the averaged curve of the same run is another table: its file is not mixed in
    proc = curve(tmp_path / "run", "--json", str(out))
    assert proc.returncode != 0 and "was measured differently" in proc.stderr


def test_a_run_without_raw_weights_is_refused_in_one_line(tmp_path):
    averaged_run(tmp_path / "plain", 0)
    proc = curve(tmp_path / "plain", "--raw")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        f"learn_vs_uct: {tmp_path / 'plain'}: no raw snapshots (snapshots/raw/): the run did "
        "not keep its average apart from self-play"]
    # a run that has written no snapshot yet is not said to lack the average
    (tmp_path / "young").mkdir()
    proc = curve(tmp_path / "young", "--raw")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1] == (
        f"learn_vs_uct: {tmp_path / 'young'}: no raw snapshots (snapshots/raw/): no snapshot "
        "written yet (snapshots/)")
    # raw snapshots but a checkpoint without raw weights (a run resumed without averaging)
    averaged_run(tmp_path / "mixed", 160)
    averaged_run(tmp_path / "plain2", 0)
    (tmp_path / "plain2" / CHECKPOINT_NAME).rename(tmp_path / "mixed" / CHECKPOINT_NAME)
    proc = curve(tmp_path / "mixed", "--raw")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1].startswith(
        f"learn_vs_uct: {tmp_path / 'mixed' / CHECKPOINT_NAME}: no raw weights (raw_model)")


def test_only_judges_the_point_nearest_each_minute(tmp_path):
    """A snapshot written a second after the budget and the final checkpoint are both
    within half a minute of it: ``--only 1`` means the final, ``--only 1.02`` the snapshot."""
    run = tmp_path / "run"
    averaged_run(run, 0)
    (snap,) = (run / "snapshots").glob("weights-*.safetensors")
    late = snap.with_name("weights-000061s.safetensors")  # 1.017 min, the budget is 1
    snap.rename(late)
    for only, expected in (("1", [str(run / CHECKPOINT_NAME)]), ("1.02", [str(late)]),
                           ("9", [])):
        out = tmp_path / f"only-{only}.json"
        proc = curve(run, "--only", only, "--json", str(out))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        rows = json.loads(out.read_text())["rows"] if out.exists() else []
        assert [row["weights"] for row in rows] == expected
    both = tmp_path / "both.json"
    assert curve(run, "--only", "1", "1.02", "--json", str(both)).returncode == 0
    assert len(json.loads(both.read_text())["rows"]) == 2


def test_opening_moves_vary_the_games_and_rows_count_the_distinct_ones(tmp_path):
    """Against a net at 0 opening plies both searchers are deterministic: six games are two,
    played three times each, and the rows say so; the default (sampled openings against a
    net) gives more lines. A file of one setting is not continued with the other."""
    run = tmp_path / "run"
    averaged_run(run, 0)
    net = f"net:{run / CHECKPOINT_NAME}"
    tables = {}
    for plies in ("0", None):
        out = tmp_path / f"openings-{plies}.json"
        extra = ["--opening-moves", plies] if plies is not None else []
        proc = curve(run, "--anchor", net, "--games", "6", "--only", "1", "--json", str(out),
                     *extra)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        tables[plies] = json.loads(out.read_text())
    fixed, sampled = (tables[p]["rows"][0]["results"][net] for p in ("0", None))
    assert tables["0"]["opening_moves"] == 0 and "opening_moves" not in tables[None]
    assert (fixed["distinct_games"], fixed["effective_games"]) == (2, 2.0)
    assert sampled["distinct_games"] > 2 and sampled["effective_games"] > 2.0
    proc = curve(run, "--anchor", net, "--games", "6", "--only", "1",
                 "--json", str(tmp_path / "openings-0.json"))
    assert proc.returncode != 0 and "was measured differently" in proc.stderr
    proc = curve(run, "--opening-moves", "-1")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1].endswith(
        "--opening-moves must be 0 or more, got -1")


def test_paired_openings_make_every_game_distinct_without_sampled_moves(tmp_path):
    """Two deterministic searchers (a net against itself, no sampled plies) replay two
    games; with two random plies a pair, six games are three openings from both sides:
    six distinct games. The file keeps the setting."""
    run = tmp_path / "run"
    averaged_run(run, 0)
    net = f"net:{run / CHECKPOINT_NAME}"
    out = tmp_path / "paired.json"
    proc = curve(run, "--anchor", net, "--games", "6", "--only", "1", "--opening-moves", "0",
                 "--paired-openings", "2", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = json.loads(out.read_text())
    assert table["paired_openings"] == 2 and table["opening_moves"] == 0
    result = table["rows"][0]["results"][net]
    assert (result["distinct_games"], result["effective_games"]) == (6, 6.0)
    proc = curve(run, "--paired-openings", "-2")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1].endswith(
        "--paired-openings must be 0 or more, got -2")
