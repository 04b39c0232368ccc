"""Draw a learning curve (score against each anchor over training wall clock) as SVG/PNG.

    python benchmarks/plot_curve.py runs/gomoku8/curve.json --out docs/img/gomoku8-curve.svg

The input is the JSON that ``learn_vs_uct.py --curve ... --json FILE`` writes; several
files (e.g. one per anchor, measured by processes side by side) are merged by minutes.
Curves of different runs go in one picture as ``NAME=FILE``: their anchors become
"NAME: anchor", one line each (``... scratch=a.json pretrained=b.json``).
The picture is the one ``zeroforge curve`` draws from a run's own evaluations
(``deploy.curve``, matplotlib): score per anchor and the Elo it implies.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from zeroforge.deploy.curve import Curve, CurveError, Point, write


def merge_curves(curves: list[dict]) -> dict:
    """One curve from several of the same run: anchors in order of first appearance,
    rows joined on their minutes (a later file's result for the same anchor wins)."""
    if not curves:
        raise ValueError("no curves to merge")
    merged = {k: v for k, v in curves[0].items() if k not in ("anchors", "rows")}
    anchors: list[str] = []
    rows: dict[float, dict] = {}
    for curve in curves:
        anchors += [a for a in curve["anchors"] if a not in anchors]
        for row in curve["rows"]:
            into = rows.setdefault(row["minutes"], {**row, "results": {}})
            into["results"].update(row["results"])
    merged.update(anchors=anchors, rows=[rows[m] for m in sorted(rows)])
    return merged


def tag_curve(curve: dict, name: str) -> dict:
    """``curve`` with every anchor renamed ``name: anchor``, so the curves of several runs
    against the same anchors merge into separate lines."""
    tagged = {**curve, "anchors": [f"{name}: {a}" for a in curve["anchors"]]}
    tagged["rows"] = [{**row, "results": {f"{name}: {a}": r for a, r in row["results"].items()}}
                      for row in curve["rows"]]
    return tagged


def markdown_table(curve: dict, labels: dict[str, str] | None = None) -> str:
    """The curve as a Markdown table: a row per point, a column per anchor (headed by its
    entry in ``labels``, else "vs `anchor`") with the score and +wins =draws -losses."""
    anchors, labels = curve["anchors"], labels or {}
    lines = ["| training wall clock | "
             + " | ".join(labels.get(a, f"vs `{a}`") for a in anchors) + " |",
             "|---:|" + "---:|" * len(anchors)]
    for row in sorted(curve["rows"], key=lambda r: r["minutes"]):
        cells = []
        for anchor in anchors:
            r = row["results"].get(anchor)
            cells.append("" if r is None else
                         f"{r['score']:.0%} (+{r['wins']} ={r['draws']} −{r['losses']})")
        lines.append(f"| {row.get('label', row['minutes'])} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_curve(curve: dict, title: str | None = None,
             labels: dict[str, str] | None = None) -> Curve:
    """``curve`` (the ``--json`` layout: anchors, rows of minutes and per-anchor results)
    as the ``deploy.curve.Curve`` that ``zeroforge curve`` draws; the legend names an anchor
    by its entry in ``labels``, else "vs anchor"."""
    rows = sorted(curve["rows"], key=lambda r: r["minutes"])
    if not rows:
        raise ValueError("the curve has no rows to draw")
    points = tuple(Point(minutes=float(r["minutes"]), version=None,
                         scores={a: float(res["score"]) for a, res in r["results"].items()})
                   for r in rows)
    title = title or (f"{curve.get('game', '')}: score vs pure MCTS over training "
                      f"({curve.get('games', '?')} games a point)")
    return Curve(anchors=tuple(curve["anchors"]), points=points, title=title,
                 labels=dict(labels or {}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("curves", nargs="+", help="JSON written by learn_vs_uct.py --curve "
                        "--json (several are merged); NAME=FILE names the run it measured")
    parser.add_argument("--out", required=True, help="picture to write (.svg, .png or .pdf)")
    parser.add_argument("--table", action="store_true",
                        help="also print the merged curve as a Markdown table")
    parser.add_argument("--title", default=None)
    parser.add_argument("--label", action="append", default=[], metavar="ANCHOR=TEXT",
                        help="legend and column text for an anchor (repeatable)")
    args = parser.parse_args()
    labels = dict(item.partition("=")[::2] for item in args.label)
    curves = []
    for item in args.curves:
        run, sep, name = item.partition("=")
        if not sep:
            run, name = "", item
        try:
            curve = json.loads(Path(name).read_text())
        except (OSError, ValueError) as err:
            parser.exit(1, f"plot_curve: {name}: {err}\n")
        curves.append(tag_curve(curve, run) if run else curve)
    try:
        merged = merge_curves(curves)
        drawn = to_curve(merged, args.title, labels)
        table = markdown_table(merged, labels) if args.table else ""
    except (ValueError, KeyError, TypeError) as err:
        parser.exit(1, f"plot_curve: {' + '.join(args.curves)}: not a learning curve ({err!r})\n")
    try:
        write(drawn, args.out)
    except (CurveError, OSError) as err:
        parser.exit(1, f"plot_curve: {err}\n")
    print(table + f"wrote {args.out}")


if __name__ == "__main__":
    main()
