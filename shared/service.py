"""The Service protocol: what the runtime (local loop or Ray actor) needs of a service.

Self-play workers, the learner, the evaluator and inference servers are plain classes
that implement it; ``deploy/ray/hosts.py`` hosts them in Ray actors and
``deploy/local_run.py`` steps them in one process.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Service(Protocol):
    """A long-running part of a run."""

    def run(self, stop: threading.Event) -> Any:
        """Work until ``stop`` is set (or the service's own end, e.g. a run limit), then
        finish cleanly: append held games, write the final checkpoint. The return value is
        plain data (a count or a status mapping)."""
        ...

    def stats(self) -> dict:
        """The metrics snapshot (``shared.metrics.Recorder.snapshot``); callable from
        another thread while ``run`` works."""
        ...

    def game_ids(self) -> list[str]:
        """Ids of the games this service produced or received (exactly-once checks);
        [] for services that handle none."""
        ...
