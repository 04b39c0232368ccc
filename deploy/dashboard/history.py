"""A run's metric history: the merged metrics snapshot sampled every few seconds, kept
for the whole run in bounded memory and appended to ``RUN_DIR/history.jsonl``.

Series keys are Prometheus-like without the ``zeroforge_`` prefix: ``name`` or
``name{a="x",b="y"}`` (labels sorted). Counters and gauges are kept as they are (counters
cumulative: readers take rates); a histogram becomes four series with its labels:
``name_count`` and ``name_sum`` (cumulative) and ``name_p50`` / ``name_p99``, the
quantiles of the observations made *during* the sample interval (None when there were
none). Nothing here knows a metric by name: a series that appears is kept from then on.

Bounded memory: at most ``max_points`` samples. Each sample has a level (it stands for
2**level sampling intervals); when full, the level holding the most samples has the older
half of its samples thinned to every second one (the later of each pair, exact for
cumulative counters), which moves them one level up. So the newest samples keep full
resolution, older ones are coarser the further back they go, the levels hold about equal
shares, and the whole run stays covered however long it lasts (its first sample is kept).

The file: a header line ``{"run_id", "started", "interval_s"}``, then one line per sample
``{"t": seconds_since_start, "v": {key: value}}`` holding only the series whose value
changed since the line before (a reader carries the others forward), so a quiet series
costs nothing. ``load`` reads it back, thinned the same way.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from zeroforge.shared import metrics

HISTORY_FILE = "history.jsonl"
"""The history's name in the run dir."""


@dataclass(frozen=True)
class HistoryConfig:
    """How a run's history is sampled and kept."""

    interval_s: float = 2.0
    """Seconds between two samples of the run's merged metrics."""
    max_points: int = 2000
    """Most samples kept in memory (older ones are thinned, never dropped as a span)."""

    def __post_init__(self) -> None:
        if self.interval_s <= 0:
            raise ValueError(f"dashboard interval_s must be > 0, got {self.interval_s}")
        if self.max_points < 4:
            raise ValueError(f"dashboard max_points must be >= 4, got {self.max_points}")


def series_key(name: str, labels: tuple | list) -> str:
    """``name`` or ``name{a="x",b="y"}`` with the labels sorted."""
    pairs = sorted((str(k), str(v)) for k, v in labels)
    if not pairs:
        return name
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}"


