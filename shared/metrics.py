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
from typing import Any

PREFIX = "zeroforge_"


@dataclass(frozen=True)
class Metric:
    """One declared metric."""

    name: str
    """Name without the ``zeroforge_`` prefix, in Prometheus' conventions: base units named
    at the end (``_seconds``, ``_bytes``, ``_ratio`` for shares from 0 to 1; counts name
    what they count: ``_positions``, ``_entries``, ``_versions``), counters end in
    ``_total``."""
    kind: str
    """``counter``, ``gauge`` or ``histogram``."""
    help: str
    """One line for Prometheus' HELP."""
    labels: tuple[str, ...] = ()
    """Label names, in order."""
    buckets: tuple[float, ...] = ()
    """Histogram upper bounds (without +Inf)."""


_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
_DELIVERY_BUCKETS = (0.01, 0.03, 0.1, 0.3, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0)
_WAIT_BUCKETS = (0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
_LATENCY_BUCKETS = (0.0003, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0,
                    5.0)
_DEPTH_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128)
_FILL_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
_ACTOR = ("kind", "actor", "node")

CATALOGUE: dict[str, Metric] = {m.name: m for m in [
    Metric("selfplay_games_total", "counter", "Self-play games finished.",
           ("worker_kind", "worker")),
    Metric("selfplay_positions_total", "counter", "Self-play positions (moves) played.",
           ("worker_kind", "worker")),
    Metric("selfplay_simulations_total", "counter", "MCTS simulations run by self-play.",
           ("worker_kind", "worker")),
    Metric("selfplay_policy_targets_total", "counter",
           "Self-play positions recorded with a policy target (all of them unless the "
           "playout cap is on).", ("worker_kind", "worker")),
    Metric("selfplay_throttled_seconds_total", "counter",
           "Time a self-play worker paused because the learner's samples-per-insert was "
           "below its floor.", ("worker_kind", "worker")),
    Metric("selfplay_backpressure_seconds_total", "counter",
           "Time a self-play worker's appends waited for room in the sample stream (its "
           "backlog at stream.max_backlog).", ("worker_kind", "worker")),
    Metric("selfplay_games_resent_total", "counter",
           "Games a self-play worker appended again because a restarted Redis had lost them.",
           ("worker_kind", "worker")),
    Metric("selfplay_games_rerouted_total", "counter",
           "Games a self-play worker appended to another stream shard than their own (theirs "
           "down or full).", ("worker_kind", "worker")),
    Metric("selfplay_cpu_share_seconds_total", "counter",
           "Time a self-play worker slept to keep to its selfplay.cpu_share of a core.",
           ("worker_kind", "worker")),
    Metric("weights_fetches_total", "counter",
           "Published weights a self-play worker took, by where the blob came from.",
           ("worker_kind", "worker", "source")),
    Metric("weights_delivery_seconds", "histogram",
           "Time from a weights publish to a self-play worker or an inference server "
           "having the blob (publish time to the end of the fetch; hosts' clocks taken "
           "as in sync).",
           buckets=_DELIVERY_BUCKETS),
    Metric("weights_rejected_total", "counter",
           "Published weights versions a reader refused and did not load (counted once per "
           "reader and version), by reason: unsigned, bad_signature, corrupt.",
           ("component", "reason")),
    Metric("nn_evaluations_total", "counter",
           "Positions evaluated by a network (in-process or by an inference server).",
           ("source",)),
    Metric("eval_cache_lookups_total", "counter",
           "Positions looked up in an evaluation cache (worker's or inference server's).",
           ("source",)),
    Metric("eval_cache_hits_total", "counter",
           "Positions an evaluation cache answered without the network.", ("source",)),
    Metric("inference_requests_total", "counter", "Evaluation requests served by inference "
           "servers (one request = one worker's leaf batch).", ("server",)),
    Metric("inference_batch_size", "histogram",
           "Positions per network call of an inference server (requests merged).",
           ("server",), buckets=_BATCH_BUCKETS),
    Metric("inference_batch_fill_ratio", "histogram",
           "Positions per network call of an inference server / its max batch.",
           ("server",), buckets=_FILL_BUCKETS),
    Metric("inference_queue_depth", "histogram",
           "Requests queued at an inference server when it forms a batch (those the batch "
           "takes and those left for the next).",
           ("server",), buckets=_DEPTH_BUCKETS),
    Metric("inference_queue_wait_seconds", "histogram",
           "Time a request waited in an inference server's queue before its batch ran.",
           ("server",), buckets=_WAIT_BUCKETS),
    Metric("inference_request_latency_seconds", "histogram",
           "Time from a request's arrival at an inference server to its answer.",
           ("server",), buckets=_LATENCY_BUCKETS),
    Metric("learner_steps_total", "counter", "Learner SGD steps."),
    Metric("learner_replica_steps_total", "counter",
           "Group steps a data-parallel learner replica of rank 1 and up took part in "
           "(``learner.replicas`` > 1; rank 0 counts ``learner_steps_total``).",
           ("replica",)),
    Metric("learner_samples_trained_total", "counter",
           "Positions the learner trained on (a position counts once per time it is sampled)."),
    Metric("learner_games_received_total", "counter", "Games the learner took from the stream."),
    Metric("learner_positions_received_total", "counter",
           "Positions the learner added to its replay window."),
    Metric("learner_steps_redone_total", "counter",
           "Learner steps taken again after a learner restart (the dead learner had taken "
           "them after its last checkpoint)."),
    Metric("learner_samples_redone_total", "counter",
           "Positions trained on again after a learner restart (samples of redone steps)."),
    Metric("learner_games_received_again_total", "counter",
           "Games a restarted learner received again (the dead learner had received them "
           "after its last checkpoint)."),
    Metric("learner_positions_received_again_total", "counter",
           "Positions of the games a restarted learner received again."),
    Metric("learner_samples_per_insert", "gauge",
           "Positions trained per position inserted so far (the reuse ratio)."),
    Metric("learner_samples_per_insert_target", "gauge",
           "The configured samples-per-insert ratio (learner.samples_per_insert)."),
    Metric("learner_samples_per_insert_floor", "gauge",
           "The ratio below which self-play pauses: the target x (1 - "
           "learner.samples_per_insert_tolerance); 0 without a target."),
    Metric("learner_throttled_seconds_total", "counter",
           "Time the learner waited for data because its samples-per-insert was at target."),
    Metric("learner_loss", "gauge", "Last training loss by part.", ("part",)),
    Metric("learner_save_failures_total", "counter",
           "Learner writes to the run directory that failed (a full or read-only disk), by "
           "file: checkpoint (the last good one stays) or snapshot (skipped).", ("file",)),
    Metric("replay_window_positions", "gauge", "Positions held in the replay window."),
    Metric("replay_window_positions_by_size", "gauge",
           "Positions held in the replay window per board size (runs with "
           "selfplay.board_sizes only).", ("board_size",)),
    Metric("learner_batches_by_size_total", "counter",
           "Training batches the learner took per board size (runs with "
           "selfplay.board_sizes only; a batch is of one size).", ("board_size",)),
    Metric("stream_lag_entries", "gauge",
           "Sample-stream entries written but not yet acknowledged by the learner."),
    Metric("weights_version", "gauge", "Weights version held by a component.",
           ("component",)),
    Metric("learner_policy_lag_versions", "histogram",
           "Learner weights version minus the version that played a received game.",
           buckets=(0, 1, 2, 3, 5, 8, 13, 21, 34, 55)),
    Metric("actors_desired", "gauge", "Actors the controller wants, by kind.", ("kind",)),
    Metric("actors_alive", "gauge", "Actors alive, by kind.", ("kind",)),
    Metric("actor_restarts_total", "counter", "Actors the controller replaced after they died.",
           ("kind",)),
    Metric("rejected_entries_total", "counter",
           "Sample-stream entries rejected by the learner, by reason.", ("reason",)),
    Metric("evaluator_score_ratio", "gauge",
           "Score (wins + draws/2) / games of the newest weights against an anchor.",
           ("anchor",)),
    Metric("evaluator_elo", "gauge", "Elo difference of the newest weights against an anchor.",
           ("anchor",)),
    Metric("evaluator_elo_vs_anchor", "gauge",
           "Elo difference implied by the latest score against an anchor, clipped to +-800.",
           ("anchor",)),
    Metric("evaluator_weights_version", "gauge", "Weights version of the last evaluation."),
    Metric("evaluator_ladder_elo", "gauge",
           "Run ladder rating (Bradley-Terry fit, random = 0) of the newest evaluated weights "
           "(player=latest) and of each anchor: estimate and 95% interval bounds.",
           ("player", "bound")),
    Metric("evaluator_best_snapshot_version", "gauge",
           "Weights version in RUN_DIR/best.safetensors: the evaluated version with the "
           "highest lower end of its ladder interval."),
    Metric("evaluator_best_snapshot_elo", "gauge",
           "Ladder rating of the best snapshot: estimate and 95% interval bounds.",
           ("bound",)),
    Metric("actor_cpu_seconds_total", "counter", "CPU time (user + system) of an actor's "
           "process.", _ACTOR),
    Metric("actor_memory_bytes", "gauge", "Resident memory of an actor's process.", _ACTOR),
    Metric("node_cpu_utilisation_ratio", "gauge",
           "Busy share of a node's CPUs (all cores) since the last report.", ("node",)),
    Metric("node_memory_used_bytes", "gauge", "Memory in use on a node (total - available).",
           ("node",)),
    Metric("node_memory_total_bytes", "gauge", "Memory of a node.", ("node",)),
    Metric("node_gpu_utilisation_ratio", "gauge",
           "Busy share of a GPU (nvidia-smi), where the node has one.", ("node", "gpu")),
    Metric("node_gpu_memory_used_bytes", "gauge", "Memory in use on a GPU (nvidia-smi).",
           ("node", "gpu")),
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


def as_snapshot(merged: Mapping) -> dict:
    """A ``merge`` result in a ``Recorder.snapshot``'s plain form (lists, not tuple keys),
    so a merged view can be merged again or cross a process boundary."""
    return {"values": {n: [[list(map(list, k)), v] for k, v in s.items()]
                       for n, s in merged["values"].items()},
            "hists": {n: [[list(map(list, k)), list(h)] for k, h in s.items()]
                      for n, s in merged.get("hists", {}).items()}}


def relabel(snapshot: Mapping, **labels: str) -> dict:
    """``snapshot`` (plain form) with the values of these labels replaced where a series
    carries them (a host's workers reported under the host's label)."""
    def swap(series_labels: list) -> list:
        return [[k, labels.get(k, v)] for k, v in series_labels]

    return {"values": {n: [[swap(lb), v] for lb, v in s]
                       for n, s in snapshot.get("values", {}).items()},
            "hists": {n: [[swap(lb), h] for lb, h in s]
                      for n, s in snapshot.get("hists", {}).items()}}


def fold_labels(snapshot: Mapping, labels: Iterable[str], value: str) -> dict:
    """``snapshot`` (plain form) with every series that carries one of ``labels`` moved
    under ``label=value`` and merged there (a run's many hosts, processes and nodes folded
    into one series per metric), in plain form."""
    return as_snapshot(merge([relabel(snapshot, **dict.fromkeys(labels, value))]))


def snapshot_total(snapshot: Mapping, name: str) -> float:
    """One counter of a plain snapshot, summed over its series."""
    return float(sum(v for _, v in (snapshot or {}).get("values", {}).get(name, [])))


NODE_GAUGES = frozenset({"node_cpu_utilisation_ratio", "node_memory_used_bytes",
                         "node_memory_total_bytes", "node_gpu_utilisation_ratio",
                         "node_gpu_memory_used_bytes"})
"""Per-node gauges: every actor on a node reports the same node, so they merge by maximum."""

_MAX_GAUGES = {"weights_version", "evaluator_weights_version", *NODE_GAUGES}
"""Gauges merged by maximum (the newest version anywhere, a node's figure reported by each
of its actors) rather than by sum."""

LIVE_GAUGES = frozenset({"actor_memory_bytes", *NODE_GAUGES})
"""Gauges that describe a live process or node now: an ended actor's last values of these
must not linger in the run's view (``without_live_gauges``)."""


def without_live_gauges(snapshot: Mapping) -> dict:
    """An ended actor's last snapshot without ``LIVE_GAUGES`` (its counters still count,
    but its memory is freed and its node figures go stale)."""
    return {"values": {n: s for n, s in snapshot.get("values", {}).items()
                       if n not in LIVE_GAUGES},
            "hists": dict(snapshot.get("hists", {}))}


REDONE: dict[str, str] = {
    "learner_steps_total": "learner_steps_redone_total",
    "learner_samples_trained_total": "learner_samples_redone_total",
    "learner_games_received_total": "learner_games_received_again_total",
    "learner_positions_received_total": "learner_positions_received_again_total",
}
"""Counter of a restored lineage -> the counter of the work its successors did again."""


Series = tuple[str, tuple[tuple[str, str], ...]]


def _counters(snapshot: Mapping) -> dict[Series, float]:
    return {(name, tuple(tuple(p) for p in labels)): float(v)
            for name, series in snapshot.get("values", {}).items()
            if CATALOGUE[name].kind == "counter" for labels, v in series}


class RestoredCounters:
    """Keeps the counters of a line of actors monotonic when each successor restores its
    counters from a checkpoint (the learner): within a run no counter goes back.

    A learner killed at, say, 2312 steps is replaced by one that restores the checkpoint's
    2069 and trains on from there. Without care the run's ``learner_steps_total`` would
    read 0 until the successor reports, then 2069. Here:

    - the **floor** of a counter series is the highest value any ended actor of the line
      reported; the line reports ``max(floor, sum of the live actors' values)``;
    - work a successor does between its **base** (its first report: the checkpoint's
      totals, plus whatever it did before the controller first asked) and the floor it
      started under is work done again: ``min(value, floor) - base``, counted in the
      ``REDONE`` counters (``learner_steps_redone_total``...), so that a counter plus its
      redone counter is all the work done (a slight undercount when the successor worked
      before its first report);
    - histograms of ended actors are kept and added to the live ones' (observations made
      are never taken back); gauges come from the live actors, or from the last ended
      one while none has reported yet.

    ``report(actor, snapshot)`` for each live actor's newest snapshot (the first one is
    its base), ``ended(actor)`` when one ends (crashed or not), ``snapshot()`` for the
    line's merged view, which ``merge`` takes like any actor's.
    """

    def __init__(self) -> None:
        self.floor: dict[Series, float] = {}
        self.redone: dict[Series, float] = {}
        """Work done again by ended actors, by counter series (of ``REDONE``'s keys)."""
        self._live: dict[Any, dict] = {}
        self._base: dict[Any, dict[Series, float]] = {}
        self._start_floor: dict[Any, dict[Series, float]] = {}
        self._hists: list[Mapping] = []
        self._gauges: dict = {}
        self.first_base: dict[Series, float] | None = None
        """The base of the line's first actor: what the run resumed from (plus what it did
        before its first report)."""

    def report(self, actor: Any, snapshot: Mapping) -> None:
        if actor not in self._base:
            self._base[actor] = _counters(snapshot)
            if self.first_base is None:
                self.first_base = self._base[actor]
            self._start_floor[actor] = dict(self.floor)
        self._live[actor] = dict(snapshot)

    def ended(self, actor: Any) -> None:
        """``actor`` ended: its last report becomes part of the floor."""
        snap = self._live.pop(actor, None)
        if snap is None:
            return
        for series, amount in self._redone_by(actor, snap).items():
            self.redone[series] = self.redone.get(series, 0.0) + amount
        for series, v in _counters(snap).items():
            self.floor[series] = max(self.floor.get(series, 0.0), v)
        self._hists.append({"hists": snap.get("hists", {})})
        self._gauges = {n: s for n, s in snap.get("values", {}).items()
                        if CATALOGUE[n].kind == "gauge"}
        del self._base[actor], self._start_floor[actor]

    def _redone_by(self, actor: Any, snap: Mapping) -> dict[Series, float]:
        base, floor = self._base[actor], self._start_floor[actor]
        return {s: max(0.0, min(v, floor.get(s, 0.0)) - base.get(s, 0.0))
                for s, v in _counters(snap).items() if s[0] in REDONE}

    def snapshot(self) -> dict:
        live = merge([{"values": s.get("values", {})} for s in self._live.values()])
        values: dict[str, list] = {}
        counters: dict[Series, float] = dict(self.floor)
        for name, series in live["values"].items():
            for k, v in series.items():
                if CATALOGUE[name].kind == "counter":
                    counters[(name, k)] = max(counters.get((name, k), 0.0), v)
                else:
                    values.setdefault(name, []).append([list(map(list, k)), v])
        if not self._live:
            values.update(self._gauges)
        redone = dict(self.redone)
        for actor, snap in self._live.items():
            for series, amount in self._redone_by(actor, snap).items():
                redone[series] = redone.get(series, 0.0) + amount
        for (name, k), amount in redone.items():
            counters[(REDONE[name], k)] = counters.get((REDONE[name], k), 0.0) + amount
        for (name, k), v in counters.items():
            values.setdefault(name, []).append([list(map(list, k)), v])
        hists = merge([*self._hists, *({"hists": s.get("hists", {})}
                                        for s in self._live.values())])["hists"]
        return {"values": values,
                "hists": {n: [[list(map(list, k)), h] for k, h in s.items()]
                          for n, s in hists.items()}}


class MonotonicGuard:
    """The last line of the promise that counters never decrease within a run: each
    counter series (and histogram bucket) served is at least what was served before."""

    def __init__(self) -> None:
        self._values: dict[Series, float] = {}
        self._hists: dict[Series, list[float]] = {}
        self.clamped = 0
        """Times a series came in below what had been served (and was held up)."""

    def state(self, without_labels: Iterable[str] = ()) -> dict:
        """Plain data for a successor: the floors, less the series that carry one of
        ``without_labels`` (one process's series: its floors come with that process's own
        next report, which never goes back)."""
        dropped = set(without_labels)

        def keep(key: Series) -> bool:
            return all(k not in dropped for k, _ in key[1])

        return {"_values": {s: v for s, v in self._values.items() if keep(s)},
                "_hists": {s: h for s, h in self._hists.items() if keep(s)},
                "clamped": self.clamped}

    def apply(self, merged: dict) -> dict:
        for name, series in merged["values"].items():
            if CATALOGUE[name].kind != "counter":
                continue
            for k, v in series.items():
                top = self._values.get((name, k), 0.0)
                if v < top:
                    series[k] = top
                    self.clamped += 1
                else:
                    self._values[(name, k)] = v
        for (name, k), top in self._values.items():
            merged["values"].setdefault(name, {}).setdefault(k, top)
        for name, hseries in merged["hists"].items():
            for k, h in hseries.items():
                top_h = self._hists.get((name, k))
                if top_h is not None and len(top_h) == len(h):
                    h = [max(a, b) for a, b in zip(h, top_h, strict=True)]
                    hseries[k] = h
                self._hists[(name, k)] = h
        for (name, k), top_h in self._hists.items():
            merged["hists"].setdefault(name, {}).setdefault(k, top_h)
        return merged


def value(merged: Mapping, name: str, **labels: str) -> float:
    """One series of a merged snapshot (0 if absent): for ``zeroforge status``."""
    return float(merged["values"].get(name, {}).get(_key(labels), 0.0))


def total(merged: Mapping, name: str, **labels: str) -> float:
    """The sum of a merged snapshot's series of ``name`` that carry ``labels`` (others
    free): ``total(m, "selfplay_games_total", worker_kind="selfplay")`` over all workers."""
    want = set(_key(labels))
    return float(sum(v for k, v in merged["values"].get(name, {}).items()
                     if want <= set(k)))


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
                    fam.add_metric(_label_values(m, k), cumulative, sum_value=h[-1])
            else:
                cls = CounterMetricFamily if m.kind == "counter" else GaugeMetricFamily
                # CounterMetricFamily appends _total itself
                fam = cls(full[: -len("_total")] if m.kind == "counter" else full, m.help,
                          labels=m.labels)
                for k, v in merged["values"].get(name, {}).items():
                    fam.add_metric(_label_values(m, k), v)
            yield fam


def _label_values(m: Metric, key: Iterable[tuple[str, str]]) -> list[str]:
    """A series' label values in the order of ``m.labels``, which the metric family pairs
    them with; the series key is sorted by label name (``_key``), so taken in its own order
    the values of ``worker_kind, worker`` or ``kind, actor, node`` went to the wrong names."""
    have = dict(key)
    return [have.get(label, "") for label in m.labels]


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
