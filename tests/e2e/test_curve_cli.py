"""``zeroforge curve`` as a user runs it: the learning curve of a real local run, and one
line (exit 1, no traceback) for each run dir that holds nothing to draw."""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_cli import zf
from zeroforge.deploy import curve
from zeroforge.shared.formats import read_sgf_file, replay
from zeroforge.shared.players import load_ladder

TINY_LOCAL = ["--set", "net=tiny", "--set", "search.num_simulations=12",
              "--set", "selfplay.games_in_parallel=8", "--set", "learner.min_replay=64",
              "--set", "learner.batch_size=32", "--set", "evaluation.games=4",
              "--set", "evaluation.every_s=3", "--set", "run.progress_every_s=5",
              "--set", "run.metrics_port=0"]


def test_curve_of_a_real_local_run(tmp_path):
    run_dir = tmp_path / "run"
    r = zf("train", "--local", "--config", "tictactoe", "--minutes", "0.2", "--seed", "2",
           "--run-dir", str(run_dir), "--run-id", "curve-e2e", *TINY_LOCAL,
           "--set", "selfplay.record_every=5", timeout=300)
    assert r.returncode == 0, r.stderr
    entries = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
    assert len(entries) >= 2  # one every 3 s of a 12 s run, and the final one
    check_records_and_ladder(run_dir, entries)

    r = zf("curve", str(run_dir))
    assert r.returncode == 0, r.stderr
    png = run_dir / "curve.png"
    assert r.stdout.startswith(f"wrote {png}: {len(entries)} evaluations")
    assert png.read_bytes()[:4] == b"\x89PNG"

    svg = tmp_path / "pictures" / "curve.svg"
    r = zf("curve", str(run_dir), "-o", str(svg), "--x", "version")
    assert r.returncode == 0 and svg.exists(), r.stderr
    # what was drawn: the same log read back, a point per evaluation and anchor
    fig = curve.figure(curve.read_eval_log(run_dir), x="version")
    lines = {ln.get_gid(): ln.get_xydata() for ax in fig.axes for ln in ax.get_lines()
             if ln.get_gid()}
    assert set(lines) == {f"{part}:{a}" for part in ("score", "elo")
                          for a in ("random", "minimax")}
    assert [x for x, _ in lines["score:random"]] == [e["weights_version"] for e in entries]
    assert all(f"score:{a}" in svg.read_text() for a in ("random", "minimax"))
    # learner steps from the run's own history (RUN_DIR/history.jsonl), rising with versions
    r = zf("curve", str(run_dir), "-o", str(tmp_path / "steps.pdf"), "--x", "steps")
    assert r.returncode == 0 and (tmp_path / "steps.pdf").read_bytes()[:5] == b"%PDF-", r.stderr
    steps = [p.steps for p in curve.read_eval_log(run_dir).points]
    assert all(s is not None for s in steps) and steps == sorted(steps), steps


def check_records_and_ladder(run_dir, entries: list[dict]) -> None:
    """The same run's game records (every evaluation game, 1 in 5 self-play games) read
    back and replay to their recorded results; its ladder rates every evaluated version;
    ``zeroforge replay`` and ``zeroforge rate --no-play`` show them."""
    evals = sorted((run_dir / "games" / "eval").glob("*.sgf"))
    assert len(evals) == sum(a["games"] for e in entries for a in e["anchors"].values())
    selfplay = sorted((run_dir / "games" / "selfplay").glob("*.sgf"))
    assert selfplay  # hundreds of games in 12 s: dozens sampled
    for path in [*evals, *selfplay]:
        (record,) = read_sgf_file(path)
        assert record.result is not None and replay(record).outcome == record.result, path
    for e in entries:
        for anchor, a in e["anchors"].items():
            if anchor != "best":
                assert len(list((run_dir / "games" / "eval").glob(
                    f"v{e['weights_version']}-{anchor}-*.sgf"))) == a["games"]
    ladder = load_ladder(run_dir)
    assert {f"v{e['weights_version']}" for e in entries} | {"random", "minimax"} \
        == set(ladder.players)
    r = zf("replay", str(evals[0]))
    assert r.returncode == 0 and r.stdout.rstrip().endswith("(as recorded)"), r.stderr
    r = zf("rate", str(run_dir), "--no-play")
    assert r.returncode == 0, r.stderr
    newest = f"v{entries[-1]['weights_version']}"
    assert any(line.startswith(newest + " ") for line in r.stdout.splitlines()), r.stdout


@pytest.mark.parametrize("case, expected", [
    ("missing", "no such run directory"),
    ("file", "not a directory"),
    ("no_log", "no eval.jsonl"),
    ("empty", "is empty"),
    ("corrupt", "no line is an evaluation record"),
    ("bad_out", "must end in .png, .svg, .pdf"),
])
def test_nothing_to_draw_is_one_line(tmp_path, case, expected):
    run_dir = tmp_path / "run"
    extra: list[str] = []
    if case == "file":
        run_dir.write_text("x")
    elif case != "missing":
        run_dir.mkdir()
    log = run_dir / "eval.jsonl"
    if case == "empty":
        log.write_text("")
    elif case == "corrupt":
        log.write_bytes(b"\x00\x01garbage\n{\"half\": ")
    elif case == "bad_out":
        log.write_text(json.dumps({"time": 1.0, "elapsed_s": 1.0, "weights_version": 1,
                                   "score": {"random": 1.0}}) + "\n")
        extra = ["-o", str(tmp_path / "curve.jpeg")]
    r = zf("curve", str(run_dir), *extra)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.startswith("zeroforge curve: error: ") and expected in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert r.stdout == ""
