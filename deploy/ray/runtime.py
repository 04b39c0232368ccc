"""Ray, in one module: every ``ray`` import, remote class, actor option and handle.

The services are plain classes (``shared.service.Service``) built by ``deploy/builder.py``;
this module hosts them in Ray actors and supervises them:

- ``ServiceHost``: runs one service (self-play, learner or evaluator) in a threaded actor,
  ``run`` in one thread, ``stop``/``stats`` from another.
- ``InferenceServerActor`` / ``make_inference_actor``: an ``InferenceServer`` in an async
  actor; ``RemoteEvaluator``: the evaluator a self-play worker holds to reach them.
- ``KINDS``: the per-kind table (resources, start and stop order, what a clean end or a
  crash means); the controller has no per-kind branches beyond it.
- ``Controller``: one named actor per run that keeps the desired actors of each kind
  alive, scales, stops in order and gathers metrics into a ``RunStatus``.
- ``init_local`` / ``join`` / ``find_run`` / ``RunHandle``: how the driver and the CLI
  start or join a cluster, find a run and talk to it.

Configs cross into actors as plain dicts (``shared.config.to_dict``), never as pickled
classes of ours.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import logging
import os
import random
import re
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError
from zeroforge.actors.inference import InferenceServer
from zeroforge.deploy.builder import build_learner, build_rating_service, build_selfplay
from zeroforge.deploy.node_stats import ResourceReporter
from zeroforge.deploy.status import RunStatus
from zeroforge.shared import config as cfg
from zeroforge.shared import metrics
from zeroforge.shared.nets.model import NetConfig
from zeroforge.shared.search.evaluator import Evaluation, check_evaluation
from zeroforge.shared.service import Service
from zeroforge.shared.train_config import (
    DistributedConfig,
    InferenceServerConfig,
    RunContext,
    TrainConfig,
)
from zeroforge.shared.transport import open_transport

log = logging.getLogger(__name__)

NAMESPACE = "zeroforge"
"""Ray namespace of every zeroforge actor."""


def controller_name(run_id: str) -> str:
    return f"controller-{run_id}"


def actor_name(run_id: str, kind: str, index: int) -> str:
    """The Ray name of one of a run's service actors (detached, in ``NAMESPACE``): a new
    controller finds the actors of its run by these names and adopts them."""
    return f"actor-{run_id}-{kind}-{index}"


def _parse_actor_name(name: str) -> tuple[str, str, int] | None:
    """(run id, kind, index) of an ``actor_name``; None for any other name."""
    m = re.fullmatch(r"actor-(.+)-([a-z]+)-(\d+)", name)
    if m is None or m.group(2) not in KINDS:
        return None
    return m.group(1), m.group(2), int(m.group(3))


def run_actor_names(run_id: str) -> list[tuple[str, int, str]]:
    """(kind, index, name) of every live named service actor of ``run_id``."""
    found = []
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry.get("namespace") != NAMESPACE:
            continue
        parsed = _parse_actor_name(str(entry.get("name", "")))
        if parsed is not None and parsed[0] == run_id:
            found.append((parsed[1], parsed[2], str(entry["name"])))
    return sorted(found)


def kill_run_actors(run_id: str) -> int:
    """Kill every named service actor of ``run_id`` (they are detached: nothing else ends
    them); returns how many were killed."""
    killed = 0
    for _, _, name in run_actor_names(run_id):
        with contextlib.suppress(Exception):
            ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
            killed += 1
    return killed


def _where() -> dict:
    """This actor's process id, short Ray node id and node IP address (status rows)."""
    return {"pid": os.getpid(), "node": _node_label(), "ip": ray.util.get_node_ip_address()}


# ------------------------------------------------------------------------------------------
# inference servers
# ------------------------------------------------------------------------------------------


class NoInferenceServerError(RuntimeError):
    """Every inference server a RemoteEvaluator knew of has died."""


class RemoteEvaluator:
    """The Evaluator of a self-play worker whose network lives in InferenceServer actors.

    ``evaluate`` sends the leaf batch to the servers in turn (round robin from a random
    start, so workers do not all begin on the same one); a server found dead is dropped,
    logged once, and the batch goes to the next. ``weights_version`` is the version of
    the last answer, so finished games are tagged with the weights that played them.
    """

    def __init__(self, servers: Sequence[Any], timeout_s: float | None = 300.0) -> None:
        self.timeout_s = timeout_s
        """Longest wait for one answer (None: forever); a server busy compiling its first
        batches may take a while."""
        self.weights_version = 0
        self._servers: list[Any] = []
        self._next = 0
        self.set_servers(servers)

    @property
    def servers(self) -> list[Any]:
        """The server handles still in use."""
        return list(self._servers)

    def set_servers(self, servers: Sequence[Any]) -> None:
        """Use these server actor handles from now on (after scaling or replacement)."""
        self._servers = list(servers)
        self._next = random.randrange(len(self._servers)) if self._servers else 0

    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        """obs [B, C, H, W] uint8, legal [B, A] bool -> Evaluation from one server."""
        while self._servers:
            i = self._next % len(self._servers)
            server = self._servers[i]
            try:
                logits, value, version = ray.get(server.evaluate.remote(obs, legal),
                                                 timeout=self.timeout_s)
            except RayActorError as err:
                del self._servers[i]
                self._next = i  # the next server has moved into slot i
                log.warning("inference server %s is gone (%s); failing over to %d other(s)",
                            server, type(err).__name__, len(self._servers))
                continue
            except GetTimeoutError:
                raise TimeoutError(f"inference server {server} did not answer within "
                                   f"{self.timeout_s} s") from None
            self._next = i + 1
            ev = Evaluation(logits, value, int(version))
            check_evaluation(ev, legal.shape[0], legal.shape[1])
            self.weights_version = ev.weights_version
            return ev
        raise NoInferenceServerError(
            "RemoteEvaluator: no inference server left (all have died); the controller "
            "must start new ones and hand them over with set_servers")


class InferenceServerActor(InferenceServer):
    """The form Ray instantiates: configs arrive as plain dicts (``shared.config.to_dict``)
    so none of our classes is pickled across the process boundary."""

    def __init__(self, game_spec: str, net_config: dict, config: dict, redis_url: str | None,
                 run_id: str, index: int = 0) -> None:
        super().__init__(game_spec, cfg.from_dict(NetConfig, net_config, "net"),
                         cfg.from_dict(InferenceServerConfig, config, "inference"),
                         redis_url, run_id, server=str(index))
        self._resources = ResourceReporter("inference", str(index), _node_label())

    def stats(self) -> dict:
        """The server's metrics plus its process's and node's resource figures."""
        return self._resources.add_to(super().stats())

    def where(self) -> dict:
        """Process id and short node id (``zeroforge status`` rows)."""
        return _where()

    def pid(self) -> int:
        """The actor's process id (chaos tests kill it with SIGKILL)."""
        return os.getpid()


