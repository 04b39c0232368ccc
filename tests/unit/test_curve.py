"""The learning curve of a run (deploy/curve.py): read from the evaluation log a real run
recorded, drawn with one line per anchor and a point per evaluation, and a one-line error
for each way the run dir or its log can hold nothing to draw.

``data/run-tictactoe/`` holds ``eval.jsonl`` and ``history.jsonl`` of a real run:
``zeroforge train --local --config tictactoe --minutes 0.5 --seed 1`` with a tiny net, 16
simulations, 10 games per anchor and an evaluation every 4 s (7 evaluations, anchors random
and minimax plus the gate match ``best``; the metric history sampled every 2 s)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from zeroforge.deploy import curve

RECORDED_RUN = Path(__file__).resolve().parent / "data" / "run-tictactoe"
RECORDED = RECORDED_RUN / "eval.jsonl"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(RECORDED_RUN, run)
    return run


def _recorded() -> list[dict]:
    return [json.loads(line) for line in RECORDED.read_text().splitlines()]


def _lines(fig, prefix: str) -> dict[str, list[tuple[float, float]]]:
    return {line.get_gid().removeprefix(prefix): [tuple(p) for p in line.get_xydata()]
            for ax in fig.axes for line in ax.get_lines()
            if (line.get_gid() or "").startswith(prefix)}


def test_recorded_run_has_a_point_per_evaluation_and_anchor(run_dir):
    recorded = _recorded()
    drawn = curve.read_eval_log(run_dir)
    assert drawn.anchors == ("minimax", "random")  # the gate match "best" is left out
    assert len(drawn.points) == len(recorded) == 7 and drawn.skipped == 0
    fig = curve.figure(drawn)
    scores, elos = _lines(fig, "score:"), _lines(fig, "elo:")
    assert set(scores) == set(elos) == {"minimax", "random"}
    for anchor in ("minimax", "random"):
        assert [y for _, y in scores[anchor]] == [e["score"][anchor] for e in recorded]
        xs = [x for x, _ in scores[anchor]]
        assert xs == sorted(xs) and xs[0] > 0 and xs[-1] < 1.0  # a 0.5-minute run
        assert [x for x, _ in elos[anchor]] == xs
        assert [y for _, y in elos[anchor]] == [curve.implied_elo(e["score"][anchor])
                                                for e in recorded]
    # the wall clock is measured from the run's start, not from the first evaluation
    first = recorded[0]
    assert xs[0] == pytest.approx(first["elapsed_s"] / 60, abs=0.01)


def test_png_and_svg_are_written(run_dir, tmp_path):
    drawn = curve.read_eval_log(run_dir)
    png = curve.save(curve.figure(drawn), tmp_path / "out" / "curve.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    fig = curve.figure(drawn, x="version")
    svg = curve.save(fig, tmp_path / "curve.svg")
    root = ET.parse(svg).getroot()
    ids = {el.get("id") for el in root.iter()}
    assert {"score:minimax", "score:random", "elo:minimax", "elo:random"} <= ids
    versions = [e["weights_version"] for e in _recorded()]
    assert [x for x, _ in _lines(fig, "score:")["random"]] == versions
    assert fig.axes[1].get_xlabel() == "weights version"


def _published_steps() -> dict[int, float]:
    """Learner steps at the first history sample showing each version, read here from the
    file's own layout (a header, then lines of changed values carried forward)."""
    lines = (RECORDED_RUN / "history.jsonl").read_text().splitlines()[1:]
    current: dict[str, float] = {}
    out: dict[int, float] = {}
    for line in lines:
        current.update(json.loads(line)["v"])
        out.setdefault(int(current['weights_version{component="learner"}']),
                       current["learner_steps_total"])
    return out


def test_steps_axis_comes_from_the_run_history(run_dir, tmp_path):
    published = _published_steps()
    expected = [published[min(v for v in published if v >= e["weights_version"])]
                for e in _recorded()]
    assert expected == sorted(expected) and expected[0] > 0
    fig = curve.figure(curve.read_eval_log(run_dir), x="steps")
    assert [x for x, _ in _lines(fig, "score:")["minimax"]] == expected
    assert fig.axes[1].get_xlabel().startswith("learner steps")
    # a run from before the dashboard has no history: no steps axis, one clear line
    (run_dir / "history.jsonl").unlink()
    with pytest.raises(curve.CurveError, match="no point of the curve has steps .*history"):
        curve.figure(curve.read_eval_log(run_dir), x="steps")


def test_implied_elo_is_clipped_and_symmetric():
    assert curve.implied_elo(0.5) == 0.0
    assert curve.implied_elo(1.0) == curve.ELO_CLIP and curve.implied_elo(0.0) == -curve.ELO_CLIP
    assert curve.implied_elo(0.75) == pytest.approx(190.85, abs=0.01)
    assert curve.implied_elo(0.25) == pytest.approx(-curve.implied_elo(0.75))


def test_torn_lines_are_skipped_and_counted(run_dir):
    log = run_dir / "eval.jsonl"
    lines = log.read_text().splitlines()
    lines.insert(3, lines[3][:40])  # a run killed mid-write, then restarted
    log.write_text("\n".join(lines) + "\n" + lines[0][:25])
    drawn = curve.read_eval_log(run_dir)
    assert len(drawn.points) == 7 and drawn.skipped == 2
    assert "2 unreadable line(s) skipped" in curve.summary(drawn)


@pytest.mark.parametrize("content, expected", [
    (None, "no eval.jsonl"),
    ("", "is empty"),
    ("\n \n", "is empty"),
    ("not json\n{broken", "no line is an evaluation record (line 1"),
    ('[1, 2]\n{"time": 5}\n', "no line is an evaluation record (line 1"),
    ('{"time": 5, "score": {"random": 1.5}}\n', "no line is an evaluation record"),
    ('{"time": 5, "score": {"best": 0.5}}\n', "name no anchor besides 'best'"),
])
def test_nothing_to_draw_is_one_clear_line(tmp_path, content, expected):
    if content is not None:
        (tmp_path / "eval.jsonl").write_text(content)
    with pytest.raises(curve.CurveError, match=expected.replace("(", r"\(")) as err:
        curve.read_eval_log(tmp_path)
    assert "\n" not in str(err.value) and str(tmp_path) in str(err.value)


def test_missing_run_dir_and_bad_picture_name(tmp_path, run_dir):
    with pytest.raises(curve.CurveError, match="no such run directory"):
        curve.read_eval_log(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(curve.CurveError, match="not a directory"):
        curve.read_eval_log(tmp_path / "file")
    with pytest.raises(curve.CurveError, match=r"must end in \.png"):
        curve.write(curve.read_eval_log(run_dir), tmp_path / "curve.gif")
    assert not (tmp_path / "curve.gif").exists()
