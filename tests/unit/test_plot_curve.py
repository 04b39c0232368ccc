"""The learning-curve picture (benchmarks/plot_curve.py): one line per anchor, points
placed by minutes and score, and a clear error for a curve with nothing to draw."""

import importlib.util
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "plot_curve.py"
_spec = importlib.util.spec_from_file_location("plot_curve", _PATH)
plot_curve = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plot_curve)

SVG = "{http://www.w3.org/2000/svg}"


def _curve(rows):
    return {"game": "gomoku8", "games": 50, "anchors": ["uct:1000", "uctsolver:1000"],
            "rows": [{"minutes": m, "results": {a: {"score": s} for a, s in scores.items()}}
                     for m, scores in rows]}


def _series(svg: str) -> dict[str, list[tuple[float, float]]]:
    root = ET.fromstring(svg)
    return {line.get("data-anchor"): [tuple(map(float, p.split(",")))
                                      for p in line.get("points").split()]
            for line in root.iter(SVG + "polyline")}


def test_one_line_per_anchor_with_points_in_time_order():
    # rows out of order on purpose: the picture sorts them by minutes
    svg = plot_curve.render_svg(_curve([
        (30, {"uct:1000": 0.8, "uctsolver:1000": 0.6}),
        (0, {"uct:1000": 0.1, "uctsolver:1000": 0.0}),
        (15, {"uct:1000": 0.5}),
    ]))
    series = _series(svg)
    assert set(series) == {"uct:1000", "uctsolver:1000"}
    uct = series["uct:1000"]
    assert len(uct) == 3 and len(series["uctsolver:1000"]) == 2
    xs, ys = zip(*uct, strict=True)
    assert list(xs) == sorted(xs) and xs[0] == plot_curve.LEFT
    # a higher score is drawn higher up (smaller y)
    assert ys[0] > ys[1] > ys[2]
    # score 0 sits on the x axis, the same height for both series' first point
    assert series["uctsolver:1000"][0][1] == pytest.approx(plot_curve.HEIGHT - plot_curve.BOTTOM)


def test_title_is_escaped_and_empty_curve_is_refused():
    svg = plot_curve.render_svg(_curve([(0, {"uct:1000": 0.5})]), title="a < b & c")
    assert "a &lt; b &amp; c" in svg
    ET.fromstring(svg)  # well-formed
    with pytest.raises(ValueError, match="no rows"):
        plot_curve.render_svg(_curve([]))


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
    assert set(_series(plot_curve.render_svg(merged))) == {"uct:1000", "uctsolver:1000"}


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
    curve = _curve([(0, {"uct:1000": 0.5})])
    curve["rows"][0]["results"]["uct:1000"].update(wins=1, draws=0, losses=1)
    labels = {"uct:1000": "vs pure MCTS"}
    texts = [t.text for t in ET.fromstring(plot_curve.render_svg(curve, labels=labels))
             .iter(SVG + "text")]
    # uctsolver has no results here: no line, so no legend entry either
    assert "vs pure MCTS" in texts and "vs uctsolver:1000" not in texts
    assert plot_curve.markdown_table(curve, labels).startswith(
        "| training wall clock | vs pure MCTS | vs `uctsolver:1000` |")
