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
