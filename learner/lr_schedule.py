"""The learning rate over a run: warm-up, then constant, cosine or step, over a budget.

A schedule needs to know where the run ends. Its length is ``learner.total_steps`` when
set; else the run's own budget: ``run.max_learner_steps`` steps, else ``run.minutes`` of
the learner's run time (counted from its first game, as the limit is, and kept in the
checkpoint, so a resumed run goes on from the schedule's place rather than start over).
A run with neither has nothing to decay towards: it keeps the peak rate and says so once.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zeroforge.learner.config import LearnerConfig

log = logging.getLogger(__name__)

FINAL_FRACTION = 0.1
"""Cosine's rate at the schedule's end, as a fraction of the peak (step ends at 0.01)."""


@dataclass(frozen=True)
class LrSchedule:
    """``lr(step, run_seconds)`` for one run."""

    config: LearnerConfig
    """The learner's section: ``lr``, ``lr_schedule``, ``warmup_steps``, ``total_steps``."""
    max_steps: int = 0
    """``run.max_learner_steps`` (0: none)."""
    minutes: float = 0.0
    """``run.minutes`` (0: none)."""

    @property
    def budget(self) -> str:
        """What the schedule runs over: ``N steps``, ``M minutes`` or "" (none: constant)."""
        if self.config.lr_schedule == "constant":
            return ""
        if self.config.total_steps:
            return f"{self.config.total_steps} steps"
        if self.max_steps:
            return f"{self.max_steps} steps"
        if self.minutes:
            return f"{self.minutes:g} minutes"
        return ""

    def describe(self) -> str:
        """One line for the run's log."""
        c = self.config
        warm = f" after {c.warmup_steps} warm-up steps" if c.warmup_steps else ""
        if c.lr_schedule == "constant":
            return f"learning rate {c.lr:g}, constant{warm}"
        if not self.budget:
            return (f"learning rate {c.lr:g}, constant{warm}: lr_schedule {c.lr_schedule} "
                    f"needs a budget (learner.total_steps, run.max_learner_steps or "
                    f"run.minutes) and the run has none")
        end = FINAL_FRACTION if c.lr_schedule == "cosine" else 0.01
        return f"learning rate {c.lr:g}, {c.lr_schedule} over {self.budget} to {end:g}x{warm}"

    def progress(self, step: int, run_seconds: float) -> float | None:
        """How far through its budget the run is, in [0, 1]; None without a budget."""
        c = self.config
        if c.total_steps or self.max_steps:
            return min(step / max(c.total_steps or self.max_steps, 1), 1.0)
        if self.minutes:
            return min(run_seconds / (self.minutes * 60), 1.0)
        return None

    def lr(self, step: int, run_seconds: float = 0.0) -> float:
        """The rate of step ``step`` (0-based) at ``run_seconds`` of the run."""
        c = self.config
        if step < c.warmup_steps:
            return c.lr * (step + 1) / c.warmup_steps
        frac = None if c.lr_schedule == "constant" else self.progress(step, run_seconds)
        if frac is None:
            return c.lr
        if c.lr_schedule == "cosine":
            return c.lr * (FINAL_FRACTION + (1 - FINAL_FRACTION) * 0.5
                           * (1 + math.cos(math.pi * frac)))
        # step: x0.1 at half the budget and again at three quarters
        return c.lr * 0.1 ** ((frac >= 0.5) + (frac >= 0.75))


class RunClock:
    """Keeps a learner's ``run_seconds`` (what a schedule over ``run.minutes`` follows)
    up to date, turn by turn, from the run's first game on (as ``run.minutes`` counts)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._last: float | None = None

    def tick(self, learner: Any, started: bool) -> None:
        """Add the time since the last tick to ``learner.run_seconds``; ``started``: the
        run has had its first game (before that, nothing counts)."""
        now = self.clock()
        if self._last is not None:
            learner.run_seconds += now - self._last
        if started:
            self._last = now