def make_inference_actor(game_spec: str, net_config: NetConfig, config: InferenceServerConfig,
                         redis_url: str | None, run_id: str, *, name: str | None = None,
                         index: int = 0, detached: bool = False) -> Any:
    """Start one InferenceServer as an async Ray actor; returns its handle.

    It takes a GPU when ``config.device`` asks for CUDA, or is ``"auto"`` and the cluster
    has GPUs; otherwise it runs on ``config.num_cpus`` CPUs. Call ``ready`` on the handle
    to wait until it serves. ``ray.init`` must have run. ``index`` labels its metrics.
    ``detached``: the actor outlives its creator (a run's controller), in ``NAMESPACE``
    under ``name``; someone must kill it.
    """
    gpus = ray.cluster_resources().get("GPU", 0.0)
    wants_gpu = config.device.startswith("cuda") or (config.device == "auto" and gpus >= 1)
    if wants_gpu and gpus < 1:
        raise ValueError(f"inference device {config.device!r} needs a GPU, and the Ray "
                         "cluster has none")
    options: dict[str, Any] = {"num_cpus": config.num_cpus,
                               "max_concurrency": config.max_concurrency}
    if wants_gpu:
        options["num_gpus"] = 1
    if name is not None:
        options["name"] = name
    if detached:
        options.update(lifetime="detached", namespace=NAMESPACE)
    actor_cls = ray.remote(InferenceServerActor).options(**options)
    return actor_cls.remote(game_spec, cfg.to_dict(net_config), cfg.to_dict(config),
                            redis_url, run_id, index)


# ------------------------------------------------------------------------------------------
# services in actors
# ------------------------------------------------------------------------------------------


class ServiceHost:
    """Runs one plain service inside a threaded Ray actor.

    ``run`` blocks in one actor thread until ``stop`` (from another thread) sets the event;
    the service's own loop then finishes cleanly (final append, final checkpoint).

    A run's actors are detached (they outlive a controller killed with kill -9), so a new
    controller adopts one by calling ``run`` again: only the first call runs the service,
    later ones wait for its end and return its result or raise its error (an actor that
    dies fails every such call, which the controller counts as a crash).
    """

    def __init__(self, kind: str, config: dict, ctx: dict, index: int, resume: bool,
                 servers: list | None) -> None:
        self.kind = kind
        train = cfg.from_dict(TrainConfig, config, "config")
        context = RunContext.from_dict(ctx)
        self.remote_evaluator = RemoteEvaluator(servers) if servers is not None else None
        self.service: Service = KINDS[kind].build(train, context, index, resume,
                                                  self.remote_evaluator)
        self._resources = ResourceReporter(kind, str(index), _node_label())
        self._stop = threading.Event()
        self._run_lock = threading.Lock()
        self._running = False
        self._done = threading.Event()
        self._result: Any = None
        self._error: BaseException | None = None

    def run(self) -> Any:
        """Run the service until ``stop`` (first call); a later call (a new controller
        adopting this actor) waits for that end and returns the same result or error."""
        with self._run_lock:
            first, self._running = not self._running, True
        if not first:
            self._done.wait()
            if self._error is not None:
                raise self._error
            return self._result
        try:
            result = self.service.run(self._stop)
            self._result = result if isinstance(result, int | dict) else None
        except BaseException as err:
            self._error = err
            raise
        finally:
            self._done.set()
        return self._result

    def stop(self) -> None:
        self._stop.set()

    def stats(self) -> dict:
        """The service's metrics plus its process's and node's resource figures."""
        return self._resources.add_to(self.service.stats())

    def set_servers(self, servers: list) -> None:
        """New inference-server handles after scaling or a replacement."""
        if self.remote_evaluator is not None:
            self.remote_evaluator.set_servers(servers)

    def node_id(self) -> str:
        """The Ray node this actor runs on (where the scheduler placed it)."""
        return ray.get_runtime_context().get_node_id()

    def game_ids(self) -> list[str]:
        return self.service.game_ids()

    def pid(self) -> int:
        """The actor's process id (chaos tests kill it with SIGKILL)."""
        return os.getpid()

    def where(self) -> dict:
        """Process id and short node id (``zeroforge status`` rows)."""
        return _where()


def _node_label() -> str:
    """The ``node`` label of an actor's resource metrics: its Ray node id's first 8 hex
    digits (as in ``zeroforge status``)."""
    return str(ray.get_runtime_context().get_node_id())[:8]


def _transport(ctx: RunContext):
    return open_transport(ctx.transport, ctx.run_id)


@dataclass(frozen=True)
class ActorKind:
    """How the controller treats one kind of actor."""

    name: str
    desired: Callable[[TrainConfig, str], int]
    """Actors wanted at start, from the config and the inference mode."""
    options: Callable[[TrainConfig], dict]
    """Ray actor options (resources, concurrency)."""
    build: Callable[..., Any] = lambda *a: None
    """(config, ctx, index, resume, remote_evaluator) -> the service (ServiceHost kinds)."""
    stop_phase: int = 0
    """Stop order: lower phases are stopped (and awaited) first."""
    clean_end_ends_run: bool = False
    """A clean return of ``run`` means a run limit was reached: no successor, stop the run."""
    counters_survive_crash: bool = True
    """A crashed actor's last counters still count. False for the learner: its successor
    restores them from the checkpoint, and ``metrics.RestoredCounters`` keeps the run's
    counters from going back meanwhile (work done again is counted apart)."""
    is_server: bool = False
    """An inference server: an async actor of its own, handed to the self-play workers."""
    max_crashes: int = 5
    """Crash-loop limit: this many crashes of this kind within ``crash_window_s`` (at least
    twice the desired count, for many workers) fail the run with one line naming the kind
    and its last error, instead of replacing actors forever."""
    crash_window_s: float = 300.0
    """The window of the crash-loop limit, in seconds."""


def _worker_options(d: DistributedConfig) -> dict:
    """A self-play worker's Ray options: its CPUs, the custom resource that keeps it on
    the machines meant for self-play, and SPREAD placement when asked for."""
    options: dict[str, Any] = {"num_cpus": d.worker_cpus, "max_concurrency": 4}
    if d.worker_resource:
        options["resources"] = {d.worker_resource: 1.0}
    if d.worker_spread:
        options["scheduling_strategy"] = "SPREAD"
    return options


def _run_dir_options(d: DistributedConfig, options: dict) -> dict:
    """``options`` of an actor that writes the run directory (learner, evaluator), plus
    one unit of ``run_dir_resource`` when set, which keeps it on the machine holding it."""
    if d.run_dir_resource:
        options["resources"] = {d.run_dir_resource: 1.0}
    return options


KINDS: dict[str, ActorKind] = {k.name: k for k in (
    ActorKind(
        "learner", desired=lambda c, inf: 1,
        options=lambda c: _run_dir_options(c.distributed, {
            "num_cpus": c.distributed.learner_cpus, "num_gpus": c.distributed.learner_gpus,
            "max_concurrency": 4}),
        build=lambda c, ctx, i, resume, ev: build_learner(c, ctx, _transport(ctx), resume),
        stop_phase=1, clean_end_ends_run=True, counters_survive_crash=False, max_crashes=3),
    ActorKind(
        "inference", desired=lambda c, inf: c.distributed.inference_servers
        if inf == "server" else 0,
        options=lambda c: {}, stop_phase=2, is_server=True),
    ActorKind(
        "evaluator", desired=lambda c, inf: 1 if c.distributed.evaluator else 0,
        options=lambda c: _run_dir_options(c.distributed, {
            "num_cpus": c.distributed.evaluator_cpus, "max_concurrency": 4}),
        build=lambda c, ctx, i, resume, ev: build_rating_service(c, ctx, _transport(ctx))),
    ActorKind(
        "selfplay", desired=lambda c, inf: c.selfplay.workers,
        options=lambda c: _worker_options(c.distributed),
        build=lambda c, ctx, i, resume, ev: build_selfplay(c, ctx, _transport(ctx), i,
                                                           evaluator=ev)),
)}
"""Per-kind behaviour, in start order (learner first: it publishes the first weights)."""


