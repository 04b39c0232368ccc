"""An in-process fake Ray cluster for the controller's one seam (``deploy.ray.ray_calls``):
thousands of simulated actors on hundreds of simulated nodes, without a process each.

Each self-play actor answers ``stats`` with a snapshot shaped like a real worker's (every
metric a worker records, its labels filled in); a host of several workers merges its
workers' snapshots with the real ``WorkerHost``. Replies are prepared when an actor is
made or resized, not when asked: on a real cluster an actor computes its reply on its own
node, so the controller's measured time is the controller's alone. Actors are named as
the controller names them, so a successor controller finds and adopts them.

Used by ``benchmarks/control_plane.py`` and the control-plane tests.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from typing import Any

from zeroforge.actors.worker_host import WorkerHost
from zeroforge.deploy.ray.naming import NAMESPACE
from zeroforge.deploy.ray.ray_calls import RayCalls
from zeroforge.shared import metrics

WORKER_METRICS = (
    "selfplay_games_total", "selfplay_positions_total", "selfplay_simulations_total",
    "selfplay_policy_targets_total", "selfplay_throttled_seconds_total",
    "selfplay_cpu_share_seconds_total", "weights_fetches_total", "nn_evaluations_total",
    "eval_cache_lookups_total", "eval_cache_hits_total", "actor_cpu_seconds_total",
    "weights_rejected_total", "weights_version", "actor_memory_bytes",
    "node_cpu_utilisation_ratio", "node_memory_used_bytes", "node_memory_total_bytes",
    "weights_delivery_seconds")
"""What a self-play worker's snapshot holds (the names its code records)."""

OTHER_METRICS = ("learner_steps_total", "learner_games_received_total",
                 "learner_positions_received_total", "actor_memory_bytes",
                 "actor_cpu_seconds_total", "node_cpu_utilisation_ratio")
"""A few series of the learner's or evaluator's snapshot (they are one actor each)."""


def snapshot(names: tuple[str, ...], labels: dict[str, str], scale: float) -> dict:
    """A snapshot recording each of ``names`` once, its labels filled from ``labels``
    (any other label: "x")."""
    rec = metrics.Recorder()
    for name in names:
        m = metrics.CATALOGUE[name]
        lb = {k: labels.get(k, "x") for k in m.labels}
        if m.kind == "counter":
            rec.inc(name, scale, **lb)
        elif m.kind == "gauge":
            rec.set(name, scale, **lb)
        else:
            rec.observe(name, 0.5, **lb)
    return rec.snapshot()


class FakeWorker:
    """A hosted worker for the real ``WorkerHost``: its snapshot only."""

    def __init__(self, index: int, node: str, actor: int) -> None:
        """``actor``: its host's index (the ``actor`` label of the process figures)."""
        self._snap = snapshot(WORKER_METRICS, {"worker": str(index), "worker_kind": "selfplay",
                                               "node": node, "kind": "selfplay",
                                               "actor": str(actor), "source": "cache"},
                              1.0 + index % 7)

    def stats(self) -> dict:
        return self._snap

    def game_ids(self) -> list[str]:
        return []


class FakeRef:
    """An object ref; ``value`` once ready (``error``: what a get raises instead)."""

    def __init__(self, value: Any = None, ready: bool = True) -> None:
        self.value, self.ready = value, ready
        self.error: BaseException | None = None


class FakeMethod:
    def __init__(self, actor: FakeActor, name: str) -> None:
        self.actor, self.name = actor, name

    def remote(self, *args: Any) -> FakeRef:
        return self.actor.call(self.name, args)


class FakeActor:
    """A simulated actor of the run: a self-play host of ``count`` workers, or a learner /
    evaluator / inference server."""

    def __init__(self, cluster: FakeCluster, name: str, kind: str, index: int, count: int,
                 first: int, node: str, state: str) -> None:
        self.cluster, self.kind, self.index, self.node = cluster, kind, index, node
        self.name, self.first = name, first
        self.cpus = 0.0
        """The CPUs it holds on its node while alive."""
        self.state = state
        self.run_ref = FakeRef(ready=False)
        self.count = count
        self._reply = self._stats()

    def _stats(self) -> dict:
        if self.kind != "selfplay":
            return snapshot(OTHER_METRICS, {"kind": self.kind, "node": self.node,
                                            "actor": str(self.index)}, 3.0)
        per = self.cluster.per_host
        if per == 1:
            return FakeWorker(self.index, self.node, self.index).stats()
        host = WorkerHost(lambda i: FakeWorker(i, self.node, self.index), self.first, self.count,
                          label=f"h{self.index}")
        return host.stats()

    def __getattr__(self, name: str) -> FakeMethod:
        return FakeMethod(self, name)

    def call(self, name: str, args: tuple) -> FakeRef:
        self.cluster.counts["actor_calls"] += 1
        if self.state == "DEAD":
            ref = FakeRef()
            ref.error = RuntimeError(f"actor {self.name} died")
            return ref
        if self.state != "ALIVE":
            return FakeRef(ready=False)
        if name == "run":
            return self.run_ref
        if name == "stats":
            return FakeRef(self._reply)
        if name == "where":
            return FakeRef({"pid": 1000 + self.index, "node": self.node, "ip": "10.0.0.1"})
        if name == "stop":
            self.run_ref.ready, self.run_ref.value = True, self.count
            return FakeRef(None)
        if name == "resize":
            self.count = int(args[0])
            self._reply = self._stats()  # computed on its node: not the controller's time
            return FakeRef(self.count)
        return FakeRef(None)

    def die(self) -> None:
        """The actor's process ends (killed, or its node lost): its ``run`` raises, and
        its CPUs are free again."""
        if self.state == "ALIVE":
            self.cluster.free[self.node] += self.cpus
        self.state = "DEAD"
        self.run_ref.ready, self.run_ref.error = True, RuntimeError(f"{self.name} died")


