"""``RUN_DIR/best.safetensors``: the evaluated version with the highest lower end of its
ladder interval (actors/best_snapshot.py), against a real ladder fit."""

from __future__ import annotations

import json

import torch

from zeroforge.actors.best_snapshot import BestSnapshot
from zeroforge.shared.formats import load_weights
from zeroforge.shared.players import Ladder


def weights(marker: float) -> dict[str, torch.Tensor]:
    return {"w": torch.full((3,), marker)}


def evaluate(ladder: Ladder, version: int, wins: int, losses: int):
    """Version ``version`` plays ``random``; the refitted ladder."""
    ladder.add_player("random", "anchor", spec="random")
    ladder.add_player(f"v{version}", "version", order=version)
    ladder.add_games(f"v{version}", "random", wins, 0, losses)
    return ladder.refit()


def test_a_version_becomes_the_best_only_when_its_interval_is_surely_higher(tmp_path):
    ladder, best = Ladder(), BestSnapshot(tmp_path)
    assert best.record is None
    fit = evaluate(ladder, 1, 32, 8)
    assert best.consider(1, fit, weights(1.0))
    assert load_weights(tmp_path / "best.safetensors")["w"][0] == 1.0
    # a higher estimate from a few games does not take it: its interval's low end is lower
    fit = evaluate(ladder, 2, 9, 1)
    assert fit.elo["v2"] > fit.elo["v1"] and fit.interval("v2")[0] < fit.interval("v1")[0]
    assert not best.consider(2, fit, weights(2.0))
    assert best.record["version"] == 1
    assert load_weights(tmp_path / "best.safetensors")["w"][0] == 1.0
    # a clearly stronger version does
    assert best.consider(3, evaluate(ladder, 3, 39, 1), weights(3.0))
    record = json.loads((tmp_path / "best.json").read_text())
    assert record["version"] == 3 and record["low"] < record["elo"] < record["high"]
    assert record["anchor"] == "random"
    assert load_weights(tmp_path / "best.safetensors")["w"][0] == 3.0
    # a restarted evaluator goes on from the record
    again = BestSnapshot(tmp_path)
    assert again.record["version"] == 3
    assert not again.consider(4, evaluate(ladder, 4, 20, 20), weights(4.0))


def test_a_bad_record_is_ignored_and_the_next_evaluation_names_a_best(tmp_path):
    (tmp_path / "best.json").write_text("{not json")
    best = BestSnapshot(tmp_path)
    assert best.record is None
    assert best.consider(5, evaluate(Ladder(), 5, 30, 10), weights(5.0))
    assert json.loads((tmp_path / "best.json").read_text())["version"] == 5
    # the record without its weights file is no best either
    (tmp_path / "best.safetensors").unlink()
    assert BestSnapshot(tmp_path).record is None
