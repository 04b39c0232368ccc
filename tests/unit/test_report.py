"""benchmarks/report.py: a marked table is rebuilt from its raw rows in place, --check names
a table that drifted from its data, bad input is a one-line error, and the repository's own
docs match docs/data."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

_DIR = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(_DIR))  # the script imports its neighbours by plain name
_spec = importlib.util.spec_from_file_location("benchmarks_report", _DIR / "report.py")
assert _spec and _spec.loader
report = importlib.util.module_from_spec(_spec)
sys.modules["benchmarks_report"] = report  # dataclasses look their module up there
_spec.loader.exec_module(report)

from report_layout import Table, nbytes, span  # noqa: E402
from report_tts import Seed, median  # noqa: E402

ROWS = {"args": {"batch": 100},
        "rows": [{"replicas": 1, "median": 10.0}, {"replicas": 2, "median": 5.0}]}
STALE = """# Doc

Prose before.

<!-- report:learner-replicas begin -->
| replicas | old |
|---|---|
| 1 | 9.99 |
<!-- report:learner-replicas end -->

Prose after.
"""


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A doc with one stale marked table, and the data it is built from."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "learner-replicas-cpu.json").write_text(json.dumps(ROWS))
    doc = tmp_path / "doc.md"
    doc.write_text(STALE)
    return doc, data


def run(doc: Path, data: Path, *extra: str) -> int:
    return report.main(["--doc", str(doc), "--data", str(data), *extra])


def test_regenerates_the_marked_table_and_nothing_else(tree, capsys):
    doc, data = tree
    assert run(doc, data) == 0
    text = doc.read_text()
    assert text.startswith("# Doc\n\nProse before.\n\n<!-- report:learner-replicas begin -->\n")
    assert text.endswith("<!-- report:learner-replicas end -->\n\nProse after.\n")
    assert "| 1 | 10.00 | 1,000 | 1.00 |" in text
    assert "| 2 | 5.00 | 500 | 0.50 |" in text
    assert "9.99" not in text
    assert "from `docs/data/learner-replicas-cpu.json`" in text  # says where it came from
    assert "regenerated: learner-replicas" in capsys.readouterr().out
    assert run(doc, data) == 0 and doc.read_text() == text  # a second run changes nothing


def test_check_names_each_stale_table_and_writes_nothing(tree, capsys):
    doc, data = tree
    assert run(doc, data, "--check") == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("stale: learner-replicas (") and ":5)" in out[0]
    assert doc.read_text() == STALE
    assert run(doc, data) == 0
    capsys.readouterr()
    assert run(doc, data, "--check") == 0 and capsys.readouterr().out == ""
    # the data changes under a fresh table: stale again
    (data / "learner-replicas-cpu.json").write_text(json.dumps(
        {**ROWS, "rows": [{"replicas": 1, "median": 11.0}]}))
    assert run(doc, data, "--check") == 1


def test_an_indented_block_keeps_its_indentation(tree):
    doc, data = tree
    doc.write_text("- item:\n\n  <!-- report:learner-replicas begin -->\n"
                   "  <!-- report:learner-replicas end -->\n")
    assert run(doc, data) == 0
    body = doc.read_text().splitlines()[3:-1]
    assert body and all(line == "" or line.startswith("  |") or line.startswith("  *")
                        for line in body)


def _error(doc: Path, data: Path, capsys) -> str:
    assert run(doc, data) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("report.py: error: ")
    return err


def test_missing_data_file_is_one_line(tree, capsys):
    doc, data = tree
    (data / "learner-replicas-cpu.json").unlink()
    err = _error(doc, data, capsys)
    assert f"{data / 'learner-replicas-cpu.json'}: no such data file" in err
    assert doc.read_text() == STALE


def test_invalid_json_is_one_line(tree, capsys):
    doc, data = tree
    (data / "learner-replicas-cpu.json").write_text('{"rows": [\n')
    assert "learner-replicas-cpu.json: not valid JSON (" in _error(doc, data, capsys)


def test_a_document_without_the_fields_is_one_line(tree, capsys):
    doc, data = tree
    (data / "learner-replicas-cpu.json").write_text(json.dumps({"args": {"batch": 1}}))
    err = _error(doc, data, capsys)
    assert "table learner-replicas: malformed data in docs/data/learner-replicas-cpu.json" in err
    assert "no field 'rows'" in err


def test_unknown_marker_is_one_line(tree, capsys):
    doc, data = tree
    doc.write_text("x\n<!-- report:no-such-table begin -->\n<!-- report:no-such-table end -->\n")
    assert f"{doc}:2: unknown table 'no-such-table'" in _error(doc, data, capsys)


def test_unpaired_markers_are_one_line(tree, capsys):
    doc, data = tree
    doc.write_text("<!-- report:learner-replicas begin -->\n| a |\n")
    assert "learner-replicas begins and never ends" in _error(doc, data, capsys)
    doc.write_text("<!-- report:learner-replicas end -->\n")
    assert "end of learner-replicas without its begin" in _error(doc, data, capsys)


def test_table_layer():
    t = Table(("a", "b"), [["x", "1"]], frozenset({1}))
    assert t.markdown() == "| a | b |\n|---|---:|\n| x | 1 |"
    with pytest.raises(ValueError):
        Table(("a", "b"), [["x"]]).markdown()
    assert span([62.1, 68.4, 64.0], "{:.0f}") == "62–68"
    assert span([37.2], "{:.0f}") == "37"
    assert (nbytes(483_180), nbytes(1_855_165), nbytes(514e6)) == ("483 kB", "1.86 MB", "514 MB")


def test_median_ranks_a_run_that_never_got_there_last():
    def s(m):
        return Seed(m, 15.0, (), None, None)

    assert median([s(3.6), s(None), s(2.1)]) == "3.6"
    assert median([s(None), s(None), s(2.1)]) == ">15"
    assert median([s(1.0), s(2.0), s(3.0), s(4.0)]) == "2.0"  # lower middle


def test_the_repository_docs_match_their_data(capsys):
    """CI's guard: a table in docs/ edited by hand, or data replaced under it, fails here."""
    assert report.main(["--check"]) == 0, capsys.readouterr().out


