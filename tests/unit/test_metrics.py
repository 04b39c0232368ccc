"""The metrics catalogue: declared once, documented, merged and served correctly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from zeroforge.shared import metrics
from zeroforge.shared.metrics import CATALOGUE, PREFIX, Recorder, SnapshotCollector, merge

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def test_docs_list_exactly_the_catalogue():
    documented = set(re.findall(r"^\| `zeroforge_(\w+)`", DOC.read_text(), re.M))
    assert documented == set(CATALOGUE)
    for m in CATALOGUE.values():
        assert (m.kind == "counter") == m.name.endswith("_total"), m.name


def _doc_rows() -> dict[str, list[str]]:
    """metric -> [type, labels, panel, meaning] from the docs' table."""
    rows = {}
    for line in DOC.read_text().splitlines():
        found = re.match(r"^\| `zeroforge_(\w+)` \|(.*)\|$", line)
        if found:
            rows[found[1]] = [c.strip() for c in found[2].split(" | ")]
    return rows


def test_docs_give_each_metric_its_type_labels_and_grafana_panel():
    """Each row's type and labels are the catalogue's, and its panel column names the
    dashboard panels whose queries read it (or says none): both ways round."""
    from zeroforge.deploy.monitoring import build_dashboard

    panels = {p.title: " ".join(q.expr for q in p.queries) for p in build_dashboard.panels()}
    rows = _doc_rows()
    charted: dict[str, set[str]] = {}
    for title, exprs in panels.items():
        for name in set(re.findall(PREFIX + r"(\w+)", exprs)):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            charted.setdefault(base, set()).add(title)
    for name, m in CATALOGUE.items():
        kind, labels, panel, _ = rows[name]
        assert kind == m.kind, name
        assert labels == (", ".join(m.labels) or "-"), name
        if panel.startswith("none"):
            assert name not in charted, f"{name} is charted in {charted.get(name)}"
            assert "(" in panel, f"{name}: say why no panel charts it"
        else:
            assert set(panel.split("; ")) == charted.get(name, set()), name


def test_names_follow_prometheus_conventions():
    """Base units last, ``_ratio`` for shares from 0 to 1, ``_total`` only on counters;
    no units Prometheus calls non-base (milliseconds, percent, kilobytes)."""
    for m in CATALOGUE.values():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", m.name), m.name
        assert not re.search(r"_(ms|milliseconds|percent|kb|mb|kilobytes|megabytes)(_|$)",
                             m.name), m.name
        if "seconds" in m.name or "bytes" in m.name:
            stem = m.name.removesuffix("_total")
            assert stem.endswith(("_seconds", "_bytes")), m.name
        if m.kind == "histogram" and m.name.endswith("_ratio"):
            assert m.buckets[-1] <= 1.0, m.name


def test_total_sums_the_series_that_carry_the_labels():
    r = Recorder()
    r.inc("selfplay_games_total", 3, worker_kind="selfplay", worker="0")
    r.inc("selfplay_games_total", 4, worker_kind="selfplay", worker="1")
    m = merge([r.snapshot()])
    assert metrics.total(m, "selfplay_games_total", worker_kind="selfplay") == 7
    assert metrics.total(m, "selfplay_games_total", worker="1") == 4
    assert metrics.total(m, "learner_steps_total") == 0


def test_node_gauges_merge_by_maximum_and_leave_with_their_actor():
    a, b = Recorder(), Recorder()
    for rec, used, rss in ((a, 5e9, 1e8), (b, 6e9, 2e8)):
        rec.set("node_memory_used_bytes", used, node="n1")
        rec.set("actor_memory_bytes", rss, kind="selfplay", actor=str(int(rss)), node="n1")
        rec.inc("actor_cpu_seconds_total", 2.0, kind="selfplay", actor="0", node="n1")
    m = merge([a.snapshot(), b.snapshot()])
    assert metrics.value(m, "node_memory_used_bytes", node="n1") == 6e9
    assert metrics.total(m, "actor_memory_bytes") == 3e8
    assert metrics.value(m, "actor_cpu_seconds_total", kind="selfplay", actor="0",
                         node="n1") == 4.0
    ended = metrics.without_live_gauges(b.snapshot())
    assert set(ended["values"]) == {"actor_cpu_seconds_total"}


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
    a.inc("selfplay_games_total", 3, worker_kind="selfplay", worker="0")
    b.inc("selfplay_games_total", 4, worker_kind="selfplay", worker="0")
    a.set("weights_version", 5, component="selfplay")
    b.set("weights_version", 7, component="selfplay")
    a.observe("inference_batch_size", 3, server="0")
    b.observe("inference_batch_size", 300, count=2, server="0")
    m = merge([a.snapshot(), b.snapshot()])
    assert metrics.value(m, "selfplay_games_total", worker_kind="selfplay", worker="0") == 7
    assert metrics.value(m, "weights_version", component="selfplay") == 7
    [(_, hist)] = m["hists"]["inference_batch_size"].items()
    assert sum(hist[:-1]) == 3 and hist[-1] == 603


