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
