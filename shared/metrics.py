"""Every metric of zeroforge, declared once, and the plumbing to gather them.

Components never touch prometheus directly: each owns a ``Recorder`` and reports plain
snapshots (``Recorder.snapshot()``: JSON/msgpack-able dicts). The run's controller merges
the snapshots of all live actors and serves them on one ``/metrics`` endpoint through
``SnapshotCollector``. ``docs/metrics.md`` explains each metric; a test keeps the two in step.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

PREFIX = "zeroforge_"


@dataclass(frozen=True)
class Metric:
    """One declared metric."""

    name: str
    """Name without the ``zeroforge_`` prefix; counters end in ``_total``, times in
    ``_seconds``."""
    kind: str
    """``counter``, ``gauge`` or ``histogram``."""
    help: str
    """One line for Prometheus' HELP."""
    labels: tuple[str, ...] = ()
    """Label names, in order."""
    buckets: tuple[float, ...] = ()
    """Histogram upper bounds (without +Inf)."""


_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
_WAIT_BUCKETS = (0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)

CATALOGUE: dict[str, Metric] = {m.name: m for m in [
    Metric("selfplay_games_total", "counter", "Self-play games finished.", ("worker_kind",)),
    Metric("selfplay_positions_total", "counter", "Self-play positions (moves) played.",
           ("worker_kind",)),
    Metric("selfplay_simulations_total", "counter", "MCTS simulations run by self-play.",
           ("worker_kind",)),
    Metric("nn_evaluations_total", "counter",
           "Positions evaluated by a network (in-process or by an inference server).",
           ("source",)),
    Metric("inference_requests_total", "counter", "Evaluation requests served by inference "
           "servers (one request = one worker's leaf batch)."),
    Metric("inference_batch_size", "histogram",
           "Positions per network call of an inference server (requests merged).",
           buckets=_BATCH_BUCKETS),
    Metric("inference_queue_wait_seconds", "histogram",
           "Time a request waited in an inference server's queue before its batch ran.",
           buckets=_WAIT_BUCKETS),
    Metric("learner_steps_total", "counter", "Learner SGD steps."),
    Metric("learner_samples_trained_total", "counter",
           "Positions the learner trained on (a position counts once per time it is sampled)."),
    Metric("learner_games_received_total", "counter", "Games the learner took from the stream."),
    Metric("learner_positions_received_total", "counter",
           "Positions the learner added to its replay window."),
    Metric("learner_samples_per_insert", "gauge",
           "Positions trained per position inserted so far (the reuse ratio)."),
    Metric("learner_loss", "gauge", "Last training loss by part.", ("part",)),
    Metric("replay_window_positions", "gauge", "Positions held in the replay window."),
    Metric("stream_lag_entries", "gauge",
           "Sample-stream entries written but not yet acknowledged by the learner."),
    Metric("weights_version", "gauge", "Weights version held by a component.",
           ("component",)),
    Metric("policy_lag_versions", "histogram",
           "Learner weights version minus the version that played a received game.",
           buckets=(0, 1, 2, 3, 5, 8, 13, 21, 34, 55)),
    Metric("actors_desired", "gauge", "Actors the controller wants, by kind.", ("kind",)),
    Metric("actors_alive", "gauge", "Actors alive, by kind.", ("kind",)),
    Metric("actor_restarts_total", "counter", "Actors the controller replaced after they died.",
           ("kind",)),
    Metric("rejected_entries_total", "counter",
           "Sample-stream entries rejected by the learner, by reason.", ("reason",)),
    Metric("evaluator_score", "gauge",
           "Score (wins + draws/2) / games of the newest weights against an anchor.",
           ("anchor",)),
    Metric("evaluator_elo", "gauge", "Elo difference of the newest weights against an anchor.",
           ("anchor",)),
    Metric("evaluator_weights_version", "gauge", "Weights version of the last evaluation."),
]}
"""Name (without prefix) -> Metric."""


def _key(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in labels.items()))


