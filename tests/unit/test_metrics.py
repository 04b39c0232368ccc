"""The metrics catalogue: declared once, documented, merged and served correctly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from shared import metrics
from shared.metrics import CATALOGUE, PREFIX, Recorder, SnapshotCollector, merge

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def test_docs_list_exactly_the_catalogue():
    documented = set(re.findall(r"^\| `zeroforge_(\w+)`", DOC.read_text(), re.M))
    assert documented == set(CATALOGUE)
    for m in CATALOGUE.values():
        assert (m.kind == "counter") == m.name.endswith("_total"), m.name


def test_recorder_refuses_undeclared_or_misused_metrics():
    r = Recorder()
    with pytest.raises(KeyError, match="not declared"):
        r.inc("made_up_total")
    with pytest.raises(TypeError):
        r.set("learner_steps_total", 1)
    with pytest.raises(ValueError, match="labels"):
        r.inc("selfplay_games_total")


def test_merge_sums_counters_and_histograms_and_takes_max_version():
    a, b = Recorder(), Recorder()
    a.inc("selfplay_games_total", 3, worker_kind="selfplay")
    b.inc("selfplay_games_total", 4, worker_kind="selfplay")
    a.set("weights_version", 5, component="selfplay")
    b.set("weights_version", 7, component="selfplay")
    a.observe("inference_batch_size", 3)
    b.observe("inference_batch_size", 300, count=2)
    m = merge([a.snapshot(), b.snapshot()])
    assert metrics.value(m, "selfplay_games_total", worker_kind="selfplay") == 7
    assert metrics.value(m, "weights_version", component="selfplay") == 7
    [(_, hist)] = m["hists"]["inference_batch_size"].items()
    assert sum(hist[:-1]) == 3 and hist[-1] == 603


def test_collector_renders_prometheus_text():
    r = Recorder()
    r.inc("learner_steps_total", 12)
    r.set("actors_alive", 2, kind="selfplay")
    r.observe("inference_queue_wait_seconds", 0.002)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: merge([r.snapshot()])))
    text = generate_latest(registry).decode()
    assert f"{PREFIX}learner_steps_total 12.0" in text
    assert f'{PREFIX}actors_alive{{kind="selfplay"}} 2.0' in text
    assert f'{PREFIX}inference_queue_wait_seconds_bucket{{le="0.003"}} 1.0' in text
    assert f"# HELP {PREFIX}learner_steps_total Learner SGD steps." in text


def _learner(steps: float, games: float, lag_obs: int = 0) -> dict:
    r = Recorder()
    r.inc("learner_steps_total", steps)
    r.inc("learner_games_received_total", games)
    r.set("weights_version", steps // 10, component="learner")
    for _ in range(lag_obs):
        r.observe("policy_lag_versions", 1)
    return r.snapshot()


def test_a_restored_learner_never_takes_counters_back_and_counts_redone_work():
    """The issue's numbers: a learner killed at 2312 steps, its successor restores 2069
    from the checkpoint. The run's counter never reads 0 or 2069; the 243 steps the
    successor takes again are redone work, counted apart."""
    line = metrics.RestoredCounters()
    guard = metrics.MonotonicGuard()

    def seen(name: str) -> float:
        return metrics.value(guard.apply(merge([line.snapshot()])), name)

    line.report(0, _learner(2000, 900, lag_obs=5))
    line.report(0, _learner(2312, 1000, lag_obs=7))
    assert seen("learner_steps_total") == 2312
    line.ended(0)  # killed: no successor report yet
    assert seen("learner_steps_total") == 2312
    assert metrics.value(merge([line.snapshot()]), "weights_version", component="learner") == 231
    line.report(1, _learner(2069, 950))  # restored from the checkpoint
    assert seen("learner_steps_total") == 2312
    assert seen("learner_steps_redone_total") == 0
    line.report(1, _learner(2200, 990))
    assert seen("learner_steps_total") == 2312
    assert seen("learner_steps_redone_total") == 131
    assert seen("learner_games_received_again_total") == 40
    line.report(1, _learner(2400, 1010, lag_obs=2))
    assert seen("learner_steps_total") == 2400
    assert seen("learner_steps_redone_total") == 243
    assert seen("learner_games_received_again_total") == 50
    [(_, hist)] = merge([line.snapshot()])["hists"]["policy_lag_versions"].items()
    assert sum(hist[:-1]) == 9  # the dead learner's observations are kept
    # a second death before the third learner catches up
    line.ended(1)
    line.report(2, _learner(2300, 1000))
    line.report(2, _learner(2350, 1005))
    assert seen("learner_steps_total") == 2400
    assert seen("learner_steps_redone_total") == 243 + 50
    assert line.first_base is not None
    assert line.first_base[("learner_games_received_total", ())] == 900


def test_the_guard_holds_every_counter_at_what_was_served():
    guard = metrics.MonotonicGuard()
    a = Recorder()
    a.inc("selfplay_games_total", 10, worker_kind="selfplay")
    a.set("actors_alive", 2, kind="selfplay")
    assert metrics.value(guard.apply(merge([a.snapshot()])), "selfplay_games_total",
                         worker_kind="selfplay") == 10
    b = Recorder()
    b.inc("selfplay_games_total", 4, worker_kind="selfplay")
    b.set("actors_alive", 1, kind="selfplay")
    out = guard.apply(merge([b.snapshot()]))
    assert metrics.value(out, "selfplay_games_total", worker_kind="selfplay") == 10
    assert metrics.value(out, "actors_alive", kind="selfplay") == 1  # gauges move freely
    assert guard.clamped == 1


def test_status_games_count_a_killed_workers_last_received_games():
    """A worker killed after appending games it had not reported yet: the learner
    received them, so the run's ``games`` is at least the games received in this run."""
    from shared.status import RunStatus

    r = Recorder()
    r.inc("selfplay_games_total", 11028, worker_kind="selfplay")
    r.inc("learner_games_received_total", 11049)
    merged = merge([r.snapshot()])
    assert RunStatus.from_metrics(merged, received_before=0, run_id="r", state="running",
                                  elapsed_s=1.0).games == 11049
    # resumed from a checkpoint that had received 5000 games: 6049 of them in this run
    assert RunStatus.from_metrics(merged, received_before=5000, run_id="r", state="running",
                                  elapsed_s=1.0).games == 11028
    assert RunStatus.from_metrics(merged, run_id="r", state="r", elapsed_s=1.0).games == 11028