# ------------------------------------------------------------------------------------------
# the controller
# ------------------------------------------------------------------------------------------


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
    started: bool = False
    """The actor answered a ``stats`` call: it was scheduled, built its service and its
    ``run`` is going. Until then it is pending (no resources yet) or starting."""
    replacement: bool = False
    """Created to replace a crashed actor of its kind."""
    probe: Any = None
    """The outstanding ``stats`` call (one at a time, so a never-scheduled actor does not
    pile up calls)."""
    where: dict = field(default_factory=dict)
    """``{"pid", "node", "ip"}`` once the actor told (status rows)."""
    where_ref: Any = None
    """The outstanding ``where`` call."""
    cancelled: bool = False
    """Retired while Ray had not scheduled it yet: killed at once (nothing to save), so
    it takes no resources a scale-down frees and no autoscaler node; no crash, no stats."""


class Controller:
    """Owns one run (a named Ray actor). The CLI calls ``status``, ``scale`` and ``stop``
    through a ``RunHandle``."""

    def __init__(self, config: dict, ctx: dict, resume: bool = False,
                 max_crashes: dict[str, int] | None = None,
                 takeover: dict | None = None) -> None:
        """``max_crashes``: per kind, a crash-loop limit other than ``ActorKind.max_crashes``
        (chaos tests kill actors on purpose, more often than a crash loop).

        ``takeover``: this controller succeeds one that died; the dict is the last
        ``controller_state()`` the driver got from it (``{}`` if none). ``start`` then
        adopts the run's live actors instead of starting fresh ones."""
        self.config = cfg.from_dict(TrainConfig, config, "config")
        self.max_crashes = {k: kind.max_crashes for k, kind in KINDS.items()}
        self.max_crashes.update(max_crashes or {})
        self.ctx = RunContext.from_dict(ctx)
        self.run_id = self.ctx.run_id
        self.resume = resume
        self.inference = self.config.distributed.inference
        if self.inference == "auto":
            self.inference = "server" if ray.cluster_resources().get("GPU", 0) > 0 else "local"
        self.desired = {k: kind.desired(self.config, self.inference) for k, kind in KINDS.items()}
        self.slots: dict[str, list[_Slot]] = {k: [] for k in KINDS}
        self.restarts = dict.fromkeys(KINDS, 0)
        self.finished_stats: list[dict] = []
        """Snapshots of actors that ended: their counters still count."""
        self._restored = {k: metrics.RestoredCounters() for k, kind in KINDS.items()
                          if not kind.counters_survive_crash}
        """Kinds whose successors restore counters from a checkpoint (the learner): their
        snapshots go through ``RestoredCounters``, so the run's counters never go back."""
        self._guard = metrics.MonotonicGuard()
        self._crashes: dict[str, collections.deque[float]] = {k: collections.deque()
                                                              for k in KINDS}
        self._last_error: dict[str, str] = {}
        self.error = ""
        """Why the run failed (crash loop) or what its stop lost; "" when neither."""
        self._failed = False
        self.lost: dict[str, float] = {}
        """What the final stop could not save (``unacked``, ``unpublished_steps``...)."""
        self._final_reports: dict[str, dict] = {}
        self._minutes_up = False
        """The last dict a kind's ``run`` returned (the learner's final ``status()``)."""
        self._next_index = dict.fromkeys(KINDS, 0)
        self._lock = threading.RLock()
        self._state = "starting"
        self._started = time.monotonic()
        self._merged: dict = metrics.merge([])
        self.takeover = takeover
        self.generation = 0
        """Controllers of this run before this one (restarts after a controller died)."""
        self._known: list[dict] = []
        """The slots of the predecessor's last state (``_adopt`` counts the missing ones)."""
        self._resumed_state = ""
        """The predecessor's run state (a stopping run goes on stopping)."""
        self._ready = threading.Event()
        """``start`` has run (a successor: adopted the actors). Until then the monitor only
        collects, and ``stop`` / ``scale`` wait, so nothing is created or stopped twice."""
        if takeover is not None:
            self._load_state(takeover)
        r = self.config.run
        self._endpoint = _endpoint(lambda: self._merged, r.metrics_host, r.metrics_port,
                                   (takeover or {}).get("metrics_port", 0))
        self.metrics_url = self._endpoint.url
        self._monitor = threading.Thread(target=self._monitor_loop, daemon=True)
        self._monitor.start()

    # --- actor creation ------------------------------------------------------------------
    def _servers(self) -> list:
        return [s.handle for s in self.slots["inference"] if not s.stopping]

    def _create(self, name: str) -> _Slot:
        kind = KINDS[name]
        index = self._next_index[name]
        self._next_index[name] += 1
        c = self.config
        # Detached and named by run, kind and index: the actor outlives this controller
        # (a kill -9 of it), and its successor finds and adopts it (``_adopt``).
        named = actor_name(self.run_id, name, index)
        if kind.is_server:
            handle = make_inference_actor(c.game, c.net, c.inference, self.ctx.transport,
                                          self.run_id, index=index, name=named,
                                          detached=True)
        else:
            # a replacement learner resumes from the checkpoint its predecessor wrote
            resume = self.resume or self.restarts[name] > 0
            servers = self._servers() if self.inference == "server" else None
            options = kind.options(c)
            # each adopting controller leaves one ``run`` call waiting in the actor
            options["max_concurrency"] = options.get("max_concurrency", 1) + 32
            handle = ray.remote(ServiceHost).options(
                **options, name=named, namespace=NAMESPACE, lifetime="detached").remote(
                name, cfg.to_dict(c), self.ctx.to_dict(), index, resume, servers)
        return _Slot(name, index, handle, run_ref=handle.run.remote(),
                     replacement=self.restarts[name] > 0)

    def _fill(self) -> None:
        """Create actors up to the desired counts; stop extra ones (newest first)."""
        if self._failed:
            return
        for name, kind in KINDS.items():
            live = [s for s in self.slots[name] if not s.stopping]
            for _ in range(self.desired[name] - len(live)):
                self.slots[name].append(self._create(name))
                if kind.is_server:
                    self._push_servers()
            extra = max(0, len(live) - self.desired[name])
            for slot in sorted(live, key=lambda s: -s.index)[:extra]:
                self._retire(slot)

    def _retire(self, slot: _Slot) -> None:
        slot.stopping = True
        if not slot.started and _gcs_actor_state(slot.handle) in _PENDING_STATES:
            # A pending actor left to stop itself would first be scheduled (on resources
            # the scale-down frees, or on a node the autoscaler adds for it), build its
            # service and only then see the stop. It has played nothing: kill it.
            slot.cancelled = True
            with contextlib.suppress(Exception):
                ray.kill(slot.handle, no_restart=True)
        else:
            try:
                slot.handle.stop.remote()
            except Exception as err:  # the actor may already be gone
                log.warning("stopping %s %d: %s", slot.kind, slot.index, err)
        if KINDS[slot.kind].is_server:
            self._push_servers()

    def _push_servers(self) -> None:
        servers = self._servers()
        for w in self.slots["selfplay"]:
            w.handle.set_servers.remote(servers)

    # --- the monitor loop ------------------------------------------------------------------
    def _monitor_loop(self) -> None:
        while self._state != "stopped":
            try:
                with self._lock:
                    if self._state == "running" and self._ready.is_set():
                        self._reap()
                        self._fill()
                        self._check_minutes()
                    self._collect()
            except Exception as err:  # keep watching whatever happened
                log.exception("controller monitor: %s", err)
            time.sleep(self.config.distributed.monitor_interval_s)

    def _reap(self) -> None:
        """Find actors whose ``run`` ended: planned (retired) or not (crashed: replaced)."""
        for name, slots in self.slots.items():
            kind = KINDS[name]
            for slot in list(slots):
                ready, _ = ray.wait([slot.run_ref], timeout=0)
                if not ready:
                    continue
                slots.remove(slot)
                if slot.cancelled:  # killed before it ran (``_retire``): no crash
                    continue
                try:
                    result = ray.get(slot.run_ref)
                    crashed = False
                    if isinstance(result, dict):
                        self._final_reports[name] = result
                    # its final counters, after its last games went out
                    with contextlib.suppress(Exception):
                        slot.last_stats = ray.get(slot.handle.stats.remote(), timeout=10)
                except Exception as err:
                    crashed = True
                    self._last_error[name] = error_line(err)
                    log.warning("%s %d died: %s", name, slot.index, self._last_error[name])
                line = self._restored.get(name)
                if line is not None:
                    # its last report becomes the floor its successor's restored
                    # (checkpoint) counters are held up to
                    if slot.last_stats:
                        line.report(slot.index, slot.last_stats)
                    line.ended(slot.index)
                elif slot.last_stats:
                    self.finished_stats.append(metrics.without_live_gauges(slot.last_stats))
                if slot.stopping:
                    # retired by scale-down: its games are in; free its CPUs for others
                    with contextlib.suppress(Exception):
                        ray.kill(slot.handle)
                    continue
                if kind.clean_end_ends_run and not crashed:
                    # A run limit was reached. No successor: the _fill after this reap must
                    # not start a fresh one (it would overwrite the final checkpoint).
                    self.desired[name] = 0
                    threading.Thread(target=self.stop, daemon=True).start()
                    continue
                if self._crash_loop(name):
                    continue
                self.restarts[name] += 1  # the next _fill replaces it
                if kind.is_server:
                    self._push_servers()

    def _crash_loop(self, name: str) -> bool:
        """Count a crash of ``name``; past the kind's limit fail the run (and say so)."""
        kind = KINDS[name]
        now = time.monotonic()
        crashes = self._crashes[name]
        crashes.append(now)
        while crashes and now - crashes[0] > kind.crash_window_s:
            crashes.popleft()
        limit = max(self.max_crashes[name], 2 * self.desired[name])
        if len(crashes) < limit or self._failed:
            return False
        self._failed = True
        self.error = (f"{name} actors crashed {len(crashes)} times within "
                      f"{kind.crash_window_s:.0f} s; giving up. Last error: "
                      f"{self._last_error.get(name, '?')}")
        log.error("run %s failed: %s", self.run_id, self.error)
        threading.Thread(target=self.stop, daemon=True).start()
        return True

    def _check_minutes(self) -> None:
        """``run.minutes`` counted from the run's start, whatever its actors do (a learner
        replaced after a crash counts its own minutes from its own start)."""
        minutes = self.config.run.minutes
        if (minutes and not self._minutes_up
                and time.monotonic() - self._started >= minutes * 60):
            log.info("run %s: %s minutes are up", self.run_id, minutes)
            self._minutes_up = True
            threading.Thread(target=self.stop, daemon=True).start()

    def _probe(self, timeout_s: float = 2.0) -> None:
        """Ask every actor for its metrics snapshot, one outstanding call per actor; wait
        up to ``timeout_s`` for the started ones (a pending actor is not waited for)."""
        started, fresh = {}, {}
        for slots in self.slots.values():
            for slot in slots:
                if slot.probe is None:
                    slot.probe = slot.handle.stats.remote()
                (started if slot.started else fresh)[slot.probe] = slot
        for refs, timeout in ((started, timeout_s), (fresh, 0)):
            if not refs:
                continue
            ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
            for ref in ready:
                slot = refs[ref]
                slot.probe = None
                # an actor that died between wait and get is the reaper's business
                with contextlib.suppress(Exception):
                    slot.last_stats = ray.get(ref)
                    slot.started = True
        self._locate()

    def _locate(self) -> None:
        """Learn each started actor's pid and node once (status rows), without waiting."""
        asked = {}
        for slots in self.slots.values():
            for slot in slots:
                if slot.started and not slot.where:
                    if slot.where_ref is None:
                        slot.where_ref = slot.handle.where.remote()
                    asked[slot.where_ref] = slot
        if asked:
            ready, _ = ray.wait(list(asked), num_returns=len(asked), timeout=0)
            for ref in ready:
                slot = asked[ref]
                slot.where_ref = None
                with contextlib.suppress(Exception):
                    slot.where = dict(ray.get(ref))

    def _collect(self) -> None:
        """Gather every live actor's metrics snapshot (bounded wait)."""
        self._probe()
        rec = metrics.Recorder()
        for name in KINDS:
            rec.set("actors_desired", self.desired[name], kind=name)
            rec.set("actors_alive", self._alive(name), kind=name)
            rec.inc("actor_restarts_total", self.restarts[name], kind=name)
        snaps = []
        for name, slots in self.slots.items():
            line = self._restored.get(name)
            for s in slots:
                if s.last_stats and line is not None:
                    line.report(s.index, s.last_stats)
                elif s.last_stats:
                    snaps.append(s.last_stats)
        snaps += [line.snapshot() for line in self._restored.values()]
        # the guard holds every counter at what was served before, whatever the cause
        self._merged = self._guard.apply(
            metrics.merge([*self.finished_stats, *snaps, rec.snapshot()]))

    # --- public, called through Ray -------------------------------------------------------
    def start(self) -> dict:
        """Create the actors; returns the metrics URL and a one-line warning ("" if none)
        when the cluster's free resources cannot hold them all.

        A successor (``takeover``) first adopts the run's live actors, counts those of its
        predecessor's that died meanwhile as crashes, then fills up as usual; a run that
        was stopping goes on stopping. A fresh run kills leftovers of its run id first."""
        adopted = 0
        with self._lock:
            if self.takeover is None:
                if kill_run_actors(self.run_id):
                    log.warning("run %s: killed actors left by an earlier run of this id",
                                self.run_id)
            else:
                adopted = self._adopt()
            ending = self._resumed_state in ("stopping", "stopped", "failed")
            warning = "" if ending else self._shortfall()
            self._state = "running"  # when ending, stop() below takes it from here
            if not ending:
                self._fill()
            self._collect()
            self._ready.set()
        if ending:
            threading.Thread(target=self.stop, daemon=True).start()
        return {"metrics_url": self.metrics_url, "warning": warning, "adopted": adopted}

    # --- surviving a controller's death ---------------------------------------------------
    def controller_state(self) -> dict:
        """The small plain-data state a successor needs to take the run over (the driver
        asks for it every half second and keeps the last): desired counts, restarts, crash
        windows, errors, the counters' floors (``RestoredCounters``, ``MonotonicGuard``,
        ended actors' snapshots) and each live actor's last report. Wall-clock times, as
        the successor may run on another node."""
        with self._lock:
            now, wall = time.monotonic(), time.time()
            state = {
                "state": self._state, "started_wall": wall - (now - self._started),
                "generation": self.generation, "desired": self.desired,
                "restarts": self.restarts, "next_index": self._next_index,
                "crashes": {k: [wall - (now - t) for t in q] for k, q in self._crashes.items()},
                "last_error": self._last_error, "error": self.error, "failed": self._failed,
                "lost": self.lost, "final_reports": self._final_reports,
                "minutes_up": self._minutes_up, "inference": self.inference,
                "finished_stats": self.finished_stats,
                "restored": {k: vars(line) for k, line in self._restored.items()},
                "guard": vars(self._guard), "merged": self._merged,
                "metrics_port": int(self.metrics_url.rsplit(":", 1)[1].split("/")[0]),
                "slots": [{"kind": s.kind, "index": s.index, "stopping": s.stopping,
                           "started": s.started, "replacement": s.replacement,
                           "last_stats": s.last_stats, "where": s.where}
                          for slots in self.slots.values() for s in slots],
            }
            # a deep copy now: Ray serialises the reply after the lock is released
            return copy.deepcopy(state)

    def _load_state(self, st: dict) -> None:
        """Take over a dead predecessor's ``controller_state()`` (see ``start``)."""
        if not st:
            return
        now, wall = time.monotonic(), time.time()
        self._started = now - (wall - st["started_wall"])
        self.generation = int(st["generation"]) + 1
        self.desired.update(st["desired"])
        self.restarts.update(st["restarts"])
        self._next_index.update(st["next_index"])
        for k, times in st["crashes"].items():
            self._crashes[k].extend(now - (wall - t) for t in times)
        self._last_error.update(st["last_error"])
        self.error, self._failed, self.lost = st["error"], st["failed"], st["lost"]
        self._final_reports.update(st["final_reports"])
        self._minutes_up = st["minutes_up"]
        self.inference = st["inference"]
        self.finished_stats = list(st["finished_stats"])
        for k, fields in st["restored"].items():
            vars(self._restored[k]).update(fields)
        vars(self._guard).update(st["guard"])
        self._merged = st["merged"]
        self._known = list(st["slots"])
        # status shows the run's state at once; the monitor waits for start() (_ready)
        self._state = self._resumed_state = st["state"]

    def _adopt(self) -> int:
        """Adopt the run's live named actors (``run`` again: see ``ServiceHost``); a slot
        of the predecessor's state that is gone died while no controller watched (a crash,
        unless it was being retired). Returns how many were adopted."""
        known = {(s["kind"], s["index"]): s for s in self._known}
        found = run_actor_names(self.run_id)
        for kind, index, name in found:
            try:
                handle = ray.get_actor(name, namespace=NAMESPACE)
            except ValueError:  # died between the listing and now
                continue
            was = known.pop((kind, index), {})
            slot = _Slot(kind, index, handle, run_ref=handle.run.remote(),
                         stopping=bool(was.get("stopping")), started=bool(was.get("started")),
                         replacement=bool(was.get("replacement")),
                         last_stats=dict(was.get("last_stats") or {}),
                         where=dict(was.get("where") or {}))
            self.slots[kind].append(slot)
            self._next_index[kind] = max(self._next_index[kind], index + 1)
            if slot.stopping:
                with contextlib.suppress(Exception):
                    handle.stop.remote()
        for (kind, index), was in known.items():
            line = self._restored.get(kind)
            if line is not None:
                if was.get("last_stats"):
                    line.report(index, was["last_stats"])
                line.ended(index)
            elif was.get("last_stats"):
                self.finished_stats.append(was["last_stats"])
            if was.get("stopping"):
                continue
            self._last_error[kind] = "died while the run had no controller"
            log.warning("%s %d died while the run had no controller", kind, index)
            if not self._crash_loop(kind):
                self.restarts[kind] += 1
        self._known = []
        if self.slots["inference"]:
            self._push_servers()
        return len(found)

    def pid(self) -> int:
        """The controller's process id (chaos tests kill it with SIGKILL)."""
        return os.getpid()

    def _needs(self, name: str) -> dict[str, float]:
        """Resources one actor of kind ``name`` reserves."""
        if KINDS[name].is_server:
            c = self.config.inference
            gpu = c.device.startswith("cuda") or (
                c.device == "auto" and ray.cluster_resources().get("GPU", 0) >= 1)
            return {"CPU": c.num_cpus, "GPU": 1.0 if gpu else 0.0}
        o = KINDS[name].options(self.config)
        custom = {r: float(v) for r, v in o.get("resources", {}).items()}
        return {"CPU": float(o.get("num_cpus") or 0), "GPU": float(o.get("num_gpus") or 0),
                **custom}

    def _shortfall(self) -> str:
        """One line when the actors ``_fill`` is about to create (plus those still pending)
        need more CPUs/GPUs than the cluster has free; "" when they fit."""
        free = ray.available_resources()
        need: dict[str, float] = collections.defaultdict(float)
        new = []
        for name in KINDS:
            live = [s for s in self.slots[name] if not s.stopping]
            waiting = [s for s in live if not s.started]
            count = max(self.desired[name] - len(live), 0)
            if count:
                new.append(f"{count} {name}")
            for res, amount in self._needs(name).items():
                need[res] += amount * (count + len(waiting))
        short = [f"{need[r]:g} {r} (free: {free.get(r, 0.0):g})" for r in need
                 if need[r] > free.get(r, 0.0) + 1e-9]
        if not short or not new:
            return ""
        return (f"the cluster cannot hold all the asked actors ({', '.join(new)}) now: they "
                f"need {' and '.join(short)}; the rest stay pending until resources free up "
                "(see `zeroforge status`)")

    def scale(self, workers: int | None = None, inference_servers: int | None = None) -> dict:
        """Change the desired counts; the monitor loop creates or retires actors."""
        return self.scale_report(workers, inference_servers)["desired"]

    def scale_report(self, workers: int | None = None, inference_servers: int | None = None
                     ) -> dict:
        """``scale``, returning ``{"desired": counts, "warning": line}``: the warning says
        when the cluster's free resources cannot hold the new actors ("" if they fit)."""
        warning = ""
        self._ready.wait(120)
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
                warning = self._shortfall()
                self._fill()
        return {"desired": dict(self.desired), "warning": warning}

    def stop(self, timeout_s: float = 60.0) -> dict:
        """Stop the actors phase by phase (``ActorKind.stop_phase``): workers and the
        evaluator (their finished games are appended), then the learner (final
        checkpoint), then the inference servers."""
        self._ready.wait(120)
        with self._lock:
            if self._state in ("stopping", "stopped", "failed"):
                return self.status()
            self._state = "stopping"
            # an actor Ray never scheduled (no resources) has nothing to save: kill it now
            # rather than wait for it. One that is starting (a replacement learner that
            # resumes from the checkpoint) is stopped like the others: its ``run`` begins,
            # sees the stop and drains, so the games appended since its predecessor's last
            # checkpoint are in the final one.
            with contextlib.suppress(Exception):
                self._probe(timeout_s=1.0)
            for slots in self.slots.values():
                for slot in [s for s in slots
                             if s.cancelled
                             or (not s.started and self._slot_state(s) == "pending")]:
                    slots.remove(slot)
                    with contextlib.suppress(Exception):
                        ray.kill(slot.handle, no_restart=True)
        unfinished = []
        for phase in sorted({k.stop_phase for k in KINDS.values()}):
            refs = {}
            for name, kind in KINDS.items():
                if kind.stop_phase != phase:
                    continue
                self.desired[name] = 0
                for slot in self.slots[name]:
                    self._retire(slot)
                    refs[slot.run_ref] = slot
            ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
            for ref in ready:
                self._final_report(refs[ref])
            unfinished += [f"{refs[r].kind} {refs[r].index}" for r in late]
        with self._lock:
            self._collect()
            problems = self._losses()
            if unfinished:
                problems.append(f"{', '.join(unfinished)} did not finish within "
                                f"{timeout_s:.0f} s (no final checkpoint from them)")
            if problems and not self.error:
                self.error = "the stop lost data: " + "; ".join(problems)
            self._state = "failed" if self._failed else "stopped"
        return self.status()

    def _final_report(self, slot: _Slot) -> None:
        """Keep what a stopped actor's ``run`` returned, or why it failed."""
        try:
            result = ray.get(slot.run_ref)
        except Exception as err:
            self._last_error[slot.kind] = error_line(err)
            if KINDS[slot.kind].clean_end_ends_run:
                self.lost["crashed_while_stopping"] = 1
            return
        if isinstance(result, dict):
            self._final_reports[slot.kind] = result

    def _losses(self) -> list[str]:
        """What the learner's final report says it could not save, in words (and in
        ``self.lost``)."""
        report = self._final_reports.get("learner", {})
        for key in ("unacked", "unpublished_steps"):
            if report.get(key):
                self.lost[key] = float(report[key])
        words = []
        if self.lost.get("crashed_while_stopping"):
            words.append("the learner crashed while stopping ("
                         f"{self._last_error.get('learner', '?')}); its last checkpoint "
                         "is the periodic one")
        if self.lost.get("unpublished_steps"):
            words.append(f"the final publish failed: {self.lost['unpublished_steps']:.0f} "
                         "learner steps are in the checkpoint but not in Redis")
        if self.lost.get("unacked"):
            words.append(f"{self.lost['unacked']:.0f} stream entries were not acknowledged "
                         "(Redis failed); they are in the checkpoint, and `--resume` skips "
                         "them when they come back")
        return words

    def shutdown(self) -> None:
        """Stop (if not yet) and kill every actor of the run, freeing their resources."""
        self.stop()
        with self._lock:
            for slots in self.slots.values():
                for slot in slots:
                    with contextlib.suppress(Exception):
                        ray.kill(slot.handle, no_restart=True)
                slots.clear()
            # detached actors: also any this controller never knew of (a predecessor made
            # them just before it died)
            with contextlib.suppress(Exception):
                kill_run_actors(self.run_id)
        with contextlib.suppress(Exception):
            self._endpoint.close()

    def _alive(self, name: str) -> int:
        return sum(s.started and not s.stopping for s in self.slots[name])

    def _actor_states(self) -> tuple[dict[str, dict[str, int]], dict[str, str]]:
        """Per kind, how many actors are pending / starting / restarting / alive /
        stopping (and ``failed``: crashes in the window after the run gave up), and why
        pending ones wait."""
        states: dict[str, dict[str, int]] = {}
        waiting: dict[str, str] = {}
        free = None
        for name in KINDS:
            counts: collections.Counter[str] = collections.Counter()
            for slot in self.slots[name]:
                counts[self._slot_state(slot)] += 1
            if self._failed and self._crashes[name]:
                counts["failed"] = len(self._crashes[name])
            states[name] = dict(counts)
            if counts["pending"]:
                if free is None:
                    free = ray.available_resources()
                needs = " + ".join(f"{v:g} {r}" for r, v in self._needs(name).items() if v)
                have = ", ".join(f"{free.get(r, 0.0):g} {r}" for r, v in
                                 self._needs(name).items() if v)
                waiting[name] = (f"{counts['pending']} waiting for {needs or 'resources'} "
                                 f"each (free: {have or 'n/a'})")
        return states, waiting

    def _slot_state(self, slot: _Slot) -> str:
        if slot.stopping:
            return "stopping"
        if slot.started:
            return "alive"
        if _gcs_actor_state(slot.handle) in _PENDING_STATES:
            return "pending"
        return "restarting" if slot.replacement else "starting"

    def status(self) -> dict:
        """``RunStatus.to_json()`` (plain data crosses Ray)."""
        alive = {k: self._alive(k) for k in KINDS}
        states, waiting = self._actor_states()
        return RunStatus.from_metrics(
            self._merged, received_before=self._received_before(), run_id=self.run_id,
            state=self._state,
            elapsed_s=round(time.monotonic() - self._started, 1), inference=self.inference,
            desired=dict(self.desired), alive=alive, restarts=dict(self.restarts),
            metrics_url=self.metrics_url, actor_states=states, waiting=waiting,
            error=self.error, lost=dict(self.lost), actors=self._rows()).to_json()

    def _rows(self) -> list[dict]:
        """One row per live actor (``RunStatus.actors``)."""
        rows = []
        for name, slots in self.slots.items():
            for slot in sorted(slots, key=lambda s: s.index):
                row = {"kind": name, "index": slot.index, "state": self._slot_state(slot),
                       "node": str(slot.where.get("node", "")),
                       "ip": str(slot.where.get("ip", "")),
                       "pid": int(slot.where.get("pid", 0))}
                for key, metric in _ROW_COUNTERS.items():
                    row[key] = _own_total(slot.last_stats, metric)
                rows.append(row)
        return rows

    def _received_before(self) -> float:
        """Games the learner had received before this run: 0 for a fresh run, the first
        learner's first report when resumed (over by the games it took before that report,
        so ``games`` errs low)."""
        line = self._restored.get("learner")
        if not self.resume or line is None:
            return 0.0
        if line.first_base is None:
            return float("inf")  # not known yet: the workers' count alone
        return line.first_base.get(("learner_games_received_total", ()), 0.0)

    def metrics_snapshot(self) -> dict:
        """The merged snapshot, as plain data (for tests, tools and the driver's dashboard
        history, which needs the histograms too)."""
        m = self._merged
        return {"values": {n: [[list(map(list, k)), val] for k, val in s.items()]
                           for n, s in m["values"].items()},
                "hists": {n: [[list(map(list, k)), list(h)] for k, h in s.items()]
                          for n, s in m.get("hists", {}).items()}}

    def actor_handles(self, kind: str) -> list:
        """Live actor handles of one kind (for tests that kill one)."""
        return [s.handle for s in self.slots[kind] if not s.stopping]