def test_collector_renders_prometheus_text():
    r = Recorder()
    r.inc("learner_steps_total", 12)
    r.set("actors_alive", 2, kind="selfplay")
    r.observe("inference_queue_wait_seconds", 0.002, server="1")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: merge([r.snapshot()])))
    text = generate_latest(registry).decode()
    assert f"{PREFIX}learner_steps_total 12.0" in text
    assert f'{PREFIX}actors_alive{{kind="selfplay"}} 2.0' in text
    assert f'{PREFIX}inference_queue_wait_seconds_bucket{{le="0.003",server="1"}} 1.0' in text
    assert f"# HELP {PREFIX}learner_steps_total Learner SGD steps." in text


def test_collector_names_each_label_value_by_its_own_label():
    """Labels declared out of alphabetical order (``worker_kind, worker``; ``kind, actor,
    node``) keep their values: the series key is sorted, the family's labels are not."""
    r = Recorder()
    r.inc("selfplay_positions_total", 5, worker_kind="selfplay", worker="w0")
    r.inc("actor_cpu_seconds_total", 1.5, kind="learner", actor="0", node="ab12cd34")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: merge([r.snapshot()])))
    text = generate_latest(registry).decode()
    assert f'{PREFIX}selfplay_positions_total{{worker="w0",worker_kind="selfplay"}} 5.0' in text
    assert (f'{PREFIX}actor_cpu_seconds_total{{actor="0",kind="learner",node="ab12cd34"}} 1.5'
            in text)


def _learner(steps: float, games: float, lag_obs: int = 0) -> dict:
    r = Recorder()
    r.inc("learner_steps_total", steps)
    r.inc("learner_games_received_total", games)
    r.set("weights_version", steps // 10, component="learner")
    for _ in range(lag_obs):
        r.observe("learner_policy_lag_versions", 1)
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
    [(_, hist)] = merge([line.snapshot()])["hists"]["learner_policy_lag_versions"].items()
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
    a.inc("selfplay_games_total", 10, worker_kind="selfplay", worker="0")
    a.set("actors_alive", 2, kind="selfplay")
    assert metrics.value(guard.apply(merge([a.snapshot()])), "selfplay_games_total",
                         worker_kind="selfplay", worker="0") == 10
    b = Recorder()
    b.inc("selfplay_games_total", 4, worker_kind="selfplay", worker="0")
    b.set("actors_alive", 1, kind="selfplay")
    out = guard.apply(merge([b.snapshot()]))
    assert metrics.value(out, "selfplay_games_total", worker_kind="selfplay", worker="0") == 10
    assert metrics.value(out, "actors_alive", kind="selfplay") == 1  # gauges move freely
    assert guard.clamped == 1


def test_status_games_count_a_killed_workers_last_received_games():
    """A worker killed after appending games it had not reported yet: the learner
    received them, so the run's ``games`` is at least the games received in this run."""
    from zeroforge.deploy.runtime.status import RunStatus

    r = Recorder()
    r.inc("selfplay_games_total", 11028, worker_kind="selfplay", worker="0")
    r.inc("learner_games_received_total", 11049)
    merged = merge([r.snapshot()])
    assert RunStatus.from_metrics(merged, received_before=0, run_id="r", state="running",
                                  elapsed_s=1.0).games == 11049
    # resumed from a checkpoint that had received 5000 games: 6049 of them in this run
    assert RunStatus.from_metrics(merged, received_before=5000, run_id="r", state="running",
                                  elapsed_s=1.0).games == 11028
    assert RunStatus.from_metrics(merged, run_id="r", state="r", elapsed_s=1.0).games == 11028
