"""The benchmark's learning-curve picture (benchmarks/plot_curve.py, drawn by
deploy/curve.py): one line per anchor, points placed by minutes and score (read from the
figure's data), and a clear error for a curve with nothing to draw."""

import importlib.util
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from zeroforge.deploy import curve

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "plot_curve.py"
_spec = importlib.util.spec_from_file_location("plot_curve", _PATH)
plot_curve = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plot_curve)


def _curve(rows):
    return {"game": "gomoku8", "games": 50, "anchors": ["uct:1000", "uctsolver:1000"],
            "rows": [{"minutes": m, "results": {a: {"score": s} for a, s in scores.items()}}
                     for m, scores in rows]}


def _series(drawn, prefix: str = "score:") -> dict[str, list[tuple[float, float]]]:
    fig = curve.figure(drawn)
    return {line.get_gid().removeprefix(prefix): [tuple(p) for p in line.get_xydata()]
            for ax in fig.axes for line in ax.get_lines()
            if (line.get_gid() or "").startswith(prefix)}


def test_one_line_per_anchor_with_points_in_time_order():
    # rows out of order on purpose: the picture sorts them by minutes
    drawn = plot_curve.to_curve(_curve([
        (30, {"uct:1000": 0.8, "uctsolver:1000": 0.6}),
        (0, {"uct:1000": 0.1, "uctsolver:1000": 0.0}),
        (15, {"uct:1000": 0.5}),
    ]))
    series = _series(drawn)
    assert set(series) == {"uct:1000", "uctsolver:1000"}
    assert series["uct:1000"] == [(0, 0.1), (15, 0.5), (30, 0.8)]
    assert series["uctsolver:1000"] == [(0, 0.0), (30, 0.6)]
    # the Elo panel: the same points, the score's implied Elo (0% clipped)
    assert _series(drawn, "elo:")["uctsolver:1000"] == [
        (0, -curve.ELO_CLIP), (30, pytest.approx(curve.implied_elo(0.6)))]


def test_title_and_svg_output_and_empty_curve_is_refused(tmp_path):
    drawn = plot_curve.to_curve(_curve([(0, {"uct:1000": 0.5})]), title="a < b & c")
    assert curve.figure(drawn).get_suptitle() == "a < b & c"
    root = ET.parse(curve.write(drawn, tmp_path / "c.svg")).getroot()  # well-formed
    assert any(el.get("id") == "score:uct:1000" for el in root.iter())
    with pytest.raises(ValueError, match="no rows"):
        plot_curve.to_curve(_curve([]))


def test_curves_measured_side_by_side_merge_on_minutes():
    uct = {**_curve([(0, {"uct:1000": 0.1}), (15, {"uct:1000": 0.6})]), "anchors": ["uct:1000"]}
    solver = {**_curve([(15, {"uctsolver:1000": 0.4}), (0, {"uctsolver:1000": 0.0})]),
              "anchors": ["uctsolver:1000"]}
    merged = plot_curve.merge_curves([uct, solver])
    assert merged["anchors"] == ["uct:1000", "uctsolver:1000"]
    assert [r["minutes"] for r in merged["rows"]] == [0, 15]
    assert merged["rows"][1]["results"] == {"uct:1000": {"score": 0.6},
                                            "uctsolver:1000": {"score": 0.4}}
    assert merged["game"] == "gomoku8"
    assert set(_series(plot_curve.to_curve(merged))) == {"uct:1000", "uctsolver:1000"}


def test_markdown_table_has_a_row_per_point_and_blank_cells_for_missing_results():
    curve = _curve([(15, {"uct:1000": 0.75}), (0, {"uct:1000": 0.0, "uctsolver:1000": 0.0})])
    for row, wins in zip(curve["rows"], (3, 0), strict=True):
        row["label"] = f"{row['minutes']} min"
        for result in row["results"].values():
            result.update(wins=wins, draws=0, losses=4 - wins)
    lines = plot_curve.markdown_table(curve).splitlines()
    assert lines[0] == "| training wall clock | vs `uct:1000` | vs `uctsolver:1000` |"
    assert lines[2] == "| 0 min | 0% (+0 =0 −4) | 0% (+0 =0 −4) |"
    assert lines[3] == "| 15 min | 75% (+3 =0 −1) |  |"


def test_labels_name_anchors_in_legend_and_table():
    curve_json = _curve([(0, {"uct:1000": 0.5})])
    curve_json["rows"][0]["results"]["uct:1000"].update(wins=1, draws=0, losses=1)
    labels = {"uct:1000": "vs pure MCTS"}
    fig = curve.figure(plot_curve.to_curve(curve_json, labels=labels))
    texts = [t.get_text() for ax in fig.axes if ax.get_legend()
             for t in ax.get_legend().get_texts()]
    # uctsolver has no results here: no line, so no legend entry either
    assert texts == ["vs pure MCTS"]
    assert plot_curve.markdown_table(curve_json, labels).startswith(
        "| training wall clock | vs pure MCTS | vs `uctsolver:1000` |")


def test_curves_of_two_runs_against_the_same_anchor_stay_two_lines():
    scratch = plot_curve.tag_curve(_curve([(0, {"uct:1000": 0.0}), (10, {"uct:1000": 0.3})]),
                                   "scratch")
    pre = plot_curve.tag_curve(_curve([(0, {"uct:1000": 0.4}), (10, {"uct:1000": 0.7})]),
                               "pretrained")
    series = _series(plot_curve.to_curve(plot_curve.merge_curves([scratch, pre])))
    assert series["scratch: uct:1000"] == [(0, 0.0), (10, 0.3)]
    assert series["pretrained: uct:1000"] == [(0, 0.4), (10, 0.7)]
