"""The run's metrics as the controller serves them: ``RunMetrics`` merges the live
actors' snapshots with those of actors that ended, so the run's counters never go back
(a learner's successor restores its counters from the checkpoint meanwhile), and
``open_endpoint`` serves the merged snapshot on the run's metrics port.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from zeroforge.deploy.ray.kinds import KINDS
from zeroforge.deploy.ray.slots import Slot
from zeroforge.shared import metrics

log = logging.getLogger(__name__)

PROCESS_LABELS = ("worker", "actor", "node")
"""The labels that tell one self-play host's (or worker's), actor process's or node's series
from another's: their number grows with the run's hosts and nodes."""
ENDED = "ended"
"""Their value on the series of actors that ended, folded together in a successor's view."""


class RunMetrics:
    """The merged metrics of a run's actors, and the floors that keep them monotonic."""

    def __init__(self) -> None:
        self.finished: dict = metrics.as_snapshot(metrics.merge([]))
        """The ended actors' snapshots merged into one (plain form): their counters still
        count. One running total per series, not a snapshot per actor that ever ended."""
        self.restored = {k: metrics.RestoredCounters() for k, kind in KINDS.items()
                         if not kind.counters_survive_crash}
        """Kinds whose successors restore counters from a checkpoint (the learner): their
        snapshots go through ``RestoredCounters``, so the run's counters never go back."""
        self.guard = metrics.MonotonicGuard()
        self.merged: dict = metrics.merge([])
        """The last merged snapshot (what the endpoint and ``status`` serve)."""

    def ended(self, kind: str, index: int, last_stats: dict) -> None:
        """Actor ``index`` of ``kind`` ended with ``last_stats`` as its last snapshot
        (its final one, or a dead controller's record of an actor that died unwatched):
        it becomes the floor of its successor's restored counters, or (for kinds whose
        counters survive) a finished snapshot without its live gauges (its memory, its
        node's figures: they would otherwise stay in the run's view for good)."""
        line = self.restored.get(kind)
        if line is not None:
            # its last report becomes the floor its successor's restored
            # (checkpoint) counters are held up to
            if last_stats:
                line.report(index, last_stats)
            line.ended(index)
        elif last_stats:
            self.finished = metrics.as_snapshot(metrics.merge([
                self.finished, metrics.without_live_gauges(last_stats)]))

    def collect(self, slots: dict[str, list[Slot]], desired: dict[str, int],
                alive: dict[str, int], restarts: dict[str, int]) -> None:
        """Merge the live actors' last snapshots (``Slot.last_stats``), the ended ones'
        and the controller's own gauges (desired, alive, restarts per kind)."""
        rec = metrics.Recorder()
        for name in KINDS:
            rec.set("actors_desired", desired[name], kind=name)
            rec.set("actors_alive", alive[name], kind=name)
            rec.inc("actor_restarts_total", restarts[name], kind=name)
        snaps = []
        for name, kind_slots in slots.items():
            line = self.restored.get(name)
            for s in kind_slots:
                if s.last_stats and line is not None:
                    line.report(s.index, s.last_stats)
                elif s.last_stats:
                    snaps.append(s.last_stats)
        snaps += [line.snapshot() for line in self.restored.values()]
        # the guard holds every counter at what was served before, whatever the cause
        self.merged = self.guard.apply(
            metrics.merge([self.finished, *snaps, rec.snapshot()]))

    def received_before(self, resume: bool) -> float:
        """Games the learner had received before this run: 0 for a fresh run, the first
        learner's first report when resumed (over by the games it took before that report,
        so ``games`` errs low)."""
        line = self.restored.get("learner")
        if not resume or line is None:
            return 0.0
        if line.first_base is None:
            return float("inf")  # not known yet: the workers' count alone
        return line.first_base.get(("learner_games_received_total", ()), 0.0)

    def plain(self) -> dict:
        """The merged snapshot, as plain data (for tests, tools and the driver's dashboard
        history, which needs the histograms too)."""
        return metrics.as_snapshot(self.merged)

    def state(self) -> dict:
        """Plain data for a successor controller (its part of ``controller_state()``),
        its size independent of the run's workers, hosts and nodes: the ended actors'
        series folded under ``ENDED`` (``PROCESS_LABELS``), the merged view (status until
        the successor's first collect) folded under "all", the guard's floors without the
        per-process series (a live actor's counters come from its next report, which never
        goes back)."""
        merged = metrics.fold_labels(metrics.as_snapshot(self.merged), PROCESS_LABELS, "all")
        return {"finished": metrics.fold_labels(self.finished, PROCESS_LABELS, ENDED),
                "restored": {k: vars(line) for k, line in self.restored.items()},
                "guard": self.guard.state(without_labels=PROCESS_LABELS),
                "merged": metrics.merge([merged])}

    def load(self, st: dict) -> None:
        """Take over a predecessor's ``state``. The ended hosts' series go on as one
        ``worker="ended"`` series per metric (a one-off change of series at a takeover;
        the sums over hosts stay what they were)."""
        self.finished = st["finished"]
        for k, fields in st["restored"].items():
            vars(self.restored[k]).update(fields)
        vars(self.guard).update(st["guard"])
        self.merged = st["merged"]


def open_endpoint(source: Callable[[], Any], host: str, port: int, previous: int
                  ) -> metrics.MetricsEndpoint:
    """The run's metrics endpoint. A successor controller takes its predecessor's port
    (``previous``), so the URL stays; the port of a process killed a moment ago can take a
    few seconds to free. A configured port must be had; 0 falls back to a new one."""
    wanted = port or previous
    deadline = time.monotonic() + (10.0 if wanted else 0.0)
    while True:
        try:
            return metrics.MetricsEndpoint(source, host, wanted)
        except OSError as err:
            if time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            if port:
                raise OSError(f"metrics port {host}:{port} is taken: {err}") from None
            log.warning("metrics port %s of the previous controller is taken (%s); "
                        "serving on a new one", previous, err)
            return metrics.MetricsEndpoint(source, host, 0)