def test_the_ablation_table_shows_what_ran_and_what_did_not(tmp_path):
    """A variant's median comes once both of its seeds ran; a missing run says so."""
    from report_layout import DataDir
    from report_tts import NOT_RUN, ablation_go9

    def tts_file(label: str, seed: int, minutes: float | None, scores: list[float],
                 prefix: str = "ablation-go9") -> None:
        row = {"config": "go9", "seed": seed, "minutes_to_target": minutes,
               "points": [{"minutes": 2.0 * (i + 1), "score": sc} for i, sc in
                          enumerate(scores)], "positions_per_s": 160.0, "steps_per_s": 5.0}
        (tmp_path / f"{prefix}-{label}-seed{seed}.json").write_text(
            json.dumps({"minutes": 40.0, "rows": [row]}))

    tts_file("full", 0, 4.0, [0.3, 0.55])
    tts_file("full", 1, 2.0, [0.6])
    tts_file("no-go-features", 0, None, [0.1, 0.2])
    data = DataDir(tmp_path)
    rows = {r[0]: r[1:] for r in ablation_go9(data).rows}
    assert rows["the `go9` preset"][:3] == ["4.0 [30, 55]", "2.0 [60]", "2.0"]
    assert rows["no Go input features (item 3)"][:3] == [">40 [10, 20]", NOT_RUN, "—"]
    assert rows["no global pooling (item 2)"] == [NOT_RUN, NOT_RUN, "—", "—", "—"]
    assert len(data.used) == 3  # the footer names the files read, and only those

    # another host type's runs sit beside them under their own prefix, never mixed in
    tts_file("full", 0, 8.0, [0.2, 0.3, 0.4, 0.7], prefix="ablation-go9-zen3")
    other = DataDir(tmp_path)
    rows = {r[0]: r[1:] for r in ablation_go9(other, prefix="ablation-go9-zen3").rows}
    assert rows["the `go9` preset"][:3] == ["8.0 [20, 30, 40, 70]", NOT_RUN, "—"]
    assert rows["no Go input features (item 3)"][:2] == [NOT_RUN, NOT_RUN]
    assert len(other.used) == 1
    assert {r[0]: r[1] for r in ablation_go9(DataDir(tmp_path)).rows}[
        "the `go9` preset"] == "4.0 [30, 55]"

    # a host that ran a few variants lists only those rows, in the ablation's order
    kept = ablation_go9(DataDir(tmp_path), variants=("no-go-features", "full")).rows
    assert [r[0] for r in kept] == ["the `go9` preset", "no Go input features (item 3)"]


def test_the_go9_gnugo_table_holds_a_level_by_three_points_and_names_the_final(tmp_path):
    """A lucky point is a first crossing, not a held level; the final checkpoint's score
    is set against the best point; a run that ended on a snapshot says so."""
    from report_layout import DataDir
    from report_tables import GO9_GNUGO, go9_gnugo_held

    def curve(name: str, scores: list[float], final: bool) -> None:
        rows = [{"minutes": 15.0 * (i + 1), "label": f"{15 * (i + 1)} min",
                 "results": {"gnugo": {"score": sc, "wins": round(sc * 40), "draws": 0,
                                       "losses": 40 - round(sc * 40)}}}
                for i, sc in enumerate(scores)]
        if final:
            rows[-1]["label"] += " (final)"
        (tmp_path / name).write_text(json.dumps({"rows": rows}))

    shapes = [([0.2, 0.9, 0.3, 0.4], True),   # one lucky point: never held
              ([0.3, 0.6, 0.4, 0.7, 0.55, 0.2], True),  # held at the fourth point
              ([0.1, 0.2], True),
              ([0.5, 0.5, 0.5], False)]
    for (name, _), (scores, final) in zip(GO9_GNUGO, shapes, strict=True):
        curve(name, scores, final)
    rows = [r[2:] for r in go9_gnugo_held(DataDir(tmp_path)).rows]
    assert rows[0][1:3] == ["never", "30"]
    assert rows[0][3] == "90% (+36 −4) at 30 min"
    assert rows[0][4] == "40% (+16 −24) at 60 min, 50 below the best"
    assert rows[1][1:3] == ["**60**", "30"]  # 60, 40, 70: median 60
    assert rows[1][4] == "20% (+8 −32) at 90 min, 50 below the best"
    assert rows[3][1] == "**45**" and rows[3][4].startswith("not judged (last snapshot, 45")


