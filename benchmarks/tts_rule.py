"""How a time-to-strength figure is written, shared by ``time_to_strength.py`` (which
measures it) and ``report_tts.py`` (which rebuilds its tables in docs/lab/), so
the two cannot disagree. Pure Python: the report runs without torch."""

from __future__ import annotations

import statistics
from collections.abc import Iterable


def minutes_cell(minutes: float | None, limit: float) -> str:
    """``12.0``, or ``>60`` for a run that never reached the target within ``limit``."""
    return f">{limit:g}" if minutes is None else f"{minutes:.1f}"


def median_cell(minutes: Iterable[float | None], limit: float) -> str:
    """Median of the seeds' minutes: a run that never reached the target (None) ranks
    above every run that did, an even count takes the lower middle; ``>limit`` when the
    median itself is such a run."""
    ranked = sorted(m if m is not None else float("inf") for m in minutes)
    mid = statistics.median_low(ranked) if len(ranked) % 2 == 0 else statistics.median(ranked)
    return minutes_cell(None if mid == float("inf") else mid, limit)


def held_minutes(points: list[dict], target: float, hold: int) -> float | None:
    """When a level is *held*: the minutes of the last snapshot of the first ``hold``
    consecutive ones (in order) whose median score reaches ``target``; None if none do
    yet. ``hold`` 1 is the first snapshot at the target (a first crossing, which one lucky
    match can make); 3, the rule the figures use: a median of three."""
    if hold < 1:
        raise ValueError(f"hold must be >= 1, got {hold}")
    for end in range(hold, len(points) + 1):
        window = [p["score"] for p in points[end - hold:end]]
        if statistics.median(window) >= target:
            return float(points[end - 1]["minutes"])
    return None

