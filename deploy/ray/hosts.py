"""The Ray actors that host a run's services, and how a self-play worker reaches the
inference servers:

- ``ServiceHost``: runs one plain service (self-play, learner or evaluator, built from
  ``KINDS``) in a threaded actor, ``run`` in one thread, ``stop``/``stats`` from another.
- ``InferenceServerActor`` / ``make_inference_actor``: an ``InferenceServer`` in an async
  actor; ``RemoteEvaluator``: the evaluator a self-play worker holds to reach them.

Configs cross into actors as plain dicts (``shared.config.to_dict``), never as pickled
classes of ours. Ray pickles these classes by reference to this module.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError

from zeroforge.actors.config import InferenceServerConfig
from zeroforge.actors.inference import InferenceServer
from zeroforge.deploy.config import TrainConfig
from zeroforge.deploy.ray.kinds import KINDS
from zeroforge.deploy.ray.lease import Lease
from zeroforge.deploy.ray.naming import NAMESPACE
from zeroforge.deploy.runtime.node_stats import ResourceReporter
from zeroforge.learner.group_seat import GroupAddress, GroupSeat
from zeroforge.shared import config as cfg
from zeroforge.shared.nets import NetConfig
from zeroforge.shared.run_context import RunContext
from zeroforge.shared.search import Evaluation, check_evaluation
from zeroforge.shared.service import Service

log = logging.getLogger(__name__)


def _where() -> dict:
    """This actor's process id, short Ray node id and node IP address (status rows)."""
    return {"pid": os.getpid(), "node": _node_label(), "ip": ray.util.get_node_ip_address()}


def _node_label() -> str:
    """The ``node`` label of an actor's resource metrics: its Ray node id's first 8 hex
    digits (as in ``zeroforge status``)."""
    return str(ray.get_runtime_context().get_node_id())[:8]


# ------------------------------------------------------------------------------------------
# inference servers
# ------------------------------------------------------------------------------------------


class NoInferenceServerError(RuntimeError):
    """Every inference server a RemoteEvaluator knew of has died."""


class RemoteEvaluator:
    """The Evaluator of a self-play worker whose network lives in InferenceServer actors.

    ``evaluate`` sends the leaf batch to the servers in turn (round robin from a random
    start, so workers do not all begin on the same one); a server found dead is dropped,
    logged once, and the batch goes to the next. With none left, the batch waits up to
    ``wait_for_servers_s`` for the controller to hand over new ones (``set_servers``)
    and goes to them: a request in flight when its server dies is sent again, not lost.
    ``weights_version`` is the version of the last answer, so finished games are tagged
    with the weights that played them. Thread-safe: a worker's groups
    (``selfplay.batches_in_flight``) and a host's workers call it from their threads.
    """

    def __init__(self, servers: Sequence[Any], timeout_s: float | None = 300.0,
                 wait_for_servers_s: float = 300.0,
                 stop: threading.Event | None = None) -> None:
        """``stop``: the hosting service's stop; set, it ends a wait for servers at once
        (a run stopping while its servers are gone does not wait them out)."""
        self.timeout_s = timeout_s
        """Longest wait for one answer (None: forever); a server busy compiling its first
        batches may take a while."""
        self.wait_for_servers_s = wait_for_servers_s
        """Longest wait for new servers once every known one has died (the controller
        starts replacements within seconds; its lease outlives a lost driver)."""
        self.weights_version = 0
        self._stop = stop
        self._changed = threading.Condition()
        """Guards the server list; notified when ``set_servers`` hands over new ones."""
        self._servers: list[Any] = []
        self._next = 0
        self.set_servers(servers)

    @property
    def servers(self) -> list[Any]:
        """The server handles still in use."""
        with self._changed:
            return list(self._servers)

    def set_servers(self, servers: Sequence[Any]) -> None:
        """Use these server actor handles from now on (after scaling or replacement)."""
        with self._changed:
            self._servers = list(servers)
            self._next = random.randrange(len(self._servers)) if self._servers else 0
            self._changed.notify_all()

    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        """obs [B, C, H, W] uint8, legal [B, A] bool -> Evaluation from one server."""
        while True:
            server = self._pick()
            try:
                logits, value, version = ray.get(server.evaluate.remote(obs, legal),
                                                 timeout=self.timeout_s)
            except RayActorError as err:
                self._drop(server, err)
                continue
            except GetTimeoutError:
                raise TimeoutError(f"inference server {server} did not answer within "
                                   f"{self.timeout_s} s") from None
            ev = Evaluation(logits, value, int(version))
            check_evaluation(ev, legal.shape[0], legal.shape[1])
            self.weights_version = ev.weights_version
            return ev

    def _pick(self) -> Any:
        """The next server in turn; with none, wait for ``set_servers`` (bounded)."""
        with self._changed:
            if not self._servers:
                log.warning("no inference server left; waiting up to %.0f s for the "
                            "controller's replacements", self.wait_for_servers_s)
                deadline = time.monotonic() + self.wait_for_servers_s
                stopping = self._stop.is_set if self._stop is not None else lambda: False
                # in slices, so that the service's stop ends the wait within a second
                while (not self._servers and not stopping()
                       and (left := deadline - time.monotonic()) > 0):
                    self._changed.wait(min(left, 1.0))
                if not self._servers:
                    why = ("the worker is stopping" if stopping() else
                           f"no new one handed over within {self.wait_for_servers_s:g} s; "
                           "the controller must start new ones and hand them over with "
                           "set_servers")
                    raise NoInferenceServerError("RemoteEvaluator: no inference server left "
                                                 f"(all have died) and {why}")
            i = self._next % len(self._servers)
            self._next = i + 1
            return self._servers[i]

    def _drop(self, server: Any, err: BaseException) -> None:
        """Forget a dead server (once: another thread may have dropped it already)."""
        with self._changed:
            kept = [s for s in self._servers if s is not server]
            if len(kept) == len(self._servers):
                return
            self._servers = kept
            log.warning("inference server %s is gone (%s); failing over to %d other(s)",
                        server, type(err).__name__, len(kept))