_ROW_COUNTERS = {"games": "selfplay_games_total", "positions": "selfplay_positions_total",
                 "steps": "learner_steps_total", "evaluations": "nn_evaluations_total"}
"""Status row key -> the counter of an actor's own snapshot it shows (summed over labels)."""


def _own_total(snapshot: dict, name: str) -> float:
    """One counter of an actor's own (unmerged) snapshot, summed over its series."""
    return float(sum(v for _, v in (snapshot or {}).get("values", {}).get(name, [])))


def _endpoint(source: Callable[[], Any], host: str, port: int, previous: int
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


_PENDING_STATES = ("PENDING_CREATION", "DEPENDENCIES_UNREADY")
"""GCS actor states of an actor Ray has not scheduled yet (no node has its resources)."""


def _gcs_actor_state(handle: Any) -> str:
    """Ray's own view of an actor (``PENDING_CREATION``, ``ALIVE``, ``RESTARTING``...),
    from the GCS actor table; "" when Ray does not say."""
    try:
        from ray._private import state as ray_state

        info = ray_state.actors(actor_id=handle._actor_id.hex())
        return str(info.get("State", "")) if isinstance(info, dict) else ""
    except Exception:  # a private API: never let it break status
        return ""


_ERROR_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(Error|Exception|Interrupt)): (.+)$")


