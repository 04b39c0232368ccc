"""The Controller: one named Ray actor per run that owns the run's actors.

It creates the learner, the inference servers, the self-play workers and the evaluator;
keeps the desired number of each alive (a dead one is replaced); scales on request; stops
the run cleanly (workers first so their finished games reach the stream, the learner last
so its final checkpoint holds them); gathers every actor's metrics snapshot and serves
them on one Prometheus endpoint. This module is where Ray meets the plain classes.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import ray

from actors.selfplay_service import SelfPlayService, seed_for
from deploy.config import TrainConfig
from shared import metrics

log = logging.getLogger(__name__)

NAMESPACE = "zeroforge"


def controller_name(run_id: str) -> str:
    return f"controller-{run_id}"


@dataclass
class _Slot:
    """One live actor the controller looks after."""

    kind: str
    index: int
    handle: Any
    run_ref: Any = None
    """ObjectRef of the actor's long-running ``run`` call: it resolving means the actor ended."""
    stopping: bool = False
    last_stats: dict = field(default_factory=dict)


class ServiceHost:
    """Runs one plain service (self-play, learner or evaluator) inside a Ray actor.

    ``run`` blocks in one actor thread until ``stop`` (from another thread) sets the event;
    the service's own loop then finishes cleanly (final append, final checkpoint).
    """

    def __init__(self, kind: str, *args: Any) -> None:
        if kind == "learner":
            from learner.service import LearnerService as cls
        elif kind == "evaluator":
            from actors.evaluator_service import EvaluatorService as cls
        else:
            cls = SelfPlayService
        self.kind = kind
        self.service = cls(*args)
        self._stop = threading.Event()

    def run(self) -> Any:
        result = self.service.run(self._stop)
        return result if isinstance(result, int | dict) else None

    def stop(self) -> None:
        self._stop.set()

    def stats(self) -> dict:
        return self.service.stats()

    def set_servers(self, servers: list) -> None:
        if hasattr(self.service, "set_servers"):
            self.service.set_servers(servers)

    def node_id(self) -> str:
        """The Ray node this actor runs on (where the scheduler placed it)."""
        return ray.get_runtime_context().get_node_id()

    def game_ids(self) -> list[str]:
        """Ids of the games this service appended (self-play) or received (learner)."""
        return list(getattr(self.service, "appended_ids", None)
                    or getattr(self.service, "recent_game_ids", []))