class InferenceServerActor(InferenceServer):
    """The form Ray instantiates: configs arrive as plain dicts (``shared.config.to_dict``)
    so none of our classes is pickled across the process boundary."""

    def __init__(self, game_spec: str, net_config: dict, config: dict, redis_url: str | None,
                 run_id: str, index: int = 0, lease_s: float = 0.0,
                 size_specs: tuple[str, ...] = (), redis_auth_dir: str = "",
                 weights_public_key: str = "") -> None:
        super().__init__(game_spec, cfg.from_dict(NetConfig, net_config, "net"),
                         cfg.from_dict(InferenceServerConfig, config, "inference"),
                         redis_url, run_id, server=str(index), size_specs=tuple(size_specs),
                         redis_auth_dir=redis_auth_dir, weights_public_key=weights_public_key)
        self._resources = ResourceReporter("inference", str(index), _node_label())
        self.lease = Lease(lease_s, lambda idle: _end_actor(
            f"inference server {index} of run {run_id}", idle)).start()

    def stats(self) -> dict:
        """The server's metrics plus its process's and node's resource figures (the
        controller asks every tick: this renews the lease)."""
        self.lease.renew()
        return self._resources.add_to(super().stats())

    def where(self) -> dict:
        """Process id and short node id (``zeroforge status`` rows)."""
        return _where()

    def pid(self) -> int:
        """The actor's process id (chaos tests kill it with SIGKILL)."""
        return os.getpid()


def make_inference_actor(game_spec: str, net_config: NetConfig, config: InferenceServerConfig,
                         redis_url: str | None, run_id: str, *, name: str | None = None,
                         index: int = 0, detached: bool = False, lease_s: float = 0.0,
                         size_specs: tuple[str, ...] = (), redis_auth_dir: str = "",
                         weights_public_key: str = "") -> Any:
    """Start one InferenceServer as an async Ray actor; returns its handle.

    It takes ``config.num_gpus`` of a GPU when ``config.device`` asks for CUDA, or is
    ``"auto"`` and the cluster has GPUs; otherwise it runs on ``config.num_cpus`` CPUs.
    Call ``ready`` on the handle to wait until it serves. ``ray.init`` must have run.
    ``index`` labels its metrics.
    ``detached``: the actor outlives its creator (a run's controller), in ``NAMESPACE``
    under ``name``; someone must kill it, or its lease (``lease_s`` without a ``stats``
    call, ``deploy/ray/lease.py``) ends it. ``size_specs``: the games of the run's other
    board sizes (``selfplay.board_sizes``), which it serves too. ``redis_auth_dir``: the
    directory of the Redis role passwords (a path: the secret stays in its file).
    ``weights_public_key``: the run's learner's; weights it did not sign are refused.
    """
    gpus = ray.cluster_resources().get("GPU", 0.0)
    wants_gpu = config.device.startswith("cuda") or (config.device == "auto" and gpus >= 1)
    if wants_gpu and gpus < 1:
        raise ValueError(f"inference device {config.device!r} needs a GPU, and the Ray "
                         "cluster has none")
    options: dict[str, Any] = {"num_cpus": config.num_cpus,
                               "max_concurrency": config.max_concurrency}
    if wants_gpu:
        options["num_gpus"] = config.num_gpus
    if name is not None:
        options["name"] = name
    if detached:
        options.update(lifetime="detached", namespace=NAMESPACE)
    actor_cls = ray.remote(InferenceServerActor).options(**options)
    return actor_cls.remote(game_spec, cfg.to_dict(net_config), cfg.to_dict(config),
                            redis_url, run_id, index, lease_s, list(size_specs),
                            redis_auth_dir, weights_public_key)


