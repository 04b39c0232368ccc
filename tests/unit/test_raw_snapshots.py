"""Raw snapshots beside averaged ones: a learner that keeps its average apart from
self-play writes each snapshot twice (the average under ``snapshots/``, the raw weights
under ``snapshots/raw/`` by the same name), both or neither; players load either, and a
checkpoint's raw weights on request."""

from __future__ import annotations

import pytest
import torch
import yaml

from tests.unit.test_learner import make_learner, one_hot_game
from zeroforge.learner.learner import Learner
from zeroforge.learner.snapshots import WeightSnapshots
from zeroforge.shared.config import to_dict
from zeroforge.shared.formats import load_weights
from zeroforge.shared.metrics import Recorder, snapshot_total
from zeroforge.shared.players import load_net
from zeroforge.shared.run_files import snapshot_files, snapshot_path


def equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def averaging_learner(horizon: int = 160) -> Learner:
    """A learner that has trained a few steps, so its raw weights differ from their
    average (with ``horizon``)."""
    learner = make_learner(samples_per_insert=0, average_horizon=horizon)
    learner.add([one_hot_game(learner.game, 30, s) for s in range(3)])
    learner.train_available(4)
    return learner


def test_raw_snapshots_have_their_own_folder_and_listing(tmp_path):
    assert snapshot_path(tmp_path, 60, raw=True) == (
        tmp_path / "snapshots" / "raw" / "weights-000060s.safetensors")
    for raw in (False, True, True):
        path = snapshot_path(tmp_path, 60 if raw else 90, raw=raw)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    assert [p.name for _, p in snapshot_files(tmp_path)] == ["weights-000090s.safetensors"]
    assert [(s, p.parent.name) for s, p in snapshot_files(tmp_path, raw=True)] == [
        (60, "raw")]


def test_a_snapshot_is_the_average_and_its_raw_twin_the_raw_weights(tmp_path):
    learner = averaging_learner()
    assert learner.separate_average and not equal(learner.weights(), learner.raw_weights())
    snaps = WeightSnapshots(tmp_path, 1e-9, Recorder())
    written = snaps.maybe_write(learner.weights, learner.raw_weights)
    assert written is not None
    (seconds, average), = snapshot_files(tmp_path)
    (raw_seconds, raw), = snapshot_files(tmp_path, raw=True)
    assert written == average and seconds == raw_seconds and raw.name == average.name
    assert equal(load_weights(average), learner.weights())
    assert equal(load_weights(raw), learner.raw_weights())
    # a learner that averages for self-play too (or not at all) writes no raw twin
    WeightSnapshots(tmp_path / "plain", 1e-9, Recorder()).maybe_write(learner.weights)
    assert snapshot_files(tmp_path / "plain")
    assert not (tmp_path / "plain" / "snapshots" / "raw").exists()


def test_a_failed_raw_write_leaves_neither_file_and_is_counted(tmp_path, caplog):
    learner = averaging_learner()
    recorder = Recorder()
    snaps = WeightSnapshots(tmp_path, 1e-9, recorder)

    def full_disk() -> dict[str, torch.Tensor]:
        raise OSError(28, "No space left on device")
    with caplog.at_level("ERROR"):
        assert snaps.maybe_write(learner.weights, full_disk) is None
    assert snapshot_files(tmp_path) == [] and snapshot_files(tmp_path, raw=True) == []
    assert snapshot_total(recorder.snapshot(), "learner_save_failures_total") == 1
    assert "not written (skipped)" in caplog.text
    assert snaps.maybe_write(learner.weights, learner.raw_weights) is not None  # next time


def test_players_load_a_raw_snapshot_by_its_run_and_a_checkpoint_raw_on_request(tmp_path):
    learner = averaging_learner()
    game = learner.game
    run = tmp_path / "run"
    snaps = WeightSnapshots(run, 1e-9, Recorder())
    snaps.maybe_write(learner.weights, learner.raw_weights)
    (run / "config.yaml").write_text(yaml.safe_dump({"game": game.spec.spec_string,
                                                    "net": to_dict(learner.net_config)}))
    (_, raw), = snapshot_files(run, raw=True)
    assert equal(load_net(raw, game).state_dict(), learner.raw_weights())  # net: the run's

    checkpoint = learner.save(tmp_path / "checkpoint.pt")
    assert equal(load_net(checkpoint, game).state_dict(), learner.weights())
    assert equal(load_net(checkpoint, game, raw=True).state_dict(), learner.raw_weights())
    plain = averaging_learner(horizon=0).save(tmp_path / "plain.pt")
    with pytest.raises(ValueError, match="no raw weights"):
        load_net(plain, game, raw=True)