class Controller:
    """Owns one run. Methods are called through Ray by the CLI (status, scale, stop)."""

    def __init__(self, config: TrainConfig, redis_url: str, run_id: str, run_dir: str,
                 resume: bool = False, metrics_port: int = 0, metrics_host: str = "127.0.0.1"
                 ) -> None:
        self.config = config
        self.redis_url = redis_url
        self.run_id = run_id
        self.run_dir = run_dir
        self.resume = resume
        d = config.distributed
        self.inference = d.inference
        if self.inference == "auto":
            self.inference = "server" if ray.cluster_resources().get("GPU", 0) > 0 else "local"
        self.desired = {"selfplay": config.selfplay.workers,
                        "inference": d.inference_servers if self.inference == "server" else 0,
                        "learner": 1, "evaluator": 1 if d.evaluator else 0}
        self.slots: dict[str, list[_Slot]] = {k: [] for k in self.desired}
        self.restarts = {k: 0 for k in self.desired}
        self.finished_stats: list[dict] = []
        """Snapshots of actors that ended: their counters still count."""
        self._next_index = {k: 0 for k in self.desired}
        self._lock = threading.RLock()
        self._state = "starting"
        self._started = time.monotonic()
        self._merged: dict = metrics.merge([])
        self.metrics_url = self._serve_metrics(metrics_host, metrics_port)
        self._monitor = threading.Thread(target=self._monitor_loop, daemon=True)
        self._monitor.start()

    # --- actor creation ------------------------------------------------------------------
    def _create(self, kind: str) -> _Slot:
        index = self._next_index[kind]
        self._next_index[kind] += 1
        c, d = self.config, self.config.distributed
        host = ray.remote(ServiceHost)
        if kind == "learner":
            resume = self.resume or self.restarts["learner"] > 0
            handle = host.options(num_cpus=d.learner_cpus, num_gpus=d.learner_gpus,
                                  max_concurrency=4).remote(
                "learner", c, self.redis_url, self.run_id, self.run_dir, resume)
        elif kind == "inference":
            from actors.inference import make_inference_actor

            handle = make_inference_actor(c.game, c.net, c.inference, self.redis_url, self.run_id)
        elif kind == "evaluator":
            handle = host.options(num_cpus=d.evaluator_cpus, max_concurrency=4).remote(
                "evaluator", c, self.redis_url, self.run_id)
        else:
            servers = [s.handle for s in self.slots["inference"] if not s.stopping]
            handle = host.options(num_cpus=d.worker_cpus, max_concurrency=4).remote(
                "selfplay", c, self.redis_url, self.run_id, f"w{index}",
                seed_for(c.run.seed, index), self.inference, servers)
        return _Slot(kind, index, handle, run_ref=handle.run.remote())

    def _fill(self) -> None:
        """Create actors up to the desired counts; stop extra ones (newest first)."""
        for kind in ("learner", "inference", "evaluator", "selfplay"):
            live = [s for s in self.slots[kind] if not s.stopping]
            for _ in range(self.desired[kind] - len(live)):
                self.slots[kind].append(self._create(kind))
                if kind == "inference":
                    self._push_servers()
            for slot in sorted(live, key=lambda s: -s.index)[: max(0, len(live) -
                                                                   self.desired[kind])]:
                self._retire(slot)

    def _retire(self, slot: _Slot) -> None:
        slot.stopping = True
        try:
            slot.handle.stop.remote()
        except Exception as err:  # the actor may already be gone
            log.warning("stopping %s %d: %s", slot.kind, slot.index, err)
        if slot.kind == "inference":
            self._push_servers()

    def _push_servers(self) -> None:
        servers = [s.handle for s in self.slots["inference"] if not s.stopping]
        for w in self.slots["selfplay"]:
            w.handle.set_servers.remote(servers)

    # --- the monitor loop ------------------------------------------------------------------
    def _monitor_loop(self) -> None:
        while self._state not in ("stopped",):
            try:
                with self._lock:
                    if self._state == "running":
                        self._reap()
                        self._fill()
                    self._collect()
            except Exception as err:  # keep watching whatever happened
                log.exception("controller monitor: %s", err)
            time.sleep(self.config.distributed.monitor_interval_s)

    def _reap(self) -> None:
        """Find actors whose ``run`` ended: planned (retired) or not (crashed: replaced)."""
        for kind, slots in self.slots.items():
            for slot in list(slots):
                ready, _ = ray.wait([slot.run_ref], timeout=0)
                if not ready:
                    continue
                slots.remove(slot)
                try:
                    ray.get(slot.run_ref)
                    crashed = False
                    # its final counters, after its last games went out
                    with contextlib.suppress(Exception):
                        slot.last_stats = ray.get(slot.handle.stats.remote(), timeout=10)
                except Exception as err:
                    crashed = True
                    log.warning("%s %d died: %s", kind, slot.index, str(err).splitlines()[0])
                # a finished actor's counters still count, except a crashed learner's: its
                # successor restores them from the checkpoint
                if slot.last_stats and not (kind == "learner" and crashed):
                    self.finished_stats.append(slot.last_stats)
                if slot.stopping:
                    # retired by scale-down: its games are in; free its CPUs for others
                    with contextlib.suppress(Exception):
                        ray.kill(slot.handle)
                    continue
                if kind == "learner" and not crashed:
                    # the learner returns by itself when a run limit is reached: run over.
                    # No successor: the _fill after this reap must not start a fresh learner
                    # (it would overwrite the final checkpoint with untrained weights).
                    self.desired["learner"] = 0
                    threading.Thread(target=self.stop, daemon=True).start()
                    continue
                self.restarts[kind] += 1  # the next _fill replaces it
                if kind == "inference":
                    self._push_servers()

    def _collect(self) -> None:
        """Gather every live actor's metrics snapshot (bounded wait)."""
        pending = {}
        for slots in self.slots.values():
            for slot in slots:
                pending[slot.handle.stats.remote()] = slot
        if pending:
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=2.0)
            for ref in ready:
                # an actor that died between wait and get is the reaper's business
                with contextlib.suppress(Exception):
                    pending[ref].last_stats = ray.get(ref)
        rec = metrics.Recorder()
        for kind in self.desired:
            rec.set("actors_desired", self.desired[kind], kind=kind)
            rec.set("actors_alive", sum(not s.stopping for s in self.slots[kind]), kind=kind)
            rec.inc("actor_restarts_total", self.restarts[kind], kind=kind)
        snaps = [s.last_stats for ss in self.slots.values() for s in ss if s.last_stats]
        self._merged = metrics.merge([*self.finished_stats, *snaps, rec.snapshot()])

    # --- public, called through Ray -------------------------------------------------------
    def start(self) -> str:
        with self._lock:
            self._fill()
            self._state = "running"
        return self.metrics_url

    def scale(self, workers: int | None = None, inference_servers: int | None = None) -> dict:
        """Change the desired counts; the monitor loop creates or retires actors."""
        with self._lock:
            if workers is not None:
                if workers < 0:
                    raise ValueError(f"workers must be >= 0, got {workers}")
                self.desired["selfplay"] = workers
            if inference_servers is not None:
                if self.inference != "server":
                    raise ValueError("this run evaluates in-process (inference=local); "
                                     "it has no inference servers to scale")
                if inference_servers < 1:
                    raise ValueError("a run with inference=server needs at least 1 server")
                self.desired["inference"] = inference_servers
            if self._state == "running":
                self._fill()
        return dict(self.desired)

    def stop(self, timeout_s: float = 60.0) -> dict:
        """Stop workers (their finished games are appended), then the evaluator, then the
        learner (final checkpoint), then the inference servers."""
        with self._lock:
            if self._state in ("stopping", "stopped"):
                return self.status()
            self._state = "stopping"
        for kinds in (("selfplay", "evaluator"), ("learner",), ("inference",)):
            refs = []
            for kind in kinds:
                self.desired[kind] = 0
                for slot in self.slots[kind]:
                    self._retire(slot)
                    refs.append(slot.run_ref)
            ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        with self._lock:
            self._collect()
            self._state = "stopped"
        return self.status()

    def shutdown(self) -> None:
        """Stop (if not yet) and kill every actor of the run, freeing their resources."""
        self.stop()
        with self._lock:
            for slots in self.slots.values():
                for slot in slots:
                    with contextlib.suppress(Exception):
                        ray.kill(slot.handle)
                slots.clear()

    def status(self) -> dict:
        m = self._merged
        v = metrics.value
        elapsed = time.monotonic() - self._started
        alive = {k: sum(not s.stopping for s in self.slots[k]) for k in self.desired}
        scores = {dict(k).get("anchor"): val for k, val in
                  m["values"].get("evaluator_score", {}).items()}
        return {
            "run_id": self.run_id,
            "state": self._state,
            "elapsed_s": round(elapsed, 1),
            "inference": self.inference,
            "desired": dict(self.desired),
            "alive": alive,
            "restarts": dict(self.restarts),
            "games": v(m, "selfplay_games_total", worker_kind="selfplay"),
            "positions": v(m, "selfplay_positions_total", worker_kind="selfplay"),
            "games_received": v(m, "learner_games_received_total"),
            "learner_steps": v(m, "learner_steps_total"),
            "samples_per_insert": v(m, "learner_samples_per_insert"),
            "weights_version": v(m, "weights_version", component="learner"),
            "stream_lag": v(m, "stream_lag_entries"),
            "replay_positions": v(m, "replay_window_positions"),
            "rejected": {dict(k).get("reason"): val for k, val in
                         m["values"].get("rejected_entries_total", {}).items()},
            "scores": scores,
            "metrics_url": self.metrics_url,
        }

    def metrics_snapshot(self) -> dict:
        """The merged snapshot, as plain data (for tests and tools)."""
        m = self._merged
        return {"values": {n: [[list(map(list, k)), val] for k, val in s.items()]
                           for n, s in m["values"].items()}}

    def actor_handles(self, kind: str) -> list:
        """Live actor handles of one kind (for tests that kill one)."""
        return [s.handle for s in self.slots[kind] if not s.stopping]

    def ping(self) -> str:
        return self._state

    # --- metrics endpoint -------------------------------------------------------------------
    def _serve_metrics(self, host: str, port: int) -> str:
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry(auto_describe=False)
        registry.register(metrics.SnapshotCollector(lambda: self._merged))
        server, _thread = start_http_server(port, addr=host, registry=registry)
        return f"http://{host}:{server.server_port}/metrics"