def error_line(err: BaseException) -> str:
    """One line for an actor's failure: the innermost ``SomeError: message`` of Ray's
    multi-line text (it wraps the real error in a traceback), else its first line."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException) and not isinstance(cause, RayActorError | RayTaskError):
        text = str(cause).strip().splitlines()
        return f"{type(cause).__name__}: {text[0] if text else ''}"[:300]
    lines = str(err).strip().splitlines()
    found = [m.group(1).rsplit(".", 1)[-1] + ": " + m.group(3)
             for m in map(_ERROR_LINE.match, lines) if m]
    return (found[-1] if found else lines[0] if lines else type(err).__name__)[:300]


# ------------------------------------------------------------------------------------------
# driver and CLI side
# ------------------------------------------------------------------------------------------


class RunNotFound(ValueError):
    """No run (or more than one, without --run-id) on the cluster."""


class ControllerLost(RuntimeError):
    """The run's controller died more often than its handle replaces it
    (``RunHandle.max_controller_deaths`` within ``CONTROLLER_DEATH_WINDOW_S``)."""


CONTROLLER_DEATH_WINDOW_S = 300.0
"""The window of the controller's crash-loop limit, in seconds."""


class RunHandle:
    """A run's controller, seen from the driver or the CLI.

    The driver's handle (from ``start_run``) can replace a dead controller: it keeps the
    controller's last ``controller_state()`` (``keep_alive``, every half second or so) and,
    when a call finds the controller dead, starts a successor under the same name that
    adopts the run's live actors. The CLI's handle (``find_run``) waits for that successor
    instead and retries its call once."""

    def __init__(self, run_id: str, actor: Any, spawn: dict | None = None) -> None:
        self.run_id = run_id
        self.actor = actor
        self._spawn = spawn
        """Controller arguments (config, ctx, resume, max_crashes): the handle that started
        the run may start a successor."""
        self._state: dict = {}
        """The controller's last ``controller_state()``."""
        self.controller_restarts = 0
        """Successors this handle started."""
        self.takeovers: list[str] = []
        """One line per takeover (what died, what was adopted), for the driver to print."""
        self._replacing = threading.Lock()
        """Several threads of the driver call the controller; one replaces it."""
        self.max_controller_deaths = 5
        """Controller deaths within ``CONTROLLER_DEATH_WINDOW_S`` that are replaced; one
        more raises ``ControllerLost`` (a controller that cannot live is not restarted
        forever)."""
        self._deaths: collections.deque[float] = collections.deque()

    def _call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        """``ray.get(controller.method.remote(*args))``; a dead controller is replaced (or,
        without ``_spawn``, its successor is waited for) and the call made once more."""
        actor = self.actor
        try:
            return ray.get(getattr(actor, method).remote(*args), timeout=timeout)
        except RayActorError as err:
            self._replace(err, actor)
        return ray.get(getattr(self.actor, method).remote(*args), timeout=timeout)

    def keep_alive(self, timeout: float = 10.0) -> bool:
        """Fetch the controller's state to hand to a successor; replace it if it is dead.
        Returns True when a successor took over."""
        actor = self.actor
        try:
            state = ray.get(actor.controller_state.remote(), timeout=timeout)
        except GetTimeoutError:
            return False  # busy, not dead: the next call will tell
        except RayActorError as err:
            return self._replace(err, actor)
        with self._replacing:
            if actor is self.actor:  # not a dead predecessor's late answer
                self._state = state
        return False

    def _replace(self, err: BaseException, dead: Any) -> bool:
        """The controller ``dead`` died: start a successor (driver) or find it (CLI).
        False when another thread already did."""
        with self._replacing:
            if dead is not self.actor:
                return False
            self._replace_locked(err)
            return True

    def _replace_locked(self, err: BaseException) -> None:
        if self._spawn is None:
            deadline = time.monotonic() + 30.0
            while True:
                with contextlib.suppress(ValueError):
                    actor = ray.get_actor(controller_name(self.run_id), namespace=NAMESPACE)
                    if actor._actor_id != self.actor._actor_id:
                        self.actor = actor
                        return
                if time.monotonic() > deadline:
                    raise RunNotFound(f"the controller of run {self.run_id} died and no "
                                      "successor came up within 30 s") from None
                time.sleep(0.5)
        began = time.monotonic()
        self._deaths.append(began)
        while began - self._deaths[0] > CONTROLLER_DEATH_WINDOW_S:
            self._deaths.popleft()
        if len(self._deaths) > self.max_controller_deaths:
            raise ControllerLost(
                f"the controller of run {self.run_id} died {len(self._deaths)} times within "
                f"{CONTROLLER_DEATH_WINDOW_S:.0f} s; giving up. Last error: {error_line(err)}")
        with contextlib.suppress(Exception):
            ray.kill(self.actor, no_restart=True)
        deadline = time.monotonic() + 30.0
        while True:  # the dead one's name is freed once Ray has marked it dead
            try:
                successor = _controller_actor(self.run_id, self._spawn, self._state)
                break
            except ValueError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        # other threads' calls wait on the lock until it has adopted the actors
        report = ray.get(successor.start.remote())
        self.actor = successor
        self.controller_restarts += 1
        line = (f"the controller of run {self.run_id} died ({error_line(err)}); successor "
                f"{self.controller_restarts} adopted {report['adopted']} live actors in "
                f"{time.monotonic() - began:.1f} s")
        log.info("%s", line)  # the driver prints ``takeovers`` as its warning lines
        self.takeovers.append(line)

    warning = ""
    """Set by ``start`` and ``scale``: one line when the cluster cannot hold the actors."""

    def start(self) -> str:
        """Create the run's actors; returns the metrics URL (``warning`` says when the
        cluster's free resources cannot hold them)."""
        report = ray.get(self.actor.start.remote())
        self.warning = report["warning"]
        self.keep_alive()
        return report["metrics_url"]

    def status(self) -> RunStatus:
        return RunStatus.from_json(self.status_json())

    def status_json(self) -> dict:
        """``status`` as the controller sends it (plain data)."""
        return self._call("status")

    def scale(self, workers: int | None = None, inference_servers: int | None = None
              ) -> dict[str, int]:
        """New desired counts; a refused change raises ValueError with the reason."""
        try:
            report = self._call("scale_report", workers, inference_servers)
            self.warning = report["warning"]
            return report["desired"]
        except RayTaskError as err:
            raise ValueError(str(err.cause) if err.cause else str(err).splitlines()[0]
                             ) from None

    def stop(self) -> RunStatus:
        return RunStatus.from_json(self._call("stop"))

    def shutdown(self) -> None:
        """Stop, kill every actor of the run (they are detached: also those a dead
        controller left) and the controller itself."""
        with contextlib.suppress(Exception):
            ray.get(self.actor.shutdown.remote())
        with contextlib.suppress(Exception):
            kill_run_actors(self.run_id)
        with contextlib.suppress(Exception):
            ray.kill(self.actor)

    def metrics_snapshot(self) -> dict:
        return self._call("metrics_snapshot")

    def actor_handles(self, kind: str) -> list:
        return self._call("actor_handles", kind)

    def controller_pid(self) -> int:
        return int(self._call("pid"))

    def game_ids(self, kind: str) -> list[list[str]]:
        """Game ids held by each live actor of ``kind`` (exactly-once checks)."""
        return ray.get([h.game_ids.remote() for h in self.actor_handles(kind)])


