"""The run record: file names, snapshots of old and new runs, the evaluation log."""

from __future__ import annotations

import yaml

from zeroforge.shared.run_files import RunFiles, snapshot_files, snapshot_path


def test_snapshot_names_sort_by_time_and_old_names_are_found(tmp_path):
    assert snapshot_path(tmp_path, 59.9).name == "weights-000059s.safetensors"
    folder = tmp_path / "snapshots"
    folder.mkdir()
    for name in ("weights-000900s.safetensors", "weights-000060s.pt", "weights-x.pt",
                 "notes.txt", "weights-000300s.tmp"):
        (folder / name).write_bytes(b"")
    assert [(s, p.name) for s, p in snapshot_files(tmp_path)] == [
        (60, "weights-000060s.pt"), (900, "weights-000900s.safetensors")]


def test_config_and_evaluations_round_trip(tmp_path):
    record = RunFiles(tmp_path / "run")
    path = record.write_config({"game": "tictactoe", "learner": {"lr": 0.01}})
    assert yaml.safe_load(path.read_text()) == {"game": "tictactoe", "learner": {"lr": 0.01}}
    assert record.evals() == []
    record.append_eval({"weights_version": 1, "score": {"random": 0.75}})
    with open(tmp_path / "run" / "eval.jsonl", "a") as f:
        f.write('{"weights_version": 2, "sco')  # a run killed mid-write
    record.append_eval({"weights_version": 3, "score": {}})
    assert [e["weights_version"] for e in record.evals()] == [1, 3]
