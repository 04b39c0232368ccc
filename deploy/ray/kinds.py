"""The per-kind table of a run's actors (``KINDS``): for the learner, the inference
servers, the evaluator and the self-play workers, how many are wanted, their Ray options
(resources, placement), how their service is built, the stop order and what a clean end
or a crash means. The controller has no per-kind branches beyond it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zeroforge.deploy.config import DistributedConfig, TrainConfig
from zeroforge.shared.run_context import RunContext

if TYPE_CHECKING:
    from zeroforge.deploy.runtime.builder import TransportArgs
    from zeroforge.shared.transport import Transport


def _builders() -> Any:
    """``deploy.runtime.builder``, imported at the first build: it imports torch, which the
    CLI's use of the kinds (names, sizes, crash limits) never needs."""
    from zeroforge.deploy.runtime import builder

    return builder


def _transport_args(ctx: RunContext, role: str) -> TransportArgs:
    """How a service of this actor opens the run's transport, as plain data: ``role``'s
    Redis user (``shared.transport.acl``) where the run has role users, and its node's
    weight cache (one directory per Ray node, so namespaces of the multi-host bed keep
    theirs apart), resolved here, in the actor, where Ray knows the node."""
    cache = None
    if ctx.weights_cache:
        import ray

        from zeroforge.shared.transport import default_cache_root, node_cache_dir

        root = default_cache_root() if ctx.weights_cache == "auto" else ctx.weights_cache
        node = ray.get_runtime_context().get_node_id()[:16]
        cache = str(node_cache_dir(root, ctx.run_id, node))
    return {"role": role, "weights_cache_dir": cache}


def _transport(ctx: RunContext, role: str) -> Transport:
    """The run's transport in this actor: its stream shards, its node's weight cache and
    ``role``'s Redis user (``_transport_args``)."""
    return _builders().open_run_transport(ctx, _transport_args(ctx, role))


@dataclass(frozen=True)
class ActorKind:
    """How the controller treats one kind of actor."""

    name: str
    desired: Callable[[TrainConfig, str], int]
    """Actors wanted at start, from the config and the inference mode."""
    options: Callable[[TrainConfig], dict]
    """Ray actor options (resources, concurrency)."""
    build: Callable[..., Any] = lambda *a: None
    """(config, ctx, index, resume, remote_evaluator, seat, count, first) -> the service
    (ServiceHost kinds); ``seat`` is the actor's ``GroupSeat`` in a gang (rank 0
    otherwise); ``count``: the workers it hosts at its start (``per_actor``); ``first``:
    the index of a node host's first worker (None otherwise)."""
    per_actor: Callable[[TrainConfig], int] = lambda c: 1
    """Units of ``desired`` one actor holds at most (self-play workers per host); 0: as
    many as one node's free CPUs fit when the actor is made (node hosts)."""
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
    gang: bool = False
    """The actors form one group (the learner's data-parallel replicas): created together,
    rank 0 first; the crash of one kills the others and the group is formed anew from the
    checkpoint (one crash counted); a change of the count stops the whole group cleanly
    (final checkpoint) and forms a new one of the new size."""
    replica_options: Callable[[TrainConfig], dict] | None = None
    """Ray options of a gang's ranks 1.. (None: ``options``)."""


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
        options["resources"] = {**options.get("resources", {}), d.run_dir_resource: 1.0}
    return options


def _learner_options(d: DistributedConfig) -> dict:
    """A learner replica's Ray options (every rank): its CPUs and GPUs, its custom
    resource and SPREAD placement when asked for."""
    options: dict[str, Any] = {"num_cpus": d.learner_cpus, "num_gpus": d.learner_gpus,
                               "max_concurrency": 4}
    if d.learner_resource:
        options["resources"] = {d.learner_resource: 1.0}
    if d.learner_spread:
        options["scheduling_strategy"] = "SPREAD"
    return options


KINDS: dict[str, ActorKind] = {k.name: k for k in (
    ActorKind(
        "learner", desired=lambda c, inf: c.learner.replicas,
        # rank 0 writes the run directory; the other replicas write nothing, so they may
        # run on any node with the CPUs/GPUs
        options=lambda c: _run_dir_options(c.distributed, _learner_options(c.distributed)),
        replica_options=lambda c: _learner_options(c.distributed),
        build=lambda c, ctx, i, resume, ev, seat, n, first: _builders().build_learner_member(
            c, ctx, lambda: _transport(ctx, "learner"), resume, seat),
        stop_phase=1, clean_end_ends_run=True, counters_survive_crash=False, max_crashes=3,
        gang=True),
    ActorKind(
        "inference", desired=lambda c, inf: c.distributed.inference_servers
        if inf == "server" else 0,
        options=lambda c: {}, stop_phase=2, is_server=True),
    ActorKind(
        "evaluator", desired=lambda c, inf: 1 if c.distributed.evaluator else 0,
        options=lambda c: _run_dir_options(c.distributed, {
            "num_cpus": c.distributed.evaluator_cpus, "max_concurrency": 4}),
        build=lambda c, ctx, i, resume, ev, seat, n, first: _builders().build_rating_service(
            c, ctx, _transport(ctx, "evaluator"))),
    ActorKind(
        "selfplay", desired=lambda c, inf: c.selfplay.workers,
        options=lambda c: _worker_options(c.distributed),
        per_actor=lambda c: c.distributed.workers_per_host,
        build=lambda c, ctx, i, resume, ev, seat, n, first: _builders().build_selfplay_host(
            c, ctx, _transport_args(ctx, "worker"), i, n, evaluator=ev, first=first)),
)}
"""Per-kind behaviour, in start order (learner first: it publishes the first weights)."""


def actors_wanted(config: TrainConfig, name: str, desired: int) -> int:
    """Actors of kind ``name`` that hold ``desired`` units (workers) between them (node
    hosts: counted as one a unit, their most)."""
    per = KINDS[name].per_actor(config) or 1
    return -(-desired // per)


def actor_sizes(config: TrainConfig, name: str, desired: int) -> list[int]:
    """Units per actor, oldest actor first: full ones, then the remainder in the newest
    (``[1] * desired`` when an actor holds one). Not for node hosts (``node_hosts``)."""
    per = KINDS[name].per_actor(config)
    full, rest = divmod(desired, per)
    return [per] * full + ([rest] if rest else [])
