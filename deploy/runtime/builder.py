"""Services from a TrainConfig: the one place that hands each service its sections.

The local run (``deploy/local_run.py``) and the Ray runtime (``deploy/ray/``)
both build their self-play workers, learner and evaluator here, over whichever transport
they use (in memory or Redis), so the two modes run the same services with the same
settings (the way acme's builders serve local and distributed agents).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from typing import Any, TypedDict

from zeroforge.actors.process_worker import ProcessWorker
from zeroforge.actors.rating_service import RatingService
from zeroforge.actors.replay_worker import ReplayWorker, load_games
from zeroforge.actors.selfplay_service import SelfPlayService, seed_for
from zeroforge.actors.worker_host import WorkerHost
from zeroforge.actors.worker_relay import HostEndpoints, RelayTransport
from zeroforge.deploy.config import TrainConfig
from zeroforge.learner.group_seat import GroupSeat
from zeroforge.learner.learner import Learner
from zeroforge.learner.replica_group import LearnerReplica, ReplicaGroup
from zeroforge.learner.service import LearnerService
from zeroforge.shared import config as cfg
from zeroforge.shared.run_context import RunContext
from zeroforge.shared.run_files import RunFiles
from zeroforge.shared.search import VersionedEvaluator
from zeroforge.shared.transport import (
    AVERAGE_CHANNEL,
    Transport,
    open_transport,
    patiently,
    verifier_for,
)


class TransportArgs(TypedDict):
    """How a service opens the run's transport besides the ``RunContext``, as plain data
    (a hosted worker's process gets it as it is): resolved in the actor, where Ray says
    which node it is on, and opened wherever the service is built."""

    role: str
    """The Redis role the service connects as (``shared.transport.acl``)."""
    weights_cache_dir: str | None
    """The node's weight cache directory (``shared.transport.node_cache``); None: none."""


def open_run_transport(ctx: RunContext, args: TransportArgs,
                       shared_by_threads: bool = False) -> Transport:
    """The run's transport for one service: its stream shards, its node's weight cache and
    its role's Redis user (where the run has role users); ``shared_by_threads``: a host's,
    its connections bounded (``RedisTransport``)."""
    return open_transport(ctx.transport, ctx.run_id, ctx.stream_shards, ctx.stream_urls,
                          args["weights_cache_dir"], role=args["role"],
                          auth_dir=ctx.redis_auth_dir or None,
                          shared_by_threads=shared_by_threads)


def build_selfplay(config: TrainConfig, ctx: RunContext, transport: Transport, index: int,
                   *, salt: int = 0,
                   evaluator: VersionedEvaluator | None = None) -> SelfPlayService:
    """Self-play worker ``w{index}``; ``evaluator`` (inference servers) or its own net."""
    return _selfplay_over(config, ctx, index, *_endpoints(ctx, transport), evaluator, salt)


def _endpoints(ctx: RunContext, transport: Transport) -> tuple[Any, Any, Any]:
    """A worker's sink, weights and pace on ``transport``; weights not signed by the run's
    learner are refused (ctx.weights_public_key)."""
    return (transport.samples(), transport.weights(verifier=verifier_for(ctx.weights_public_key)),
            transport.pace())


def _selfplay_over(config: TrainConfig, ctx: RunContext, index: int, samples: Any, weights: Any,
                   pace: Any, evaluator: VersionedEvaluator | None, salt: int = 0
                   ) -> SelfPlayService:
    return SelfPlayService(ctx, config.net, config.search, config.selfplay, samples, weights,
                           worker_id=f"w{index}", seed=seed_for(ctx.seed, index, salt),
                           evaluator=evaluator, pace=pace)


def _worker_over(config: TrainConfig, ctx: RunContext, index: int,
                 endpoints: tuple[Any, Any, Any], evaluator: VersionedEvaluator | None,
                 games: list | None) -> SelfPlayService | ReplayWorker:
    """Worker ``w{index}`` of a distributed run over its ``(sink, weights, pace)``: a
    ``ReplayWorker`` with ``selfplay.simulate_from`` (``games``: the recorded games,
    loaded once for a host's workers), else a self-play worker."""
    samples, weights, pace = endpoints
    if config.selfplay.simulate_from:
        return ReplayWorker(ctx, config.selfplay, samples, weights, worker_id=f"w{index}",
                            seed=seed_for(ctx.seed, index), games=games)
    return _selfplay_over(config, ctx, index, samples, weights, pace, evaluator)


def _distributed_worker(config: TrainConfig, ctx: RunContext, transport: Transport,
                        index: int, evaluator: VersionedEvaluator | None,
                        games: list | None) -> SelfPlayService | ReplayWorker:
    """``_worker_over`` the endpoints of ``transport``."""
    return _worker_over(config, ctx, index, _endpoints(ctx, transport), evaluator, games)


HOSTED_WORKER = f"{__name__}:hosted_worker"
"""The builder a process-hosted worker's child calls (``actors.process_worker``)."""


def hosted_worker(args: Mapping[str, Any], index: int, *, relay: Connection | None = None
                  ) -> SelfPlayService | ReplayWorker:
    """Worker ``w{index}`` built in its own process (``distributed.host_workers=process``)
    from plain data only: ``args`` holds ``config`` (``cfg.to_dict`` of the TrainConfig),
    ``ctx`` (``RunContext.to_dict``) and ``transport`` (``TransportArgs``). It runs its own
    net (no inference servers: their Ray handles do not reach a non-Ray process). With
    ``relay`` (the child's end of its host's relay pipe, ``actors/worker_relay.py``) its
    sink, weights and pace go through the host's transport and this process opens no
    connection; without, the same ``_distributed_worker`` as a thread worker's over a
    transport of its own."""
    config = cfg.from_dict(TrainConfig, args["config"], "config")
    ctx = RunContext.from_dict(args["ctx"])
    games = (load_games(config.selfplay.simulate_from) if config.selfplay.simulate_from
             else None)
    if relay is None:
        return _distributed_worker(config, ctx, open_run_transport(ctx, args["transport"]),
                                   index, None, games)
    # over the relay (the host's source verifies the weights' signatures: the blobs that
    # come through are the run's learner's)
    via = RelayTransport(relay, ctx.run_id)
    return _worker_over(config, ctx, index, (via.samples(), via.weights(), via.pace()), None,
                        games)


def build_selfplay_host(config: TrainConfig, ctx: RunContext, transport: TransportArgs,
                        host: int, count: int, evaluator: VersionedEvaluator | None = None,
                        first: int | None = None
                        ) -> SelfPlayService | ReplayWorker | WorkerHost:
    """Self-play actor ``host``: with ``distributed.workers_per_host`` K = 1 the one worker
    ``w{host}``, else a ``WorkerHost`` of workers ``w{first}`` .. (``count`` of them at the
    start; ``first`` is ``host*K``, or the controller's for a node host, K = 0), each with
    the host's one transport (opened with ``transport``), their metrics labelled
    ``worker="h{host}"``. Threads of this process sharing ``evaluator``, or a
    ``ProcessWorker`` each (a child process that builds it with ``hosted_worker``), as
    ``hosts_processes`` says."""
    per = config.distributed.workers_per_host
    first = host * per if first is None else first
    if hosts_processes(config, evaluator):
        if evaluator is not None:
            raise ValueError("distributed.host_workers=process runs each hosted worker's own "
                             "net in its process and cannot use inference servers: set "
                             "distributed.inference=local or host_workers=thread")
        plain = {"config": cfg.to_dict(config), "ctx": ctx.to_dict(),
                 "transport": dict(transport)}
        # one transport for the host, serving its children's data plane over their relay
        # pipes (actors/worker_relay.py): the children open no connection, and the host's
        # are bounded as a thread host's (its serving threads share it); the host closes
        # it after its last worker
        own = open_run_transport(ctx, transport, shared_by_threads=True)
        try:
            endpoints = HostEndpoints(
                own.samples(), own.weights(verifier=verifier_for(ctx.weights_public_key)),
                own.pace())
            return WorkerHost(lambda i: ProcessWorker(HOSTED_WORKER, plain, i,
                                                      serve=endpoints),
                              first, count, label=f"h{host}", on_close=own.close)
        except BaseException:
            own.close()
            raise
    games = (load_games(config.selfplay.simulate_from) if config.selfplay.simulate_from
             else None)
    if per == 1:
        return _distributed_worker(config, ctx, open_run_transport(ctx, transport), host,
                                   evaluator, games)
    # one transport for the host's workers: its connections to each server are a handful
    # (a thread's call at a time, one blocked read a room list), whatever the workers; the
    # host closes it after its last worker (an actor may outlive its host's run)
    shared = open_run_transport(ctx, transport, shared_by_threads=True)
    try:
        return WorkerHost(
            lambda i: _distributed_worker(config, ctx, shared, i, evaluator, games),
            first, count, label=f"h{host}", on_close=shared.close)
    except BaseException:
        shared.close()
        raise


def hosts_processes(config: TrainConfig, evaluator: VersionedEvaluator | None) -> bool:
    """Whether a self-play host runs its workers as child processes: ``host_workers``
    ``process``, or ``auto`` for workers that search with their own net (no inference
    servers, not replaying recorded games); never for one worker an actor (the actor is
    already its process)."""
    d = config.distributed
    if d.workers_per_host == 1:
        return False
    if d.host_workers == "auto":
        return evaluator is None and not config.selfplay.simulate_from
    return d.host_workers == "process"


def build_learner(config: TrainConfig, ctx: RunContext, transport: Transport,
                  resume: bool = False, **options: Any) -> LearnerService:
    """The run's learner (``resume``: from ``RUN_DIR/checkpoint.pt`` if it exists);
    ``options`` go to ``LearnerService`` (stream config, weights kept...)."""
    return LearnerService(ctx, config.net, config.learner, transport, resume, **options)


def build_learner_member(config: TrainConfig, ctx: RunContext,
                         transport: Callable[[], Transport], resume: bool, seat: GroupSeat
                         ) -> LearnerService | LearnerReplica:
    """One member of the run's learner group (``learner.replicas``): rank 0 is the
    ``LearnerService`` (leading a ``ReplicaGroup`` when there are several replicas), ranks
    1.. are ``LearnerReplica``s, which keep no replay window and open no transport."""
    c = config.learner
    if seat.rank == 0:
        group = (ReplicaGroup(c.replicas, seat.host, c.replica_timeout_s)
                 if c.replicas > 1 else None)
        # the controller ends the run at its limits, workers first (``ends_run``); a
        # learner started while the run's Redis is down waits for it (crashing would
        # count toward the crash-loop limit and fail the run over an outage)
        return build_learner(config, ctx, patiently(transport, "reach the run's Redis"),
                             resume, group=group, ends_run=False)
    if seat.address is None:
        raise ValueError(f"learner replica {seat.rank} needs rank 0's group address")
    # a replica keeps no replay window: rank 0 samples every step's batch for the group
    learner = Learner(dataclasses.replace(c, replay_capacity=1), ctx.game, config.net)
    return LearnerReplica(learner, seat.rank, c.replicas, seat.address, c.replica_timeout_s,
                          torch_threads=ctx.torch_threads, host=seat.host)


def build_rating_service(config: TrainConfig, ctx: RunContext, transport: Transport,
                    **options: Any) -> RatingService:
    """The run's evaluator; it appends each evaluation to the run record, and judges the
    averaged weights where the learner keeps them apart from self-play's."""
    options.setdefault("record", RunFiles(ctx.run_dir))
    if config.learner.separate_average:
        options.setdefault("weights_channel", AVERAGE_CHANNEL)
    return RatingService(ctx, config.net, config.search, config.evaluation, transport,
                            **options)
