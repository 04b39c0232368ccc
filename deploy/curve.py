"""Learning-curve pictures (``zeroforge curve RUN_DIR``): the evaluator's score against each
anchor, and the Elo difference that score implies, over training.

The data is what every run already records: ``RUN_DIR/eval.jsonl``, one line per
evaluation (``zeroforge.shared.run_files``). A line gives the weights version evaluated, the wall
clock time and, per anchor, the score (draws count half). The x axis is the wall clock
since the run started (``minutes``), the weights version (``version``), or the learner
steps (``steps``) at which the evaluated version was published. ``eval.jsonl`` does not
hold learner steps: they come from the run's metric history (``RUN_DIR/history.jsonl``,
sampled every few seconds, so within one sample interval), the first sample at which the
learner's published version had reached the evaluated one; runs without that file (from
before the dashboard) have no ``steps`` axis.

The ``best`` entry (the gate match against the best weights so far) is left out: its
opponent changes whenever a version is promoted, so its score is no curve.

Drawn with matplotlib on its Agg canvas (no display needed); the figure is built by a pure
function (``figure``) so tests read its data, not its pixels. ``benchmarks/plot_curve.py``
draws the benchmark's curves with the same ``figure``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from zeroforge.shared.players import ELO_CLIP, clipped_elo, elo_difference
from zeroforge.shared.run_files import EVAL_LOG_NAME

if TYPE_CHECKING:
    from matplotlib.figure import Figure

GATE_ANCHOR = "best"
"""The evaluator's gate match (zeroforge.actors.rating_service.BEST): not a fixed opponent."""

X_AXES = {"minutes": "training wall clock (minutes)", "version": "weights version",
          "steps": "learner steps (when the evaluated weights were published)"}
"""The x axes ``figure`` can draw, with their labels."""

FORMATS = (".png", ".svg", ".pdf")


class CurveError(ValueError):
    """A run dir or evaluation log with nothing to draw; the message is one line."""


@dataclass(frozen=True)
class Point:
    """One evaluation: where it sits on each x axis and its score per anchor."""

    minutes: float
    """Wall clock since the run started, in minutes."""
    version: int | None
    """Weights version evaluated (None where the source does not say)."""
    scores: Mapping[str, float]
    """Score (0..1, draws half) per anchor measured at this point."""
    steps: float | None = None
    """Learner steps when that version was published (None where unknown)."""


@dataclass(frozen=True)
class Curve:
    """Points in the order they are drawn (by minutes) and the anchors in legend order."""

    anchors: tuple[str, ...]
    points: tuple[Point, ...]
    title: str = ""
    skipped: int = 0
    """Lines of the log that were not evaluations (a run killed mid-write)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Legend text per anchor; "vs ANCHOR" where absent."""

    def series(self, anchor: str, x: str = "minutes") -> list[tuple[float, float]]:
        """(x, score) of every point that measured ``anchor`` and has an ``x``, by x."""
        return sorted((float(getattr(p, x)), p.scores[anchor]) for p in self.points
                      if anchor in p.scores and getattr(p, x) is not None)


def implied_elo(score: float) -> float:
    """The Elo difference a score implies (``players.arena``), clipped to +-ELO_CLIP."""
    return clipped_elo(elo_difference(min(max(score, 0.0), 1.0)).elo)


def _entry_scores(entry: object) -> dict[str, float] | None:
    """The per-anchor scores of one log entry, or None if it is no evaluation record."""
    if not isinstance(entry, dict) or not isinstance(entry.get("time"), int | float):
        return None
    scores = entry.get("score")
    if not isinstance(scores, dict):
        return None
    out = {}
    for anchor, score in scores.items():
        if not isinstance(score, int | float) or isinstance(score, bool) \
                or not 0.0 <= score <= 1.0:
            return None
        out[str(anchor)] = float(score)
    return out