# ------------------------------------------------------------------------------------------
# services in actors
# ------------------------------------------------------------------------------------------

LEASE_STOP_GRACE_S = 120.0
"""How long an actor whose lease expired waits for its service to stop cleanly (the
learner's final checkpoint) before it exits anyway."""


def _end_actor(what: str, idle_s: float, stop: Callable[[], None] | None = None) -> None:
    """A lease expired: say so in one line, stop the service (``stop`` returns once it
    has), then end this actor's process. Ray marks the actor dead and frees its name."""
    log.warning("%s: no call from the run's controller for %.0f s (distributed.lease_s); "
                "the run has no driver: stopping and ending this actor", what, idle_s)
    if stop is not None:
        stop()
    logging.shutdown()
    os._exit(0)


GROUP_ADDRESS_TIMEOUT_S = 300.0
"""How long a learner replica waits for rank 0's actor to exist and say where its group
is (rank 0 may be restoring a large checkpoint, or pending for resources)."""


def _group_address(leader: Any) -> GroupAddress:
    """Rank 0's group address, asked of its actor (``ServiceHost.group_address``)."""
    host, port = ray.get(leader.group_address.remote(), timeout=GROUP_ADDRESS_TIMEOUT_S)
    return GroupAddress(str(host), int(port))



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
                 servers: list | None, rank: int = 0, leader: Any = None,
                 count: int = 1, first: int | None = None) -> None:
        """``rank`` and ``leader`` (rank 0's actor handle, for ranks 1..): the actor's seat
        in a gang (``ActorKind.gang``, the learner's replicas); ``count``: the workers a
        self-play host starts with (``ActorKind.per_actor``); ``first``: a node host's
        first worker index (None: ``index`` x its workers per host)."""
        self.kind = kind
        train = cfg.from_dict(TrainConfig, config, "config")
        context = RunContext.from_dict(ctx)
        self._stop = threading.Event()
        self.remote_evaluator = (RemoteEvaluator(servers, stop=self._stop)
                                 if servers is not None else None)
        seat = GroupSeat(rank, ray.util.get_node_ip_address(),
                         (lambda: _group_address(leader)) if leader is not None else None)
        self.service: Service = KINDS[kind].build(train, context, index, resume,
                                                  self.remote_evaluator, seat, count, first)
        self._resources = ResourceReporter(kind, str(index), _node_label())
        self._run_lock = threading.Lock()
        self._running = False
        self._done = threading.Event()
        self._result: Any = None
        self._error: BaseException | None = None
        self.lease = Lease(train.distributed.lease_s, lambda idle: _end_actor(
            f"{kind} {index} of run {context.run_id}", idle, self._stop_and_wait)).start()

    def _stop_and_wait(self) -> None:
        """Stop the service and wait for its clean end (bounded)."""
        self._stop.set()
        with self._run_lock:
            running = self._running
        if running:
            self._done.wait(LEASE_STOP_GRACE_S)

    def run(self) -> Any:
        """Run the service until ``stop`` (first call); a later call (a new controller
        adopting this actor) waits for that end and returns the same result or error."""
        self.lease.renew()
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
        self.lease.renew()
        self._stop.set()

    def stats(self) -> dict:
        """The service's metrics plus its process's and node's resource figures (the
        controller asks every tick: this renews the lease)."""
        self.lease.renew()
        return self._resources.add_to(self.service.stats())

    def resize(self, count: int) -> int:
        """A self-play host: keep ``count`` workers (``WorkerHost.resize``)."""
        self.lease.renew()
        resize = getattr(self.service, "resize", None)
        if resize is None:
            raise ValueError(f"a {self.kind} actor hosts one service; it cannot resize")
        return int(resize(count))

    def set_servers(self, servers: list) -> None:
        """New inference-server handles after scaling or a replacement."""
        self.lease.renew()
        if self.remote_evaluator is not None:
            self.remote_evaluator.set_servers(servers)

    def group_address(self) -> tuple[str, int]:
        """Where this learner (rank 0) serves its replica group: ``(host, port)``."""
        group = getattr(self.service, "group", None)
        if group is None:
            raise ValueError(f"{self.kind} leads no replica group")
        return group.address.host, group.address.port

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

