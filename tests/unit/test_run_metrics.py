"""The controller's merged run metrics (``deploy/ray/run_metrics.py``) without a cluster:
what an ended actor leaves in the run's view, and that a successor's copy keeps it."""

from __future__ import annotations

from zeroforge.deploy.ray.kinds import KINDS
from zeroforge.deploy.ray.run_metrics import RunMetrics
from zeroforge.shared import metrics
from zeroforge.shared.metrics import Recorder


def worker_snapshot(positions: float, memory: float) -> dict:
    rec = Recorder()
    rec.inc("selfplay_positions_total", positions, worker="w3", worker_kind="selfplay")
    rec.set("actor_memory_bytes", memory, kind="selfplay", actor="3", node="n1")
    rec.set("node_memory_used_bytes", 9e9, node="n1")
    return rec.snapshot()


def test_an_actor_that_died_unwatched_keeps_its_counters_but_not_its_live_gauges():
    """A dead controller's record of a worker that died while no controller watched goes
    in like a reaped one's: its positions still count; its memory and its node's figures
    (merged by maximum: a stale one would stay for good) leave the run's view."""
    run = RunMetrics()
    run.ended("selfplay", 3, worker_snapshot(positions=120, memory=5e8))
    successor = RunMetrics()
    successor.load(run.state())
    for view in (run, successor):
        none = dict.fromkeys(KINDS, 0)
        view.collect({}, desired=none, alive=none, restarts=none)
        merged = view.merged
        assert metrics.total(merged, "selfplay_positions_total") == 120
        assert metrics.total(merged, "actor_memory_bytes") == 0
        assert metrics.total(merged, "node_memory_used_bytes") == 0