def read_eval_log(run_dir: str | Path) -> Curve:
    """The learning curve recorded in ``RUN_DIR/eval.jsonl``; CurveError (one line) when
    the run dir or its log is missing, empty or holds no evaluation record.

    A line that is not an evaluation record is skipped and counted (a run killed while it
    wrote leaves half a line; the next entry starts on a fresh one)."""
    run = Path(run_dir)
    if not run.exists():
        raise CurveError(f"{run}: no such run directory")
    if not run.is_dir():
        raise CurveError(f"{run}: not a directory (give the run's run dir)")
    path = run / EVAL_LOG_NAME
    if not path.exists():
        raise CurveError(f"{run}: no {EVAL_LOG_NAME} (no evaluation recorded: the evaluator "
                         "writes a line every evaluation.every_s; is this a run dir?)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CurveError(f"{path}: not text, so not an evaluation log") from None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise CurveError(f"{path} is empty (no evaluation has finished yet)")
    entries: list[tuple[dict, dict[str, float]]] = []
    first_bad = 0
    for n, line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        scores = _entry_scores(entry)
        if scores is None:
            first_bad = first_bad or n
            continue
        assert isinstance(entry, dict)
        entries.append((entry, scores))
    if not entries:
        raise CurveError(f"{path}: no line is an evaluation record (line {first_bad} is not "
                         "a JSON object with time and score)")
    return _curve(run, entries, skipped=len(lines) - len(entries))


def _run_start(run: Path, entries: list[tuple[dict, dict[str, float]]]) -> float:
    """Epoch seconds the run started: ``run.json``'s ``started`` where a driver wrote one,
    else the earliest evaluator start the entries imply (time less elapsed_s; an evaluator
    that was restarted counts its elapsed_s from its own start)."""
    starts = [float(e["time"]) - float(e.get("elapsed_s") or 0.0) for e, _ in entries]
    try:
        recorded = float(json.loads((run / "run.json").read_text(encoding="utf-8"))["started"])
    except (OSError, ValueError, KeyError, TypeError):
        recorded = 0.0
    return recorded if 0.0 < recorded <= min(starts) + 1.0 else min(starts)


def steps_by_version(run: Path) -> dict[int, float]:
    """Learner steps at the first history sample showing each published weights version
    (from ``RUN_DIR/history.jsonl``); {} without a readable history."""
    from zeroforge.deploy.dashboard.history import HISTORY_FILE, load

    path = run / HISTORY_FILE
    if not path.exists():
        return {}
    try:
        history = load(path)
    except ValueError:
        return {}
    versions = history.series.get('weights_version{component="learner"}', [])
    steps = history.series.get("learner_steps_total", [])
    out: dict[int, float] = {}
    for version, step in zip(versions, steps, strict=False):
        if version is not None and step is not None:
            out.setdefault(int(version), float(step))
    return out


def _steps_at(published: dict[int, float], version: int | None) -> float | None:
    """Steps of the first sample whose version had reached ``version`` (a version
    published and replaced between two samples is seen at the next one)."""
    if version is None:
        return None
    reached = [v for v in published if v >= version]
    return published[min(reached)] if reached else None


def _curve(run: Path, entries: list[tuple[dict, dict[str, float]]], skipped: int) -> Curve:
    start = _run_start(run, entries)
    published = steps_by_version(run)
    points, anchors = [], []
    for entry, scores in entries:
        scores = {a: s for a, s in scores.items() if a != GATE_ANCHOR}
        anchors += [a for a in scores if a not in anchors]
        version = entry.get("weights_version")
        version = version if isinstance(version, int) else None
        points.append(Point(minutes=max(float(entry["time"]) - start, 0.0) / 60.0,
                            version=version, steps=_steps_at(published, version),
                            scores=scores))
    if not anchors:
        raise CurveError(f"{run / EVAL_LOG_NAME}: the evaluations name no anchor besides "
                         f"{GATE_ANCHOR!r} (evaluation.anchors is empty)")
    run_id = next((e["run_id"] for e, _ in reversed(entries) if e.get("run_id")), run.name)
    return Curve(anchors=tuple(anchors), points=tuple(sorted(points, key=lambda p: p.minutes)),
                 title=f"{run_id}: evaluator score over training", skipped=skipped)


def figure(curve: Curve, x: str = "minutes") -> Figure:
    """The picture of ``curve``: score per anchor (top) and the Elo it implies (bottom,
    clipped to +-ELO_CLIP) over the ``x`` axis (a key of X_AXES). An anchor's lines have
    the gids ``score:ANCHOR`` and ``elo:ANCHOR`` (element ids in an SVG). No pyplot: the
    figure has its own Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import PercentFormatter

    if x not in X_AXES:
        raise CurveError(f"x axis must be one of {', '.join(X_AXES)}, got {x!r}")
    drawn = [a for a in curve.anchors if curve.series(a, x)]
    if not drawn:
        why = " (they come from RUN_DIR/history.jsonl, which runs from before the " \
              "dashboard do not have)" if x == "steps" else ""
        raise CurveError(f"no point of the curve has {x} to draw it by{why}")
    fig = Figure(figsize=(8, 6.5), layout="constrained")
    FigureCanvasAgg(fig)
    score_ax, elo_ax = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    for anchor in drawn:
        xs, scores = zip(*curve.series(anchor, x), strict=True)
        label = curve.labels.get(anchor, f"vs {anchor}")
        line, = score_ax.plot(xs, scores, marker="o", markersize=4, label=label,
                             gid=f"score:{anchor}")
        elo_ax.plot(xs, [implied_elo(s) for s in scores], marker="o", markersize=4,
                    color=line.get_color(), gid=f"elo:{anchor}")
    score_ax.axhline(0.5, color="0.6", linewidth=0.8, zorder=0)
    score_ax.set_ylim(-0.03, 1.03)
    score_ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    score_ax.set_ylabel("score (draws count half)")
    score_ax.grid(True, color="0.9")
    # a curve that learns climbs away from the lower right corner
    score_ax.legend(loc="lower right", fontsize="small")
    elo_ax.axhline(0.0, color="0.6", linewidth=0.8, zorder=0)
    elo_ax.set_ylim(-ELO_CLIP * 1.08, ELO_CLIP * 1.08)
    elo_ax.set_ylabel(f"implied Elo (clipped to ±{ELO_CLIP:.0f})")
    elo_ax.set_xlabel(X_AXES[x])
    elo_ax.set_xlim(left=0)  # training starts at 0 minutes, version 0
    elo_ax.grid(True, color="0.9")
    if curve.title:
        fig.suptitle(curve.title)
    return fig


def check_out(out: str | Path) -> Path:
    """``out`` as a Path; CurveError unless it names a format we write."""
    out = Path(out)
    if out.suffix.lower() not in FORMATS:
        raise CurveError(f"{out}: the picture's name must end in {', '.join(FORMATS)}")
    return out


def save(fig: Figure, out: str | Path) -> Path:
    """Write ``fig`` to ``out`` (.png, .svg or .pdf, by its suffix); returns the path."""
    import matplotlib

    out = check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # SVG text stays text (searchable, a third of the size) rather than glyph outlines
    # no timestamp in an SVG: the same curve gives the same file (docs keep one in git)
    metadata = {"Date": None} if out.suffix.lower() == ".svg" else None
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "zeroforge"}):
        fig.savefig(out, dpi=120, metadata=metadata)
    return out


def write(curve: Curve, out: str | Path, x: str = "minutes") -> Path:
    """Draw ``curve`` into ``out``; the name is checked before anything is drawn."""
    check_out(out)
    return save(figure(curve, x), out)


def summary(curve: Curve) -> str:
    """One line about what was drawn: evaluations, span, newest score per anchor."""
    last = {a: s for p in curve.points for a, s in p.scores.items()}
    minutes = curve.points[-1].minutes if curve.points else 0.0
    text = (f"{len(curve.points)} evaluations over {minutes:.1f} min; newest: "
            + ", ".join(f"vs {a} {last[a]:.0%} ({_elo_text(last[a])})"
                        for a in curve.anchors if a in last))
    if curve.skipped:
        text += f"; {curve.skipped} unreadable line(s) skipped"
    return text


def _elo_text(score: float) -> str:
    elo = implied_elo(score)
    bound = "" if abs(elo) < ELO_CLIP else (">= " if elo > 0 else "<= ")
    return f"Elo {bound}{elo:+.0f}" if math.isfinite(elo) else "Elo -"