def quantile(bounds: tuple[float, ...], counts: list[float], q: float) -> float | None:
    """The ``q`` quantile of bucketed observations (per-bucket counts, the last one the
    +Inf bucket), interpolated linearly inside its bucket as Prometheus'
    ``histogram_quantile`` does; None without observations. The +Inf bucket answers its
    lower bound (the largest finite bound)."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = q * total
    acc = 0.0
    for i, c in enumerate(counts):
        if c > 0 and acc + c >= rank:
            if i >= len(bounds):
                return float(bounds[-1]) if bounds else None
            lower = 0.0 if i == 0 else float(bounds[i - 1])
            upper = float(bounds[i])
            if i == 0 and lower > upper:
                lower = upper
            return lower + (upper - lower) * max(0.0, rank - acc) / c
        acc += c
    return float(bounds[-1]) if bounds else None


def _number(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


class Flattener:
    """Merged snapshots -> ``{key: value}``; keeps the last histogram counts so that the
    quantiles are those of each interval."""

    def __init__(self) -> None:
        self._last_hists: dict[str, list[float]] = {}

    def __call__(self, merged: Mapping) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for name, series in merged.get("values", {}).items():
            for labels, v in _items(series):
                out[series_key(name, labels)] = _number(v)
        for name, series in merged.get("hists", {}).items():
            m = metrics.CATALOGUE.get(name)
            bounds = m.buckets if m is not None else ()
            for labels, h in _items(series):
                h = [float(x) for x in h]
                counts, total = h[:-1], h[-1]
                key = series_key(name, labels)
                before = self._last_hists.get(key)
                if before is not None and len(before) == len(h) and all(
                        a >= b for a, b in zip(h, before, strict=True)):
                    delta = [a - b for a, b in zip(counts, before[:-1], strict=True)]
                else:  # first sight (or a reset): the observations so far
                    delta = counts
                self._last_hists[key] = h
                base, lab = name, labels
                out[series_key(base + "_count", lab)] = sum(counts)
                out[series_key(base + "_sum", lab)] = total
                out[series_key(base + "_p50", lab)] = quantile(bounds, delta, 0.5)
                out[series_key(base + "_p99", lab)] = quantile(bounds, delta, 0.99)
        return out


def _items(series: Any) -> list[tuple[Any, Any]]:
    """A merged series in either form: ``{labels_tuple: v}`` (in process) or
    ``[[labels, v], ...]`` (plain data across Ray)."""
    if isinstance(series, Mapping):
        return list(series.items())
    return [(labels, v) for labels, v in series]


_PINNED = 1 << 30


class History:
    """The samples of one run, thread-safe; ``to_json(since)`` is ``/api/history``."""

    def __init__(self, run_id: str, started: float, config: HistoryConfig | None = None,
                 path: str | Path | None = None) -> None:
        self.run_id = run_id
        self.started = started
        """Epoch seconds the run started (``t`` counts from here)."""
        self.config = config or HistoryConfig()
        self.t: list[float] = []
        self.series: dict[str, list[float | None]] = {}
        self._level: list[int] = []
        """Per sample: it stands for 2**level intervals (non-increasing with time)."""
        self._lock = threading.Lock()
        self._flatten = Flattener()
        self._file: IO[str] | None = None
        self._written: dict[str, float | None] = {}
        if path is not None:
            self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115 (closed in close)
            self._file.write(json.dumps({"run_id": run_id, "started": started,
                                         "interval_s": self.config.interval_s}) + "\n")
            self._file.flush()

    def sample(self, merged: Mapping, t: float | None = None) -> None:
        """Add the merged snapshot taken at ``t`` seconds since the start (now if None)."""
        values = self._flatten(merged)
        t = round(time.time() - self.started if t is None else t, 3)
        self.add(t, values)

    def add(self, t: float, values: Mapping[str, float | None]) -> None:
        """Add one flattened sample (series absent from ``values`` get None)."""
        with self._lock:
            n = len(self.t)
            self.t.append(t)
            # the run's first sample is never thinned away (a level above all others)
            self._level.append(0 if n else _PINNED)
            for key, v in values.items():
                if key not in self.series:
                    self.series[key] = [None] * n
                self.series[key].append(v)
            for col in self.series.values():
                if len(col) == n:
                    col.append(None)
            if len(self.t) > self.config.max_points:
                self._thin()
            if self._file is not None:
                changed = {k: v for k, v in values.items()
                           if k not in self._written or self._written[k] != v}
                self._written.update(changed)
                with contextlib.suppress(OSError, ValueError):
                    self._file.write(json.dumps({"t": t, "v": changed}) + "\n")
                    self._file.flush()

    def _thin(self) -> None:
        """Halve the resolution of the older half of the most crowded level."""
        counts: dict[int, int] = {}
        for lv in self._level:
            counts[lv] = counts.get(lv, 0) + 1
        level = max(counts, key=lambda lv: (counts[lv], -lv))
        first = self._level.index(level)  # the level's samples are contiguous
        pairs = counts[level] // 4  # the older half of the level, in pairs
        if pairs == 0:
            return
        drop = set(range(first, first + 2 * pairs, 2))  # the earlier of each pair
        for i in range(first + 1, first + 2 * pairs, 2):
            self._level[i] = level + 1
        keep = [i for i in range(len(self.t)) if i not in drop]
        self.t = [self.t[i] for i in keep]
        self._level = [self._level[i] for i in keep]
        for key, col in self.series.items():
            self.series[key] = [col[i] for i in keep]

    def to_json(self, since: float = 0.0) -> dict[str, Any]:
        """``/api/history``: the samples after ``since`` seconds (all when ``since`` <= 0)."""
        with self._lock:
            start = 0
            if since > 0:
                while start < len(self.t) and self.t[start] <= since:
                    start += 1
            return {"run_id": self.run_id, "started": self.started,
                    "interval_s": self.config.interval_s, "t": self.t[start:],
                    "series": {k: col[start:] for k, col in self.series.items()}}

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                with contextlib.suppress(OSError):
                    self._file.close()
                self._file = None


def load(path: str | Path, config: HistoryConfig | None = None) -> History:
    """A history read back from its file (a finished run's dashboard). A bad or cut-off
    line (the run was killed while writing) ends the read there."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise ValueError(f"cannot read the run's history {path}: {err.strerror}") from None
    try:
        head = json.loads(lines[0])  # no lines: IndexError
        run_id, started = str(head["run_id"]), float(head["started"])
        interval = float(head.get("interval_s", 2.0))
    except (ValueError, TypeError, KeyError, IndexError):
        raise ValueError(f"{path} is not a zeroforge run history (no header line)") from None
    base = config or HistoryConfig(interval_s=interval)
    history = History(run_id, started, HistoryConfig(interval, base.max_points))
    current: dict[str, float | None] = {}
    for line in lines[1:]:
        try:
            row = json.loads(line)
            t, changed = float(row["t"]), dict(row["v"])
        except (ValueError, TypeError, KeyError):
            break
        current.update({k: _number(v) for k, v in changed.items()})
        history.add(t, dict(current))
    return history


class Sampler:
    """Samples ``source()`` (a merged snapshot) into ``history`` every interval, on a
    daemon thread; a failing source is skipped for that tick (the run goes on)."""

    def __init__(self, history: History, source: Callable[[], Mapping | None]) -> None:
        self.history = history
        self._source = source
        self._last: Mapping | None = None
        self._stop = threading.Event()
        self.errors = 0
        """Ticks whose source failed (counted, never raised into the run)."""
        self._thread = threading.Thread(target=self._loop, name="history-sampler",
                                        daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def tick(self) -> None:
        try:
            merged = self._source()
        except Exception:  # the run must not die of its dashboard
            self.errors += 1
            return
        # The controller gathers its actors' metrics about once a second and the driver
        # copies them about once a second: an unchanged snapshot is no new sample (it
        # would read as an interval without observations: gaps in the quantiles).
        if merged is not None and merged != self._last:
            self._last = merged
            self.history.sample(merged)

    def _loop(self) -> None:
        while not self._stop.wait(self.history.config.interval_s):
            self.tick()

    def stop(self) -> None:
        """Stop sampling after one last sample (the run's final numbers), close the file."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self.tick()
        self.history.close()