class FakeCluster(RayCalls):
    """``nodes`` nodes of ``cpus`` CPUs; actors placed first fit, pending when none fits
    (and placed no later: a pending actor stays pending)."""

    def __init__(self, nodes: int, cpus: float, per_host: int, head_cpus: float = 4.0
                 ) -> None:
        """``head_cpus``: the first node's more (the learner's and the evaluator's)."""
        self.total = {f"{n:08x}": cpus + (head_cpus if n == 0 else 0.0) for n in range(nodes)}
        self.free = dict(self.total)
        self.per_host = per_host
        self.actors: list[FakeActor] = []
        self.counts = {"actor_calls": 0, "waits": 0, "gets": 0, "gcs": 0, "node_queries": 0}

    def create(self, cls: type, options: dict, *args: Any) -> FakeActor:
        kind, index, count = args[0], args[3], args[8]
        first = args[9] if args[9] is not None else index * max(self.per_host, 1)
        need = float(options.get("num_cpus") or 0)
        node = next((n for n, free in self.free.items() if free >= need), "")
        if node:
            self.free[node] -= need
        actor = FakeActor(self, str(options.get("name", "")), kind, index, count, first, node,
                          "ALIVE" if node else "PENDING_CREATION")
        actor.cpus = need
        self.actors.append(actor)
        return actor

    def wait(self, refs, num_returns, timeout):
        self.counts["waits"] += 1
        ready = [r for r in refs if r.ready]
        return ready[:num_returns], [r for r in refs if not r.ready]

    def get(self, ref, timeout=None):
        self.counts["gets"] += 1
        if not ref.ready:
            raise TimeoutError("not ready")
        if ref.error is not None:
            raise ref.error
        return ref.value

    def kill(self, handle) -> None:
        handle.die()

    def actor_state(self, handle) -> str:
        self.counts["gcs"] += 1
        return handle.state

    def cluster_resources(self) -> dict:
        self.counts["gcs"] += 1
        return {"CPU": 1e9}

    def available_resources(self) -> dict:
        self.counts["gcs"] += 1
        return {"CPU": sum(self.free.values())}

    def node_resources(self) -> dict:
        self.counts["gcs"] += 1
        self.counts["node_queries"] += 1
        return {n: {"total": {"CPU": self.total[n]}, "free": {"CPU": free}}
                for n, free in self.free.items()}

    def named_actors(self) -> list[dict]:
        self.counts["gcs"] += 1
        return [{"name": a.name, "namespace": NAMESPACE} for a in self.actors
                if a.state != "DEAD" and a.name]

    def get_actor(self, name: str, namespace: str) -> Any:
        self.counts["gcs"] += 1
        for actor in self.actors:
            if actor.name == name and actor.state != "DEAD":
                return actor
        raise ValueError(f"no actor named {name}")

    def selfplay(self) -> list[FakeActor]:
        """The live self-play actors, oldest first."""
        return [a for a in self.actors if a.kind == "selfplay" and a.state != "DEAD"]


def run_config(slots: int, per_host: int) -> Any:
    """The ``TrainConfig`` of a simulated run: ``slots`` workers, ``per_host`` an actor."""
    from zeroforge.deploy.config import TrainConfig
    from zeroforge.shared import config as cfg

    return cfg.from_dict(TrainConfig, {
        "game": "gomoku:size=8,k=5", "selfplay": {"workers": slots},
        "distributed": {"workers_per_host": per_host, "inference": "local",
                        "worker_cpus": 1.0}}, "config")


@contextlib.contextmanager
def simulated_run(slots: int, nodes: int, per_host: int,
                  fake: FakeCluster | None = None, takeover: dict | None = None,
                  run_id: str = "sim") -> Iterator[tuple[Any, FakeCluster]]:
    """A started controller (no monitor thread: call its ``tick``) of a run of ``slots``
    workers, ``per_host`` an actor (0: node hosts), on a fake cluster of ``nodes`` nodes
    with room for them all (``fake``: an existing one, for a successor; ``takeover``: the
    predecessor's ``controller_state()``). Yields ``(controller, fake)``."""
    from zeroforge.deploy.ray import ray_calls
    from zeroforge.deploy.ray.controller import Controller
    from zeroforge.shared import config as cfg
    from zeroforge.shared.run_context import RunContext

    config = run_config(slots, per_host)
    per = per_host or -(-slots // nodes)  # node hosts: a node holds its share
    fake = fake or FakeCluster(nodes, -(-slots // per // nodes) * per, per_host)
    with tempfile.TemporaryDirectory() as run_dir, ray_calls.using(fake):
        ctx = RunContext(run_id=run_id, run_dir=run_dir,
                         transport=f"memory://control-plane-{run_id}", game=config.game)
        controller = Controller(cfg.to_dict(config), ctx.to_dict(), takeover=takeover,
                                watch=False)
        try:
            controller.start()
            controller.tick()  # every actor answers its first stats call
            yield controller, fake
        finally:
            controller._endpoint.close()