def _controller_actor(run_id: str, spawn: dict, takeover: dict | None) -> Any:
    """A run's controller actor, named after the run; owned by its creator (the driver),
    so it ends with the driver. It runs on the driver's node: its metrics endpoint
    (``run.metrics_host``, loopback by default) is then on the machine the user started the
    run from, not on whichever node Ray picks for a 0-CPU actor. Hard affinity: Ray 2.60
    placed soft-affine 0-CPU actors on other nodes about half the time (netns test bed);
    the driver's own node is alive while the driver is, and the actor needs no resources."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    options: dict[str, Any] = {}
    with contextlib.suppress(Exception):  # a driver without a node of its own: Ray's choice
        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
            ray.get_runtime_context().get_node_id(), soft=False)
    return ray.remote(Controller).options(
        name=controller_name(run_id), namespace=NAMESPACE, max_concurrency=16,
        num_cpus=0, **options).remote(
            spawn["config"], spawn["ctx"], spawn["resume"], spawn["max_crashes"], takeover)


def start_run(config: TrainConfig, ctx: RunContext, resume: bool = False,
              max_crashes: dict[str, int] | None = None, max_controller_deaths: int = 5
              ) -> RunHandle:
    """Create the run's controller as a named actor (``ray.init`` must have run) and start
    its actors. The handle replaces the controller if it dies (``RunHandle.keep_alive``).
    ``max_crashes``: see ``Controller``; ``max_controller_deaths``: see ``RunHandle``."""
    spawn = {"config": cfg.to_dict(config), "ctx": ctx.to_dict(), "resume": resume,
             "max_crashes": max_crashes}
    handle = RunHandle(ctx.run_id, _controller_actor(ctx.run_id, spawn, None), spawn)
    handle.max_controller_deaths = max_controller_deaths
    handle.start()
    return handle


def default_token_path() -> Path:
    """Where Ray 2.60 reads its token when neither ``RAY_AUTH_TOKEN`` nor
    ``RAY_AUTH_TOKEN_PATH`` is set."""
    return Path.home() / ".ray" / "auth_token"


def token_path() -> Path | None:
    """The token file this process hands to Ray (None: the token is in $RAY_AUTH_TOKEN)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return None
    return Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or default_token_path())


