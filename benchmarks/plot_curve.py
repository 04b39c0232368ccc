"""Draw a learning curve (score against each anchor over training wall clock) as an SVG.

    python benchmarks/plot_curve.py runs/gomoku8/curve.json --out docs/img/gomoku8-curve.svg

The input is the JSON that ``learn_vs_uct.py --curve ... --json FILE`` writes; several
files (e.g. one per anchor, measured by processes side by side) are merged by minutes.
Plain SVG text, no plotting library: the picture is small, and the docs render it as it is.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 640, 380
LEFT, RIGHT, TOP, BOTTOM = 64, 24, 48, 56
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]


def _nice_step(span: float, target_ticks: int = 8) -> float:
    """A round tick spacing (1, 2 or 5 times a power of ten) giving about target ticks."""
    raw = max(span, 1e-9) / target_ticks
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


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


def render_svg(curve: dict, title: str | None = None,
               labels: dict[str, str] | None = None) -> str:
    """The SVG text of ``curve`` (the ``--json`` layout: anchors, rows of minutes and
    per-anchor results with score and Elo bounds), score in percent on the y axis; the
    legend names an anchor by its entry in ``labels``, else "vs anchor"."""
    labels = labels or {}
    rows = sorted(curve["rows"], key=lambda r: r["minutes"])
    if not rows:
        raise ValueError("the curve has no rows to draw")
    anchors = list(curve["anchors"])
    x_max = max(r["minutes"] for r in rows) or 1.0
    x_step = _nice_step(x_max)
    x_max = math.ceil(x_max / x_step) * x_step
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(minutes: float) -> float:
        return LEFT + plot_w * minutes / x_max

    def py(score: float) -> float:
        return TOP + plot_h * (1.0 - score)

    title = title or (f"{curve.get('game', '')}: score vs pure MCTS over training "
                      f"({curve.get('games', '?')} games a point)")
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{WIDTH / 2}" y="22" text-anchor="middle" font-size="14">'
           f'{escape(title)}</text>']
    for pct in range(0, 101, 10):  # horizontal grid with score labels
        y = py(pct / 100)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
                   f'stroke="{"#888" if pct in (0, 50) else "#ddd"}"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{pct}%</text>')
    ticks = int(round(x_max / x_step))
    for i in range(ticks + 1):
        x = px(i * x_step)
        out.append(f'<line x1="{x:.1f}" y1="{TOP + plot_h}" x2="{x:.1f}" '
                   f'y2="{TOP + plot_h + 5}" stroke="#888"/>')
        out.append(f'<text x="{x:.1f}" y="{TOP + plot_h + 18}" text-anchor="middle">'
                   f'{i * x_step:g}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 14}" text-anchor="middle">'
               f'training wall clock (minutes)</text>')
    out.append(f'<text transform="translate(16 {TOP + plot_h / 2}) rotate(-90)" '
               f'text-anchor="middle">score (draws count half)</text>')
    for i, anchor in enumerate(anchors):
        colour = COLOURS[i % len(COLOURS)]
        points = [(px(r["minutes"]), py(r["results"][anchor]["score"]))
                  for r in rows if anchor in r["results"]]
        if not points:
            continue
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        out.append(f'<polyline class="series" data-anchor="{escape(anchor)}" points="{path}" '
                   f'fill="none" stroke="{colour}" stroke-width="2"/>')
        out.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"/>'
                   for x, y in points)
        # legend bottom right: a curve that learns climbs away from that corner
        lx, ly = WIDTH - RIGHT - 260, py(0) - 18 * (len(anchors) - i) - 8
        out.append(f'<line x1="{lx}" y1="{ly:.1f}" x2="{lx + 24}" y2="{ly:.1f}" '
                   f'stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{lx + 30}" y="{ly + 4:.1f}">'
                   f'{escape(labels.get(anchor, "vs " + anchor))}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("curves", nargs="+", help="JSON written by learn_vs_uct.py --curve "
                        "--json (several are merged)")
    parser.add_argument("--out", required=True, help="SVG file to write")
    parser.add_argument("--table", action="store_true",
                        help="also print the merged curve as a Markdown table")
    parser.add_argument("--title", default=None)
    parser.add_argument("--label", action="append", default=[], metavar="ANCHOR=TEXT",
                        help="legend and column text for an anchor (repeatable)")
    args = parser.parse_args()
    labels = dict(item.partition("=")[::2] for item in args.label)
    curves = []
    for name in args.curves:
        try:
            curves.append(json.loads(Path(name).read_text()))
        except (OSError, ValueError) as err:
            parser.exit(1, f"plot_curve: {name}: {err}\n")
    try:
        merged = merge_curves(curves)
        svg = render_svg(merged, args.title, labels)
        table = markdown_table(merged, labels) if args.table else ""
    except (ValueError, KeyError, TypeError) as err:
        parser.exit(1, f"plot_curve: {' + '.join(args.curves)}: not a learning curve ({err!r})\n")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(svg)
    print(table + f"wrote {args.out}")


if __name__ == "__main__":
    main()
