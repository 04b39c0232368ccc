"""The run's metric history (deploy/dashboard/history.py): flattening merged snapshots
into series keys, interval quantiles of histograms, bounded memory by thinning, the file
round trip, and series no code knows about."""

from __future__ import annotations

import json

import pytest

from zeroforge.deploy.dashboard.history import (
    Flattener,
    History,
    HistoryConfig,
    Sampler,
    load,
    quantile,
    series_key,
)
from zeroforge.shared import metrics


def _merged(*recorders: metrics.Recorder) -> dict:
    return metrics.merge([r.snapshot() for r in recorders])


def test_series_keys_sort_labels():
    assert series_key("learner_steps_total", ()) == "learner_steps_total"
    assert series_key("x", (("b", "2"), ("a", "1"))) == 'x{a="1",b="2"}'


def test_quantile_interpolates_inside_the_bucket():
    bounds = (1.0, 2.0, 4.0)
    assert quantile(bounds, [0, 0, 0, 0], 0.5) is None
    assert quantile(bounds, [10, 0, 0, 0], 0.5) == pytest.approx(0.5)
    # 10 in (1, 2], 10 in (2, 4]: the median is the top of the first, p99 near 4
    assert quantile(bounds, [0, 10, 10, 0], 0.5) == pytest.approx(2.0)
    assert quantile(bounds, [0, 10, 10, 0], 0.99) == pytest.approx(2 + 2 * 9.8 / 10)
    # the +Inf bucket answers the largest finite bound
    assert quantile(bounds, [0, 0, 0, 5], 0.5) == 4.0


def test_histogram_quantiles_are_those_of_each_interval():
    rec = metrics.Recorder()
    flat = Flattener()
    for _ in range(100):
        rec.observe("inference_queue_wait_seconds", 0.0002, server="0")
    first = flat(_merged(rec))
    key = 'inference_queue_wait_seconds_p50{server="0"}'
    assert 0.0001 < first[key] <= 0.0003
    assert first['inference_queue_wait_seconds_count{server="0"}'] == 100
    for _ in range(10):
        rec.observe("inference_queue_wait_seconds", 0.5, server="0")
    second = flat(_merged(rec))
    # the new interval saw only slow requests: its median is slow although most of all
    # observations so far were fast
    assert 0.3 < second[key] <= 1.0
    assert second['inference_queue_wait_seconds_count{server="0"}'] == 110
    assert second['inference_queue_wait_seconds_sum{server="0"}'] == pytest.approx(5.02)
    third = flat(_merged(rec))
    assert third[key] is None  # nothing observed in this interval


def test_generic_series_appear_without_code_changes(monkeypatch):
    # a metric this module has never heard of, declared the ordinary way
    monkeypatch.setitem(metrics.CATALOGUE, "brand_new_things_total",
                        metrics.Metric("brand_new_things_total", "counter", "new", ("colour",)))
    rec = metrics.Recorder()
    history = History("r", 1000.0)
    rec.inc("learner_steps_total", 3)
    history.sample(_merged(rec), t=2.0)
    rec.inc("brand_new_things_total", 5, colour="red")
    history.sample(_merged(rec), t=4.0)
    data = history.to_json()
    assert data["t"] == [2.0, 4.0]
    assert data["series"]["learner_steps_total"] == [3.0, 3.0]
    assert data["series"]['brand_new_things_total{colour="red"}'] == [None, 5.0]
    assert history.to_json(since=2.0)["t"] == [4.0]
    assert history.to_json(since=2.0)["series"]["learner_steps_total"] == [3.0]


def test_memory_is_bounded_and_the_whole_run_stays_covered():
    history = History("r", 0.0, HistoryConfig(interval_s=1.0, max_points=100))
    for i in range(1, 10_001):
        history.add(float(i), {"c": float(i)})
    data = history.to_json()
    assert len(data["t"]) <= 100
    assert data["t"][-1] == 10_000.0
    assert data["t"][0] == 1.0  # the start of the run is still there
    assert data["t"] == sorted(data["t"])
    gaps = [b - a for a, b in zip(data["t"], data["t"][1:], strict=False)]
    assert max(gaps) < 10_000 / 8  # coarser further back, but no part of the run is lost
    # the later point of each thinned pair: a cumulative counter stays exact at each t
    assert data["series"]["c"] == data["t"]
    # the newest samples keep full resolution
    assert data["t"][-5:] == [float(i) for i in range(9996, 10_001)]


