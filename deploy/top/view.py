"""What ``zeroforge top`` draws, as pure functions and small state holders: no terminal,
no network. ``render`` turns a ``RunStatus``, the run's recent history and the actors'
rates into one rich renderable; tests call it with plain data.

- ``Rates``: each actor's rates from successive polls of its counters (``RunStatus.actors``).
- ``HistoryBuffer``: the tail of ``/api/history`` (fetched incrementally with ``since``).
- ``sparkline``: unicode block characters, one per sample.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from zeroforge.deploy.runtime.status import RunStatus

BLOCKS = "▁▂▃▄▅▆▇█"
"""Sparkline levels, lowest first."""

COUNTERS = ("games", "positions", "steps", "evaluations")
"""The per-actor counters of ``RunStatus.actors`` rows (absent ones are 0)."""

RATE_OF = {"selfplay": ("positions", "pos/s"), "learner": ("steps", "steps/s"),
           "inference": ("evaluations", "evals/s"), "evaluator": ("evaluations", "evals/s")}
"""Which counter an actor kind's rate column shows, and its unit."""

FINAL_STATES = frozenset({"stopped", "failed", "ended"})
"""Run states after which there is nothing more to watch."""


def sparkline(values: Sequence[float | None], width: int) -> str:
    """The last ``width`` values as block characters scaled between their min and max
    (a gap is a space; all equal gives the lowest block, or the middle one if non-zero)."""
    tail = list(values)[-width:] if width > 0 else []
    known = [v for v in tail if v is not None and math.isfinite(v)]
    if not known:
        return " " * len(tail)
    low, high = min(known), max(known)
    out = []
    for v in tail:
        if v is None or not math.isfinite(v):
            out.append(" ")
        elif high == low:
            out.append(BLOCKS[len(BLOCKS) // 2 if high else 0])
        else:
            out.append(BLOCKS[round((v - low) / (high - low) * (len(BLOCKS) - 1))])
    return "".join(out)


_KEY = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?$')
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_key(key: str) -> tuple[str, dict[str, str]]:
    """``name{a="x",b="y"}`` -> (name, {"a": "x", "b": "y"}) (a history series key)."""
    m = _KEY.match(key)
    if not m:
        return key, {}
    return m.group(1), dict(_LABEL.findall(m.group(2) or ""))


class HistoryBuffer:
    """The newest ``keep`` samples of a run's history; ``extend`` takes one
    ``/api/history`` reply (``{"t": [...], "series": {key: [...]}}``), ``since`` says what
    to ask for next."""

    def __init__(self, keep: int = 240) -> None:
        self.keep = keep
        self.t: list[float] = []
        self.series: dict[str, list[float | None]] = {}
        self.interval_s = 0.0

    @property
    def since(self) -> float:
        return self.t[-1] if self.t else 0.0

    def extend(self, reply: Mapping[str, Any]) -> None:
        times = [float(t) for t in reply.get("t", [])]
        fresh = [i for i, t in enumerate(times) if not self.t or t > self.t[-1]]
        self.interval_s = float(reply.get("interval_s") or self.interval_s)
        if not fresh:
            return
        n = len(self.t)
        self.t += [times[i] for i in fresh]
        for key, col in reply.get("series", {}).items():
            column = self.series.setdefault(key, [None] * n)
            column += [_num(col[i]) if i < len(col) else None for i in fresh]
        for column in self.series.values():
            column += [None] * (len(self.t) - len(column))
        if len(self.t) > self.keep:
            cut = len(self.t) - self.keep
            self.t = self.t[cut:]
            self.series = {k: v[cut:] for k, v in self.series.items()}

    def counter_sum(self, name: str, **labels: str) -> list[float | None]:
        """Per sample, the sum of the series of counter ``name`` carrying ``labels``; a
        series' gap holds its last value (counters are cumulative)."""
        columns = [col for key, col in self.series.items()
                   if _matches(key, name, labels)]
        if not columns:
            return []
        out: list[float | None] = []
        last: list[float | None] = [None] * len(columns)
        for i in range(len(self.t)):
            for j, col in enumerate(columns):
                if col[i] is not None:
                    last[j] = col[i]
            known = [v for v in last if v is not None]
            out.append(sum(known) if known else None)
        return out

    def rate(self, name: str, **labels: str) -> list[float | None]:
        """Per sample, the counter's increase per second since the sample before (None for
        the first, a gap, or a counter that went back: a restarted actor)."""
        totals = self.counter_sum(name, **labels)
        out: list[float | None] = []
        for i, v in enumerate(totals):
            prev = totals[i - 1] if i else None
            dt = self.t[i] - self.t[i - 1] if i else 0.0
            ok = v is not None and prev is not None and dt > 0 and v >= prev
            out.append((v - prev) / dt if ok else None)  # type: ignore[operator]
        return out

    def gauge(self, name: str, **labels: str) -> list[float | None]:
        """The first series of gauge ``name`` carrying ``labels``."""
        for key, col in self.series.items():
            if _matches(key, name, labels):
                return list(col)
        return []


def _matches(key: str, name: str, labels: Mapping[str, str]) -> bool:
    got_name, got = parse_key(key)
    return got_name == name and all(got.get(k) == v for k, v in labels.items())


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


@dataclass(frozen=True)
class ActorRate:
    """An actor's rate of its kind's main counter (None until two polls apart)."""

    value: float | None
    unit: str


class Rates:
    """Each actor's counter rates from successive polls: the increase over the polls of
    the last ``window_s`` seconds (smoother than one poll to the next). An actor is known
    by (kind, index); a counter that went back (a replacement started from 0) restarts
    its window."""

    def __init__(self, window_s: float = 5.0) -> None:
        self.window_s = window_s
        self._seen: dict[tuple[str, int], deque[tuple[float, dict[str, float]]]] = {}

    def update(self, actors: Iterable[Mapping[str, Any]], now: float) -> None:
        live = set()
        for row in actors:
            key = (str(row.get("kind", "?")), int(row.get("index", 0) or 0))
            live.add(key)
            counts = {c: float(row.get(c) or 0.0) for c in COUNTERS}
            polls = self._seen.setdefault(key, deque())
            if polls and any(counts[c] < polls[-1][1][c] for c in COUNTERS):
                polls.clear()
            polls.append((now, counts))
            while len(polls) > 2 and now - polls[1][0] >= self.window_s:
                polls.popleft()
        for gone in set(self._seen) - live:
            del self._seen[gone]

    def rate(self, kind: str, index: int, counter: str) -> float | None:
        polls = self._seen.get((kind, index))
        if not polls or len(polls) < 2:
            return None
        (t0, first), (t1, last) = polls[0], polls[-1]
        return (last[counter] - first[counter]) / (t1 - t0) if t1 > t0 else None

    def of(self, row: Mapping[str, Any]) -> ActorRate:
        kind = str(row.get("kind", "?"))
        counter, unit = RATE_OF.get(kind, ("evaluations", "evals/s"))
        return ActorRate(self.rate(kind, int(row.get("index", 0) or 0), counter), unit)


def _count(v: float) -> str:
    """A counter for a narrow column: 1234 -> 1,234; 1234567 -> 1.23M."""
    if v >= 10_000_000:
        return f"{v / 1e6:.1f}M"
    if v >= 1_000_000:
        return f"{v / 1e6:.2f}M"
    return f"{v:,.0f}"


def _rate_text(rate: ActorRate, counted: bool = True) -> str:
    """``counted``: the actor's counter has moved at all (a local evaluator's has not)."""
    if rate.value is None or not counted:
        return "-"
    precision = 0 if rate.value >= 100 else 1
    return f"{rate.value:,.{precision}f} {rate.unit}"


def _elapsed(seconds: float) -> str:
    s = int(max(seconds, 0))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


STATE_STYLE = {"running": "green", "alive": "green", "starting": "yellow", "pending": "yellow",
               "restarting": "yellow", "stopping": "yellow", "stopped": "cyan",
               "failed": "bold red", "ended": "cyan"}


def header(status: RunStatus) -> Text:
    """Run id, state, elapsed, weights version, loss, scores."""
    st = status
    text = Text()
    text.append(f"run {st.run_id}", style="bold")
    text.append("  ")
    text.append(st.state, style=STATE_STYLE.get(st.state, ""))
    text.append(f"  elapsed {_elapsed(st.elapsed_s)}  weights v{st.weights_version:.0f}  ")
    if "total" in st.losses:
        text.append(f"loss {st.losses['total']:.3f} (policy {st.losses.get('policy', 0):.3f} "
                    f"value {st.losses.get('value', 0):.3f})")
    else:
        text.append("loss -")
    if st.scores:
        text.append("\nscore vs " + ", ".join(f"{k} {v:.0%}" for k, v in st.scores.items()))
    if st.error:
        text.append(f"\nerror: {st.error}", style="bold red")
    return text


def actor_table(status: RunStatus, rates: Rates) -> Table:
    """One line per actor (``RunStatus.actors``) and a totals line."""
    table = Table(expand=False, pad_edge=False, box=None, header_style="bold")
    for name, justify in (("kind", "left"), ("#", "right"), ("state", "left"),
                          ("node", "left"), ("pid", "right"), ("rate", "right"),
                          ("games", "right"), ("positions", "right"), ("steps", "right"),
                          ("evals", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    rows = sorted(status.actors, key=lambda r: (str(r.get("kind", "")),
                                                int(r.get("index", 0) or 0)))
    sums = dict.fromkeys(COUNTERS, 0.0)
    selfplay_rates = []
    for row in rows:
        counts = {c: float(row.get(c) or 0.0) for c in COUNTERS}
        for c in COUNTERS:
            sums[c] += counts[c]
        rate = rates.of(row)
        if row.get("kind") == "selfplay" and rate.value is not None:
            selfplay_rates.append(rate.value)
        counter = RATE_OF.get(str(row.get("kind")), ("evaluations", ""))[0]
        state = str(row.get("state", "?"))
        table.add_row(str(row.get("kind", "?")), str(row.get("index", 0)),
                      Text(state, style=STATE_STYLE.get(state, "")), str(row.get("node") or "-"),
                      str(row.get("pid") or "-"), _rate_text(rate, counts[counter] > 0),
                      *(_count(counts[c]) if counts[c] else "" for c in COUNTERS))
    if not rows:
        table.add_row("(no actor rows yet)", *[""] * 9)
    table.add_section()
    # the run's self-play rate now: its workers' rates added up
    now = (_rate_text(ActorRate(sum(selfplay_rates), "pos/s")) if selfplay_rates else "-")
    table.add_row(Text("total", style="bold"), str(len(rows)), "", "", "", now,
                  _count(status.games), _count(status.positions),
                  _count(status.learner_steps), _count(sums["evaluations"]))
    return table


def trends(history: HistoryBuffer, width: int = 60) -> Table:
    """Sparklines of self-play positions/s and games/s and of the learner's loss, newest
    at the right, with the newest value and the range shown."""
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column("what", style="bold")
    table.add_column("now", justify="right")
    table.add_column("spark")
    table.add_column("range", style="dim")
    lines = (("positions/s", history.rate("selfplay_positions_total", worker_kind="selfplay"),
              "{:,.0f}"),
             ("games/s", history.rate("selfplay_games_total", worker_kind="selfplay"),
              "{:,.1f}"),
             ("loss", history.gauge("learner_loss", part="total"), "{:.3f}"))
    for name, values, fmt in lines:
        known = [v for v in values[-width:] if v is not None]
        now = next((v for v in reversed(values) if v is not None), None)
        table.add_row(name, fmt.format(now) if now is not None else "-",
                      Text(sparkline(values, width), style="cyan"),
                      f"{fmt.format(min(known))} .. {fmt.format(max(known))}" if known else "")
    if history.t:
        span = history.t[-1] - history.t[max(0, len(history.t) - width)]
        table.caption = f"last {span:.0f} s, a sample every {history.interval_s:g} s"
    return table


def render(status: RunStatus, history: HistoryBuffer, rates: Rates, note: str = "",
           width: int = 60) -> RenderableType:
    """The whole view: header, actors with totals, trends, and a footer line (``note``:
    a poll that failed, or how to quit)."""
    parts: list[RenderableType] = [header(status), Text(""), actor_table(status, rates),
                                   Text(""), trends(history, width)]
    parts.append(Text(note or "q or Ctrl-C to quit", style="dim"))
    return Group(*parts)