class Recorder:
    """Thread-safe counters, gauges and histograms of one component, as plain data."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, dict[tuple, float]] = {}
        self._hists: dict[str, dict[tuple, list[float]]] = {}

    def _metric(self, name: str, kind: str, labels: Mapping[str, str]) -> Metric:
        m = CATALOGUE.get(name)
        if m is None:
            raise KeyError(f"metric {name!r} is not declared in shared/metrics.py")
        if m.kind != kind:
            raise TypeError(f"metric {name!r} is a {m.kind}, not a {kind}")
        if set(labels) != set(m.labels):
            raise ValueError(f"metric {name!r} takes labels {m.labels}, got {tuple(labels)}")
        return m

    def inc(self, name: str, value: float = 1.0, **labels: str) -> None:
        self._metric(name, "counter", labels)
        with self._lock:
            series = self._values.setdefault(name, {})
            series[_key(labels)] = series.get(_key(labels), 0.0) + value

    def set(self, name: str, value: float, **labels: str) -> None:
        self._metric(name, "gauge", labels)
        with self._lock:
            self._values.setdefault(name, {})[_key(labels)] = float(value)

    def observe(self, name: str, value: float, count: int = 1, **labels: str) -> None:
        m = self._metric(name, "histogram", labels)
        with self._lock:
            h = self._hists.setdefault(name, {}).setdefault(
                _key(labels), [0.0] * (len(m.buckets) + 2))  # buckets..., +Inf, sum
            h[bisect.bisect_left(m.buckets, value)] += count
            h[-1] += value * count

    def snapshot(self) -> dict:
        """Plain data: {"values": {name: [[labels, value], ...]}, "hists": {...}}."""
        with self._lock:
            return {
                "values": {n: [[list(map(list, k)), v] for k, v in s.items()]
                           for n, s in self._values.items()},
                "hists": {n: [[list(map(list, k)), list(h)] for k, h in s.items()]
                          for n, s in self._hists.items()},
            }


def merge(snapshots: Iterable[Mapping]) -> dict:
    """Sum counters and histograms, and gauges too (a per-actor gauge such as a queue
    length adds up); gauges that must not add (versions, scores) carry a label or are
    reported by one component only."""
    values: dict[str, dict[tuple, float]] = {}
    hists: dict[str, dict[tuple, list[float]]] = {}
    for snap in snapshots:
        for name, series in snap.get("values", {}).items():
            vout = values.setdefault(name, {})
            for labels, v in series:
                k = tuple(tuple(p) for p in labels)
                if CATALOGUE[name].kind == "gauge" and name in _MAX_GAUGES:
                    vout[k] = max(vout.get(k, float("-inf")), v)
                else:
                    vout[k] = vout.get(k, 0.0) + v
        for name, series in snap.get("hists", {}).items():
            hout = hists.setdefault(name, {})
            for labels, h in series:
                k = tuple(tuple(p) for p in labels)
                acc = hout.setdefault(k, [0.0] * len(h))
                hout[k] = [a + b for a, b in zip(acc, h, strict=True)]
    return {"values": values, "hists": hists}


_MAX_GAUGES = {"weights_version", "evaluator_weights_version"}
"""Gauges merged by maximum (the newest version anywhere) rather than by sum."""


def value(merged: Mapping, name: str, **labels: str) -> float:
    """One series of a merged snapshot (0 if absent): for ``zeroforge status``."""
    return float(merged["values"].get(name, {}).get(_key(labels), 0.0))


class SnapshotCollector:
    """A prometheus-client collector over whatever ``source()`` returns (a merged snapshot)."""

    def __init__(self, source) -> None:
        self._source = source

    def collect(self):
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        merged = self._source()
        for name, m in CATALOGUE.items():
            full = PREFIX + name
            if m.kind == "histogram":
                fam = HistogramMetricFamily(full, m.help, labels=m.labels)
                for k, h in merged["hists"].get(name, {}).items():
                    cumulative, acc = [], 0.0
                    for bound, count in zip([*m.buckets, float("inf")], h[:-1], strict=True):
                        acc += count
                        cumulative.append((_le(bound), acc))
                    fam.add_metric([v for _, v in k], cumulative, sum_value=h[-1])
            else:
                cls = CounterMetricFamily if m.kind == "counter" else GaugeMetricFamily
                # CounterMetricFamily appends _total itself
                fam = cls(full[: -len("_total")] if m.kind == "counter" else full, m.help,
                          labels=m.labels)
                for k, v in merged["values"].get(name, {}).items():
                    fam.add_metric([val for _, val in k], v)
            yield fam


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


class MetricsEndpoint:
    """The run's one Prometheus endpoint over a merged snapshot; the local run and the Ray
    controller both serve their metrics with it."""

    def __init__(self, source: Callable[[], Mapping], host: str = "127.0.0.1",
                 port: int = 0) -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry(auto_describe=False)
        registry.register(SnapshotCollector(source))
        self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        self.url = f"http://{host}:{self._server.server_port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
