"""Failed checkpoint writes, counted and said once per run of failures.

A write that fails (a full or read-only run directory: an ``OSError``) leaves the last good
checkpoint in place; the learner trains on and tries again after ``checkpoint_every_s``.
This keeps the count, the reason and the one log line for each run of failures, and the
line that says when the writes work again.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from zeroforge.shared.metrics import Recorder

log = logging.getLogger(__name__)


class CheckpointHealth:
    """``failures``: checkpoint writes that failed in a row (0 once one succeeds);
    ``error``: why the last one failed, while ``failures`` > 0. Each failure is counted in
    ``learner_save_failures_total{file="checkpoint"}``."""

    def __init__(self, path: Path, recorder: Recorder, retry_every_s: float) -> None:
        self.path = path
        self.recorder = recorder
        self.retry_every_s = retry_every_s
        self.failures = 0
        self.error: str | None = None
        self._failing_since = 0.0

    def failed(self, err: OSError, unacked: int) -> None:
        """A write failed; ``unacked``: the stream entries it would have acknowledged."""
        self.error = f"{self.path}: {err}"
        self.failures += 1
        self.recorder.inc("learner_save_failures_total", file="checkpoint")
        if self.failures == 1:  # one line for a run of failures
            self._failing_since = time.monotonic()
            log.error("checkpoint not written (%s); the last good checkpoint stays, "
                      "training goes on, and the %d stream entries received since stay "
                      "unacknowledged until a write succeeds (tried again every %g s)",
                      self.error, unacked, self.retry_every_s)

    def written(self) -> None:
        """A write succeeded: say so if it ends a run of failures."""
        if self.failures:
            log.warning("checkpoint %s written again after %d failed writes in %.0f s",
                        self.path, self.failures, time.monotonic() - self._failing_since)
            self.failures, self.error = 0, None