def test_file_round_trip(tmp_path):
    path = tmp_path / "history.jsonl"
    history = History("rt", 1234.5, HistoryConfig(interval_s=2.0), path=path)
    rec = metrics.Recorder()
    for step in range(1, 6):
        rec.inc("learner_steps_total", 10)
        rec.set("learner_loss", 2.0 / step, part="total")
        rec.set("stream_lag_entries", 7)  # never changes: written once
        rec.observe("learner_policy_lag_versions", step)
        history.sample(_merged(rec), t=2.0 * step)
    history.close()
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {"run_id": "rt", "started": 1234.5, "interval_s": 2.0}
    assert "stream_lag_entries" in json.loads(lines[1])["v"]
    assert "stream_lag_entries" not in json.loads(lines[2])["v"]
    back = load(path)
    assert back.run_id == "rt" and back.started == 1234.5
    assert back.to_json() == history.to_json()


def test_load_stops_at_a_cut_off_line_and_names_a_bad_file(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text('{"run_id": "x", "started": 1, "interval_s": 2}\n'
                    '{"t": 2, "v": {"a": 1}}\n{"t": 4, "v": {"a"')
    assert load(path).to_json()["t"] == [2.0]
    bad = tmp_path / "other.jsonl"
    bad.write_text("hello\n")
    with pytest.raises(ValueError, match="not a zeroforge run history"):
        load(bad)


def test_sampler_survives_a_failing_source():
    history = History("s", 0.0, HistoryConfig(interval_s=0.01))
    calls = []

    def source() -> dict:
        calls.append(1)
        if len(calls) == 2:
            raise ConnectionError("controller restarting")
        return {"values": {"learner_steps_total": {(): float(len(calls))}}, "hists": {}}

    sampler = Sampler(history, source)
    sampler.tick()
    sampler.tick()
    sampler.tick()
    assert sampler.errors == 1
    assert history.to_json()["series"]["learner_steps_total"] == [1.0, 3.0]


def _plain(merged: dict) -> dict:
    """A merged snapshot as plain data (``Controller.metrics_snapshot``'s form)."""
    return {part: {n: [[list(map(list, k)), v] for k, v in series.items()]
                   for n, series in merged[part].items()} for part in ("values", "hists")}


def test_the_same_snapshot_twice_is_one_sample():
    # the distributed driver's copy of the controller's snapshot changes about once a
    # second: sampling it twice in between must not add an interval without observations
    history = History("s", 0.0)
    rec = metrics.Recorder()
    rec.observe("inference_request_latency_seconds", 0.004, server="0")
    copy = {"snap": _merged(rec)}
    sampler = Sampler(history, lambda: json.loads(json.dumps(_plain(copy["snap"]))))
    sampler.tick()
    sampler.tick()  # an equal copy (a new object, as each fetch across Ray gives)
    rec.observe("inference_request_latency_seconds", 0.004, server="0")
    copy["snap"] = _merged(rec)
    sampler.tick()
    p50 = history.to_json()["series"]['inference_request_latency_seconds_p50{server="0"}']
    assert len(p50) == 2 and None not in p50


def test_plain_data_snapshots_across_ray_are_read_too():
    # Controller.metrics_snapshot: lists of [labels, value] instead of tuple-keyed dicts
    flat = Flattener()
    out = flat({"values": {"actors_alive": [[[["kind", "selfplay"]], 2.0]]},
                "hists": {"learner_policy_lag_versions": [[[], [0, 4] + [0] * 9 + [6.0]]]}})
    assert out['actors_alive{kind="selfplay"}'] == 2.0
    assert out["learner_policy_lag_versions_count"] == 4
    assert 0 < out["learner_policy_lag_versions_p50"] <= 1