def private_token() -> Path | None:
    """Make sure the Ray token file exists and is readable by its owner only (0600).

    Ray 2.60 creates ``~/.ray/auth_token`` with the process umask (0644: any user of the
    machine could read the key to the cluster). We create it first, 0600, with a random
    token of the form Ray makes, and tighten an existing file of ours to 0600."""
    path = token_path()
    if path is None or os.environ.get("RAY_AUTH_MODE", "token").lower() != "token":
        return path
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if path.stat().st_mode & 0o077 and path.stat().st_uid == os.getuid():
            os.chmod(path, 0o600)
    else:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    return path


def init_local(num_cpus: int | None = None) -> None:
    """A private local cluster on loopback (see docs/architecture.md, Security, for what
    Ray 2.60 still binds to every interface). Logical CPUs are twice the cores: on a
    laptop the learner, the workers and the evaluator take turns on the same cores rather
    than waiting for a free one."""
    private_token()
    with _loopback_node():
        ray.init(namespace=NAMESPACE, include_dashboard=False, logging_level="WARNING",
                 log_to_driver=True, num_cpus=num_cpus or 2 * (os.cpu_count() or 2),
                 _node_ip_address="127.0.0.1", dashboard_host="127.0.0.1")
    private_token()


_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@contextlib.contextmanager
def _loopback_node() -> Any:
    """Make Ray 2.60 keep a new local node on 127.0.0.1.

    ``ray.init(_node_ip_address="127.0.0.1")`` alone is not enough: Ray rewrites a
    loopback node address to the machine's outward address
    (``services.resolve_ip_for_localhost``), so the GCS address, the autoscaler monitor's
    metrics port and the runtime-env agent end up on the network. Ray keeps loopback only
    where it believes multi-node clusters are off (``ray_constants.ENABLE_RAY_CLUSTER``,
    from $RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER): switch that off while the node starts (the
    processes it spawns inherit the variable), and put both back afterwards so a later
    ``join`` in this process resolves addresses as usual."""
    from ray._private import ray_constants

    before_env, before = os.environ.get(_LOOPBACK_ENV), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[_LOOPBACK_ENV] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before
        if before_env is None:
            os.environ.pop(_LOOPBACK_ENV, None)
        else:
            os.environ[_LOOPBACK_ENV] = before_env


