"""examples/alphazero_loop.py, the reference loop newcomers start from: it runs as a
script, its learner really trains, and its flags are its ``Args`` fields."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import re
import subprocess
import sys
from pathlib import Path

from zeroforge.learner.learner import load_checkpoint

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "alphazero_loop.py"

TINY = ["--iterations", "2", "--games-per-iteration", "8", "--games-in-parallel", "8",
        "--simulations", "8", "--batch-size", "32", "--min-replay", "16",
        "--eval-every", "2", "--eval-games", "4"]

ITERATION = re.compile(
    r"^iter +(?P<iter>\d+) +games +(?P<games>\d+) +positions +(?P<positions>\d+) +"
    r"steps +(?P<steps>\d+) +loss (?P<loss>\S+) \(policy (?P<policy>\S+) "
    r"value (?P<value>\S+)\) +weights v(?P<version>\d+)(?P<rest>.*)$", re.M)


def load_example(monkeypatch):
    """The example as a module (in ``sys.modules`` for the test, so that ``inspect``
    finds the source of its ``Args``)."""
    spec = importlib.util.spec_from_file_location("alphazero_loop", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_reference_loop_trains_and_reports(tmp_path):
    checkpoint = tmp_path / "loop.pt"
    r = subprocess.run([sys.executable, str(EXAMPLE), *TINY, "--save", str(checkpoint)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    # the untrained baseline, then one line per iteration
    assert re.search(r"^iter +0 +weights v0 +score vs random ", r.stdout, re.M), r.stdout
    rows = [m.groupdict() for m in ITERATION.finditer(r.stdout)]
    assert [int(row["iter"]) for row in rows] == [1, 2], r.stdout
    steps = [int(row["steps"]) for row in rows]
    assert 0 < steps[0] < steps[1], r.stdout
    for i, row in enumerate(rows, 1):
        losses = [float(row[k]) for k in ("loss", "policy", "value")]
        assert all(math.isfinite(x) and x > 0 for x in losses), row
        assert int(row["version"]) == i  # new weights published into the evaluator each time
        assert int(row["games"]) >= 8 * i
    # the last iteration carries the strength check: a score in [0, 1] per opponent
    scores = re.findall(r"vs (\S+) (\S+) \(\+\d+ =\d+ -\d+\)", rows[-1]["rest"])
    assert [spec for spec, _ in scores] == ["random", "minimax"], rows[-1]
    assert all(0.0 <= float(score) <= 1.0 for _, score in scores)
    # the checkpoint is the learner's own, with the counters the lines printed
    counters = load_checkpoint(checkpoint)["counters"]
    assert counters["steps"] == steps[-1] and counters["version"] == 2
    assert counters["games_seen"] == int(rows[-1]["games"])
    assert f"done: {steps[-1]} SGD steps" in r.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["loop.pt"]  # and nothing else


def test_flags_are_the_args_fields(monkeypatch):
    loop = load_example(monkeypatch)
    assert loop.parse_args([]) == loop.Args()
    args = loop.parse_args(["--game", "gomoku6", "--games-per-iteration", "3", "--lr", "0.5"])
    assert (args.game, args.games_per_iteration, args.lr) == ("gomoku6", 3, 0.5)
    docs = loop.field_docs(loop.Args)
    missing = [f.name for f in dataclasses.fields(loop.Args) if not docs.get(f.name)]
    assert not missing, f"fields without a docstring (their --help): {missing}"
