"""The run's limits as the controller checks them (``RunLimits``): ``run.max_learner_steps``
and ``run.max_games`` from the merged metrics, and ``run.minutes`` counted from the first
moment the run could train and play (a learner and a self-play worker alive, or no
workers wanted): minutes spent waiting for the cluster to place them are not the run's.
At a limit the controller stops the run in order (the learner does not end itself:
``LearnerService.ends_run``), workers first, then the learner's final drain and checkpoint.
"""

from __future__ import annotations

import logging
import time

from zeroforge.deploy.config import RunConfig
from zeroforge.shared.metrics import value

log = logging.getLogger(__name__)


class RunLimits:
    """When a run's limits began to count, and whether one was reached."""

    def __init__(self, run: RunConfig, run_id: str, started: float) -> None:
        self.run, self.run_id, self.started = run, run_id, started
        self.clock_from: float | None = None
        """Monotonic time ``run.minutes`` began to count (None: not yet)."""
        self.reached = False
        """A limit was reached (the stop was started once)."""

    def check(self, merged: dict, can_play: bool) -> str:
        """The limit reached first this tick ("" if none, or if one was already reported);
        ``can_play``: a learner and a self-play worker are alive (or no workers wanted)."""
        r, reached = self.run, ""
        if r.max_learner_steps and value(merged, "learner_steps_total") >= r.max_learner_steps:
            reached = f"{r.max_learner_steps} learner steps are taken"
        if r.max_games and value(merged, "learner_games_received_total") >= r.max_games:
            reached = f"{r.max_games} games are received"
        now = time.monotonic()
        if self.clock_from is None and can_play:
            self.clock_from = now
            if r.minutes and now - self.started > 5:
                log.info("run %s: its %s minutes count from now (%.0f s waiting for actors "
                         "to start)", self.run_id, r.minutes, now - self.started)
        if r.minutes and self.clock_from is not None and now - self.clock_from >= r.minutes * 60:
            reached = f"{r.minutes} minutes are up"
        if not reached or self.reached:
            return ""
        self.reached = True
        log.info("run %s: %s", self.run_id, reached)
        return reached

    def state(self, now: float, wall: float) -> dict:
        """Plain data for a successor controller (wall-clock times)."""
        return {"clock_from_wall": (None if self.clock_from is None
                                    else wall - (now - self.clock_from)),
                "minutes_up": self.reached}

    def load(self, st: dict, now: float, wall: float) -> None:
        if st.get("clock_from_wall") is not None:
            self.clock_from = now - (wall - st["clock_from_wall"])
        self.reached = bool(st["minutes_up"])