def _use_token(address: str, token: str | None = None) -> None:
    """Before ``ray.init(address=...)``: Ray 2.60 turns token authentication on by itself
    only for ``address="auto"``; an explicit address connects without the token (the GCS
    answers ``InvalidAuthToken``) unless RAY_AUTH_MODE says token. Turn it on when a
    token is at hand (``token``: the run's token file)."""
    if token and not os.environ.get("RAY_AUTH_TOKEN"):
        os.environ["RAY_AUTH_TOKEN_PATH"] = token
    if address != "auto" and "RAY_AUTH_MODE" not in os.environ:
        path = token_path()
        if path is None or path.exists():
            os.environ["RAY_AUTH_MODE"] = "token"
    # Ray read both when it was imported: make it read them again
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _resolve(address: str) -> str:
    """``auto``: the address of the newest local cluster (Ray's own lookup), so that a
    loopback one is attached to on loopback (below); anything else as given."""
    if address != "auto":
        return address
    from ray._private import services

    found = services.get_ray_address_from_environment("auto", None)
    if not found:
        raise ConnectionError("no local Ray cluster found")
    return str(found)


def _connect(address: str, **kwargs: Any) -> None:
    """``ray.init(address=...)``; a cluster on loopback is joined on loopback (Ray 2.60
    would otherwise rewrite 127.0.0.1 to the machine's outward address and miss it)."""
    host = address.rsplit(":", 1)[0].strip("[]")
    if "://" in address or host not in ("127.0.0.1", "localhost", "::1"):
        ray.init(address=address, **kwargs)
        return
    with _loopback_node():
        ray.init(address=address, _node_ip_address="127.0.0.1", **kwargs)


def join(address: str) -> None:
    """Join an existing Ray cluster (``ray://`` client or ``host:port``)."""
    address = _resolve(address)
    _use_token(address)
    _connect(address, namespace=NAMESPACE, include_dashboard=False,
             logging_level="WARNING", log_to_driver=True)


def cluster_address() -> str:
    """The GCS address (host:port) of the cluster this driver is connected to."""
    return str(ray.get_runtime_context().gcs_address)


def disconnect() -> None:
    with contextlib.suppress(Exception):
        ray.shutdown()


def find_run(address: str | None, run_id: str | None, run_dir: str | None = None
             ) -> RunHandle:
    """Attach to the right cluster and find the run.

    ``run_dir``: the run recorded in ``RUN_DIR/run.json``; ``run_id`` without an address:
    the live run of that id in the per-user index (``deploy/run_registry.py``); an
    ``address`` (or $RAY_ADDRESS): that cluster, and the run on it (the only one, or
    ``run_id``). With none of these: the only live run in the index; several live runs
    are refused (listed in one line) rather than guessed; none: the newest local cluster.
    """
    from zeroforge.deploy import run_registry

    entry = None
    try:
        if run_dir:
            entry = run_registry.from_run_dir(run_dir)
        elif not address and run_id:
            entry = run_registry.lookup(run_id)
        elif not address and not os.environ.get("RAY_ADDRESS"):
            live = run_registry.live_runs()
            if len(live) > 1:
                raise RunNotFound("several runs are live: "
                                  + ", ".join(e.describe() for e in live)
                                  + "; pass --run-dir or --run-id")
            entry = live[0] if live else None
    except run_registry.RegistryError as err:
        raise RunNotFound(str(err)) from None
    if entry is not None:
        address, run_id = entry.address, entry.run_id
    target = address or os.environ.get("RAY_ADDRESS") or "auto"
    try:
        target = _resolve(target)
        _use_token(target, entry.token_path if entry is not None else None)
        _connect(target, namespace=NAMESPACE, logging_level="ERROR", log_to_driver=False)
    except ConnectionError as err:
        raise RunNotFound(f"no Ray cluster to attach to ({str(err).splitlines()[0]}); "
                          "is `zeroforge train` running?") from None
    names = [n for n in ray.util.list_named_actors() if n.startswith("controller-")]
    runs = sorted(re.sub(r"^controller-", "", n) for n in names)
    if run_id:
        if run_id not in runs:
            raise RunNotFound(f"no run {run_id!r} (running: {', '.join(runs) or 'none'})")
    elif len(runs) != 1:
        raise RunNotFound("no run is going" if not runs else
                          f"several runs ({', '.join(runs)}): pass --run-id")
    else:
        run_id = runs[0]
    return RunHandle(run_id, ray.get_actor(controller_name(run_id), namespace=NAMESPACE))
