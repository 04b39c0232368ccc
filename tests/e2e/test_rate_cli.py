"""``zeroforge rate`` as a user runs it, on a tiny run dir with two weight snapshots: games
played between the chosen pairs, the ladder saved and shown with intervals, a plot; and one
line (exit 1) for each run dir it cannot rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.e2e.test_cli import zf
from zeroforge.actors.config import EvaluationConfig
from zeroforge.deploy.config import TrainConfig
from zeroforge.deploy.rating.rate import figure
from zeroforge.shared.config import to_dict
from zeroforge.shared.formats import save_weights
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import NetConfig, build_net
from zeroforge.shared.players import load_ladder
from zeroforge.shared.run_files import RunFiles, snapshot_path
from zeroforge.shared.search import SearchConfig

SNAPSHOTS = (30, 90)


def make_run(run_dir: Path, snapshots: tuple[int, ...] = SNAPSHOTS) -> TrainConfig:
    """A run dir as a run leaves it: config.yaml and weight snapshots (tiny random nets)."""
    config = TrainConfig(game="tictactoe", net=NetConfig.preset("tiny"),
                         search=SearchConfig(num_simulations=4),
                         evaluation=EvaluationConfig(anchors=("random", "uct:8")))
    RunFiles(run_dir).write_config(to_dict(config))
    for i, seconds in enumerate(snapshots):
        torch.manual_seed(i)
        path = snapshot_path(run_dir, seconds)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_weights(build_net(config.net, make_game(config.game).spec), path)
    return config


def test_rate_plays_the_chosen_pairs_and_shows_the_ladder(tmp_path):
    run_dir = tmp_path / "run"
    make_run(run_dir)
    plot = tmp_path / "pictures" / "ladder.png"
    r = zf("rate", str(run_dir), "--games", "24", "--per-pair", "6", "--plot", str(plot),
           timeout=300)
    assert r.returncode == 0, r.stderr
    played = [line for line in r.stdout.splitlines() if " vs " in line]
    assert len(played) == 4  # 24 games in batches of 6
    names = {"weights-000030s", "weights-000090s", "random", "uct:8"}
    lad = load_ladder(run_dir)
    assert set(lad.players) == names
    assert sum(sum(cell) for cell in lad.results.values()) == 24
    # the first choices chain both newcomers to the ladder (anchor, then the neighbour)
    assert played[0].startswith("weights-000030s vs random")
    assert played[1].startswith("weights-000090s vs weights-000030s")
    # the table: every rated player with its Elo, interval and games, the anchor at 0
    fit = lad.refit()
    table = r.stdout[r.stdout.index("player "):r.stdout.index("\n(Bradley-Terry")]
    for name in fit.elo:
        row = next(line for line in table.splitlines() if line.startswith(name + " "))
        cells = row.split()
        assert float(cells[2]) == pytest.approx(fit.elo[name], abs=0.51)
        assert int(cells[4]) == int(fit.games[name])
        assert float(cells[5]) == pytest.approx(fit.effective[name], abs=0.051)
        assert 1 <= fit.effective[name] <= fit.games[name]
        if name != "random":
            low, high = fit.interval(name)
            assert float(cells[3]) == pytest.approx((high - low) / 2, abs=0.51)
    assert "random = 0" in r.stdout and f"wrote {plot}" in r.stdout
    assert plot.read_bytes()[:4] == b"\x89PNG"
    drawn = {ln.get_gid() for ax in figure(fit, lad).axes for ln in ax.get_lines()}
    assert set(fit.elo) <= drawn
    data = json.loads((run_dir / "ladder.json").read_text())
    assert {r_["name"] for r_ in data["fit"]["ratings"]} == set(fit.elo)

    # --no-play fits what is recorded: the same ratings, no games
    again = zf("rate", str(run_dir), "--no-play", timeout=120)
    assert again.returncode == 0, again.stderr
    assert " vs " not in again.stdout and table in again.stdout
    assert sum(sum(c) for c in load_ladder(run_dir).results.values()) == 24


@pytest.mark.parametrize("case, expected", [
    ("missing", "no such run directory"),
    ("no_config", "no config.yaml"),
    ("no_snapshots", "nothing to rate: no weight snapshots"),
    ("corrupt", "kept aside as ladder-corrupt-"),
    ("bad_plot", "--plot"),
    ("bad_anchor", "unknown player 'robot'"),
    ("bad_scale", "--anchor nobody: not a player"),
])
def test_what_cannot_be_rated_is_one_line(tmp_path, case, expected):
    run_dir = tmp_path / "run"
    extra: list[str] = ["--no-play"]
    if case == "no_config":
        run_dir.mkdir()
    elif case == "no_snapshots":
        make_run(run_dir, ())
    elif case != "missing":
        make_run(run_dir, (30,))
    if case == "corrupt":
        (run_dir / "ladder.json").write_text("{\"format\": 1, \"players\": [")
    elif case == "bad_plot":
        extra += ["--plot", str(tmp_path / "x.jpeg")]
    elif case == "bad_anchor":
        extra += ["--anchors", "random", "robot"]
    elif case == "bad_scale":
        extra += ["--anchor", "nobody"]
    r = zf("rate", str(run_dir), *extra)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.startswith("zeroforge rate: error: ") and expected in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    if case == "corrupt":
        kept = list(run_dir.glob("ladder-corrupt-*.json"))
        assert len(kept) == 1 and kept[0].read_text().startswith("{\"format\": 1")
        again = zf("rate", str(run_dir), "--no-play")  # the next rate starts a new ladder
        assert again.returncode == 0, again.stderr