def test_the_rejudge_table_sets_each_judging_of_a_point_side_by_side(tmp_path):
    """A row a point of the last judging; the first judging (written before the counts)
    shows the score only, the later ones their distinct and effective games."""
    from report_layout import DataDir
    from report_tables import GO9_GNUGO_REJUDGE, go9_gnugo_rejudge

    def judged(name: str, wins: list[int], counted: bool) -> None:
        rows = [{"minutes": m, "label": label,
                 "results": {"gnugo": {"score": w / 40, "wins": w, "draws": 0,
                                       "losses": 40 - w,
                                       **({"distinct_games": 20 + w % 5,
                                           "effective_games": 10.25} if counted else {})}}}
                for (m, label), w in zip(((135.1, "135 min"), (150, "150 min (final)")),
                                         wins, strict=True)]
        (tmp_path / name).write_text(json.dumps({"rows": rows}))

    for _, first, again, openings in GO9_GNUGO_REJUDGE:
        judged(first, [28, 20], False)
        judged(again, [22, 14], True)
        judged(openings, [18, 9], True)
    rows = go9_gnugo_rejudge(DataDir(tmp_path)).rows
    assert [r[0] for r in rows] == ["raw, 135 min", "raw, 150 min (final)",
                                    "averaged, 135 min", "averaged, 150 min (final)"]
    assert rows[0][1:] == ["70% (+28 −12)", "55% (+22 −18; 22 distinct, 10.2 effective)",
                           "45% (+18 −22; 23 distinct, 10.2 effective)"]
    assert rows[3][1] == "50% (+20 −20)"


def test_a_known_table_in_none_of_the_repository_docs_fails_the_check(tree, capsys):
    """Over the default docs (no --doc) a table whose markers moved away is named."""
    doc, data = tree
    assert report.main(["--doc", str(doc), "--data", str(data)]) == 0  # --doc: not asked
    capsys.readouterr()
    assert report._run([doc], data, check=True, every_table=True) == 1
    out = capsys.readouterr().out
    assert "missing: tts-go9 sits in no document" in out
    assert "missing: learner-replicas" not in out
    assert [d.name for d in report.default_docs()][:2] == ["benchmarks.md", "reliability.md"]
    assert any(d.parent.name == "lab" for d in report.default_docs())


def test_the_held_table_works_out_held_and_first_crossing_from_the_points(tmp_path):
    """A run that crosses once and falls back is never held; the medians are the rule's;
    a variant run on one seed shows the others as not run and no median."""
    from report_layout import DataDir
    from report_tts import NOT_IN_PLAN, held

    def run(seed: int, scores: list[float], target: float = 0.9, tag: str = "") -> str:
        row = {"config": "go9", "seed": seed, "minutes_to_target": 99.0,  # not trusted
               "points": [{"minutes": 3.3 * (i + 1), "score": sc}
                          for i, sc in enumerate(scores)],
               "positions_per_s": 80.0, "steps_per_s": 2.5}
        name = f"run{tag}{seed}.json"
        (tmp_path / name).write_text(json.dumps(
            {"minutes": 20.0, "target": target, "hold": 3, "rows": [row]}))
        return name

    names = [run(0, [0.35, 0.95, 0.9, 0.95]), run(1, [0.5, 0.9, 0.5, 0.6]),
             run(2, [0.9, 0.95, 1.0])]
    control = [run(1, [0.2, 0.9, 0.95], tag="c")]
    preset, other = held(DataDir(tmp_path), [("preset", names), ("control", control)]).rows
    assert preset[1:4] == ["9.9 [35, 95, 90, 95]", ">20 [50, 90, 50, 60]",
                           "9.9 [90, 95, 100]"]
    assert preset[4:6] == ["**9.9**", "6.6"]  # held: 9.9, never, 9.9; first: 6.6, 6.6, 3.3
    assert preset[6:] == ["80", "2.5"]
    assert other[1:] == [NOT_IN_PLAN, "9.9 [20, 90, 95]", NOT_IN_PLAN, "—", "—", "80", "2.5"]

    names[2] = run(2, [0.9, 0.95, 1.0], target=0.5)
    with pytest.raises(ValueError, match="different targets"):
        held(DataDir(tmp_path), [("preset", names)])
