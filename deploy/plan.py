"""``zeroforge plan``: what a run of N self-play workers needs, and where it saturates first.

The capacity model (docs/scaling.md). From the run's config and a few per-unit figures it
computes the demand a run of ``workers`` puts on each shared part and how many units of
that part it takes:

- **sample intake**: ``workers x positions/s a worker x bytes a position``, against the
  bytes/s one Redis stream shard takes in (``distributed.stream_shards``);
- **learning**: positions/s x ``samples_per_insert`` / ``batch_size`` learner steps/s,
  against the steps/s of one learner replica (``learner.replicas``);
- **weights**: bytes out of the run's Redis per publish, ``nodes x blob`` with the per-node
  cache (``distributed.weights_per_node``) and ``workers x blob`` without, times the
  publishes/s (learner steps/s / ``publish_every_steps``), against the Redis server's
  network;
- **inference** (``distributed.inference=server``): evaluations/s, ``positions/s x
  simulations``, against one server's evaluations/s.

And the Redis servers' sizing for the run (``redis_sizing``: ``maxclients``, ``maxmemory``,
client output buffers, from ``shared/transport/sizing.py``), which the distributed driver
gives the servers it starts (``sizing_for_run``) and ``--k8s`` prints for
k8s/base/redis.conf.

Per-unit figures: bytes a position and the weights blob are computed from the game and net
on the spot; positions/s a worker and steps/s of a replica are measured on this machine
(``--measure``, a few seconds each) or given; the Redis shard, network and inference server
figures default to the measurements in docs/lab/scale.md and docs/lab/gpu.md and can be given too.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable

from zeroforge.deploy.config import TrainConfig
from zeroforge.shared.transport import (
    RedisSizing,
    RunShape,
    StreamConfig,
    conf_bytes,
    largest_sizing,
    size_servers,
)

SHARD_BYTES_PER_S = 59e6
"""Bytes/s one Redis stream takes in end to end (producer and consumer processes, 3,000
15x15 gomoku games, the slower of the two measured rows: docs/lab/scale.md, "Redis
transport")."""
REDIS_NETWORK_BYTES_PER_S = 1.25e9
"""Bytes/s out of one Redis server's host: a 10 Gbit/s link (give yours with
``--network-gbit``)."""
INFERENCE_EVALS_PER_S = 93.5e3
"""Evaluations/s of one GPU inference server (H200, ``resnet10x128``, Go 9x9, float32,
under real self-play load: docs/lab/gpu.md, "On a GPU under real self-play load")."""
WORKERS_PER_NODE = 8
"""Self-play workers a node where the nodes are not given."""
WEIGHTS_KEEP = 3
"""Weights versions a run's store keeps (``LearnerService``'s ``weights_keep``)."""
SIZING_GAMES = 16
"""Games played to measure a game's encoded bytes (two simulations each: quick)..."""
SIZING_BUDGET_S = 5.0
"""...or fewer (two at least) where they take longer than this (19x19 Go: seconds each)."""


@dataclasses.dataclass(frozen=True)
class UnitFigures:
    """What one unit of each part does (per-unit capacities and sizes)."""

    positions_per_s_per_worker: float
    """Self-play positions/s of one worker of this config."""
    bytes_per_position: float
    """Encoded sample-stream bytes of one position (the wire format)."""
    blob_bytes: int
    """Bytes of one published weights blob."""
    learner_steps_per_s: float
    """Steps/s of one learner replica at the config's batch size."""
    shard_bytes_per_s: float = SHARD_BYTES_PER_S
    """Bytes/s one stream shard takes in."""
    redis_network_bytes_per_s: float = REDIS_NETWORK_BYTES_PER_S
    """Bytes/s out of the run's Redis host."""
    inference_evals_per_s: float = INFERENCE_EVALS_PER_S
    """Evaluations/s of one inference server."""
    bytes_per_game: float = 0.0
    """Encoded sample-stream bytes of one game (the Redis sizing's streams); 0: unknown,
    no sizing."""
    measured_load: float | None = None
    """The machine's 1-minute load average as ``measure`` began, over its CPUs (None:
    figures given): timed on a busy machine, the figures are a busy machine's."""


@dataclasses.dataclass(frozen=True)
class Need:
    """The demand on one part and the units of it that demand takes."""

    part: str
    demand: float
    unit: str
    per_unit: float
    setting: str

    @property
    def units(self) -> int:
        return max(1, math.ceil(self.demand / self.per_unit)) if self.per_unit > 0 else 0

    @property
    def load(self) -> float:
        """Demand over one unit's capacity: how many times one unit over it is."""
        return self.demand / self.per_unit if self.per_unit > 0 else 0.0


def needs(config: TrainConfig, workers: int, nodes: int, figures: UnitFigures) -> list[Need]:
    """The demand of ``workers`` self-play workers on ``nodes`` nodes, part by part."""
    positions = workers * figures.positions_per_s_per_worker
    c = config.learner
    steps = positions * c.samples_per_insert / c.batch_size if c.samples_per_insert > 0 else 0
    copies = nodes if config.distributed.weights_per_node else workers
    publishes = steps / c.publish_every_steps
    out = [
        Need("sample intake", positions * figures.bytes_per_position, "B/s",
             figures.shard_bytes_per_s, "distributed.stream_shards"),
        Need("learner steps", steps, "steps/s", figures.learner_steps_per_s,
             "learner.replicas"),
        Need("weights out of Redis", publishes * copies * figures.blob_bytes, "B/s",
             figures.redis_network_bytes_per_s, "distributed.weights_per_node"),
    ]
    if config.distributed.inference == "server":
        out.append(Need("inference", positions * config.search.num_simulations, "evals/s",
                        figures.inference_evals_per_s, "distributed.inference_servers"))
    return out


def intake(config: TrainConfig, workers: int, figures: UnitFigures) -> tuple[float, str]:
    """Positions/s the run takes in with the config's stream shards and learner replicas,
    and what holds it there: ``self-play`` (all the workers offer), ``sample intake`` (the
    shards' bytes/s) or ``learner steps``. A learner-bound run takes in ``batch /
    (samples_per_insert x (1 - tolerance))`` positions a step, not ``batch /
    samples_per_insert``: its workers wait only once the ratio falls below the pace's floor
    (``learner.samples_per_insert_tolerance``), so the ratio sits at that floor
    (measured 20.2-22.3 positions a step for gomoku8's 21.3, docs/scaling.md)."""
    c = config.learner
    held = [(workers * figures.positions_per_s_per_worker, "self-play")]
    if figures.bytes_per_position > 0:
        held.append((config.distributed.stream_shards * figures.shard_bytes_per_s
                     / figures.bytes_per_position, "sample intake"))
    if c.samples_per_insert > 0:
        floor = c.samples_per_insert * (1 - c.samples_per_insert_tolerance)
        held.append((c.replicas * figures.learner_steps_per_s * c.batch_size / floor,
                     "learner steps"))
    return min(held, key=lambda h: h[0])  # a tie: the first (the workers offer no more)


def predict_simulation(workers: int, nodes: int, games_per_min: float,
                       positions_per_game: float, blob_bytes: int, poll_s: float,
                       publish_every_s: float, poll_bytes: float, info_bytes: float
                       ) -> dict[str, float]:
    """What ``benchmarks/scale_sim.py`` should measure for these settings: positions/s
    offered, and the run's Redis bytes out per publish: the blob once per node, each
    worker's two reads of the new version's record (``info_bytes`` each: the cache checks
    the file against it, the simulator reads it for the latency) and every worker's polls
    between two publishes (``poll_bytes`` each: the latest version)."""
    polls = workers * publish_every_s / poll_s
    return {"positions_per_s": workers * games_per_min / 60 * positions_per_game,
            "redis_bytes_per_publish": (nodes * blob_bytes + workers * 2 * info_bytes
                                        + polls * poll_bytes)}


def measure(config: TrainConfig, seconds: float = 6.0) -> UnitFigures:
    """The per-unit figures of ``config`` on this machine: one worker's positions/s (its
    own net, the config's search and precision, one thread) and one replica's steps/s."""
    import torch

    from zeroforge.actors.selfplay import SelfPlayWorker
    from zeroforge.learner.learner import Learner
    from zeroforge.shared.formats import weights_to_bytes
    from zeroforge.shared.games import make_game
    from zeroforge.shared.nets import InferenceConfig, build_net, make_evaluator

    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    torch.set_num_threads(1)
    game = make_game(config.game)
    net = build_net(config.net, game.spec)
    played = sample_games(config, 64)
    positions = sum(g.num_positions for g in played)
    evaluator = make_evaluator(net, config.selfplay.backend, config=InferenceConfig(
        device="cpu", precision=config.selfplay.precision))
    worker = SelfPlayWorker(game, evaluator, config.search, config.selfplay)
    worker.play_moves(1)  # warm-up (first calls compile and allocate)
    before, start = worker.stats.positions, time.perf_counter()
    while time.perf_counter() - start < seconds:
        worker.play_moves(1)
    per_worker = (worker.stats.positions - before) / (time.perf_counter() - start)
    learner = Learner(dataclasses.replace(config.learner, min_replay=1, device="cpu"),
                      config.game, config.net)
    while len(learner.replay) < config.learner.batch_size:
        learner.add(played)
    learner.step()  # warm-up
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or steps < 2:
        learner.step()
        steps += 1
    return UnitFigures(
        positions_per_s_per_worker=per_worker,
        bytes_per_position=encoded_bytes(played) / positions,
        bytes_per_game=encoded_bytes(played) / len(played),
        blob_bytes=len(weights_to_bytes(net)),
        learner_steps_per_s=steps / (time.perf_counter() - start), measured_load=load)


def sample_games(config: TrainConfig, count: int) -> list:
    """``count`` games of the config's game, played with two simulations of a uniform
    evaluator: fast, and encoded as large a position as any (policies are dense rows)."""
    from zeroforge.actors.config import SelfPlayConfig
    from zeroforge.actors.selfplay import SelfPlayWorker
    from zeroforge.shared.games import make_game
    from zeroforge.shared.search import SearchConfig, UniformEvaluator

    game = make_game(config.game)
    worker = SelfPlayWorker(game, UniformEvaluator(), SearchConfig(num_simulations=2),
                            SelfPlayConfig(games_in_parallel=min(count, 32)))
    return worker.play_games(count)[:count]


def encoded_bytes(games: list) -> int:
    from zeroforge.shared.samples import encode

    return sum(len(encode(g)) for g in games)


def default_nodes(workers: int) -> int:
    """Nodes of ``workers`` where none are given: ``WORKERS_PER_NODE`` a node."""
    return max(1, -(-workers // WORKERS_PER_NODE))


def sizing_games(config: TrainConfig, count: int = SIZING_GAMES,
                 budget_s: float = SIZING_BUDGET_S) -> list:
    """Up to ``count`` games played as ``sample_games`` plays them, two at a time, ending
    early (with two at least) once ``budget_s`` has passed: the same games every time
    where they are quick, a bounded wait where they are long."""
    from zeroforge.actors.config import SelfPlayConfig
    from zeroforge.actors.selfplay import SelfPlayWorker
    from zeroforge.shared.games import make_game
    from zeroforge.shared.search import SearchConfig, UniformEvaluator

    worker = SelfPlayWorker(make_game(config.game), UniformEvaluator(),
                            SearchConfig(num_simulations=2), SelfPlayConfig(games_in_parallel=2))
    games: list = []
    start = time.perf_counter()
    while len(games) < count and (len(games) < 2 or time.perf_counter() - start < budget_s):
        games.extend(worker.play_moves(1))
    return games[:count]


def game_figures(config: TrainConfig, count: int = SIZING_GAMES) -> tuple[float, float, int]:
    """(bytes a position, bytes a game, weights blob bytes) of ``config``: the mean of
    ``sizing_games``, the net built and serialised."""
    from zeroforge.shared.formats import weights_to_bytes
    from zeroforge.shared.games import make_game
    from zeroforge.shared.nets import build_net

    games = sizing_games(config, count)
    total = encoded_bytes(games)
    blob = len(weights_to_bytes(build_net(config.net, make_game(config.game).spec)))
    return total / sum(g.num_positions for g in games), total / len(games), blob


def redis_shape(config: TrainConfig, workers: int, nodes: int, bytes_per_game: float,
                blob_bytes: int) -> RunShape:
    """What a run of ``config`` with ``workers`` on ``nodes`` puts on its Redis servers
    (its self-play actors as ``expected_placement`` places them)."""
    d = config.distributed
    return RunShape(
        workers=workers, nodes=nodes, bytes_per_game=bytes_per_game, blob_bytes=blob_bytes,
        learner_replicas=config.learner.replicas, evaluator=d.evaluator,
        # auto: servers where the cluster has GPUs; counted, to be safe
        inference_servers=d.inference_servers if d.inference != "local" else 0,
        stream_shards=d.stream_shards,
        stream_servers=min(d.stream_shards, len(d.stream_redis) + d.stream_servers),
        max_backlog=StreamConfig().max_backlog, weights_keep=WEIGHTS_KEEP,
        weights_channels=2 if config.learner.separate_average else 1,
        weights_per_node=d.weights_per_node,
        workers_per_host=expected_placement(config).distributed.workers_per_host)


def expected_placement(config: TrainConfig) -> TrainConfig:
    """``config`` placed (``TrainConfig.placed``) as the driver expects the cluster: with
    GPUs where the learner books one. The driver sizes its Redis before it joins the
    cluster, so it cannot ask; a GPU cluster whose learner books none places server-fed
    workers an actor each on a Redis sized for node hosts (set ``workers_per_host`` 1)."""
    return config.placed(cluster_has_gpus=config.distributed.learner_gpus > 0)


def redis_sizing(config: TrainConfig, workers: int, nodes: int, bytes_per_game: float,
                 blob_bytes: int) -> dict[str, RedisSizing]:
    """``{"run": ..., "stream": ...}``: the run's Redis and each stream server, sized
    (``shared/transport/sizing.py``; no ``stream`` when the shards live in the run's)."""
    return size_servers(redis_shape(config, workers, nodes, bytes_per_game, blob_bytes))


def run_sizer(config: TrainConfig) -> Callable[[int], dict[str, RedisSizing]]:
    """The sizing of a distributed run of ``config``'s servers for a number of self-play
    workers (on ``default_nodes`` of them), the game's and net's bytes measured once, here,
    as the plan measures them (under a second for the presets)."""
    _, per_game, blob = game_figures(config)
    return lambda workers: redis_sizing(config, workers, default_nodes(workers), per_game,
                                        blob)


def sizing_for_run(config: TrainConfig) -> dict[str, RedisSizing]:
    """The sizing of the servers a distributed run of ``config`` starts: for its
    ``selfplay.workers`` (``run_sizer``; a scaled run's follow: ``deploy.redis_follow``)."""
    return run_sizer(config)(config.selfplay.workers)


SERVER_NAMES = {"run": "run's Redis", "stream": "each stream server"}


def sizing_lines(sizings: dict[str, RedisSizing]) -> list[str]:
    """The sizing as the plan's table: a row per server, then each figure's reasoning."""
    lines = ["Redis sizing (the redis.conf of the run's servers; docs/scaling.md, \"Redis "
             "sized by the plan\"):",
             f"{'server':<22} {'maxclients':>10} {'maxmemory':>10} {'normal buf':>10}  "
             f"pubsub buf"]
    for name, s in sizings.items():
        lines.append(f"{SERVER_NAMES[name]:<22} {s.maxclients:>10,} "
                     f"{conf_bytes(s.maxmemory_bytes):>10} "
                     f"{conf_bytes(s.normal_limit_bytes):>10}  "
                     f"{conf_bytes(s.pubsub_hard_bytes)} {conf_bytes(s.pubsub_soft_bytes)} "
                     f"{s.pubsub_soft_s} s")
    for name, s in sizings.items():
        lines += [f"  {SERVER_NAMES[name]}: {reason}" for reason in s.reasons]
    return lines


def k8s_conf(sizings: dict[str, RedisSizing], command: str) -> str:
    """The sizing block of k8s/base/redis.conf: one file for the StatefulSet's pods (the
    run's Redis and the stream servers), so each figure the largest of theirs."""
    sizing = largest_sizing(sizings)
    header = [
        f"# Sized by `{command}`,",
        "# for the run's size; print it again and paste it here when the size changes. One",
        "# file for the StatefulSet's pods: each figure the larger of the run's Redis's and a",
        "# stream server's (docs/scaling.md, \"Redis sized by the plan\"). noeviction: a full",
        "# Redis refuses writes, one line at the writer, and never drops games or weights.",
        f"# The pod's memory limit (redis.yaml) holds at least twice maxmemory, "
        f"{conf_bytes(2 * sizing.maxmemory_bytes)}:",
        "# the fork that rewrites the AOF may copy every page.",
    ]
    return "\n".join(header + sizing.conf_lines()) + "\n"


def plan_json(config: TrainConfig, workers: int, nodes: int, figures: UnitFigures,
              measured: bool) -> dict:
    """The plan as data: the figures, a row per part, the Redis sizing."""
    rows = needs(config, workers, nodes, figures)
    worst = max(rows, key=lambda n: n.load)
    out = {"game": config.game, "net": _net_name(config), "workers": workers, "nodes": nodes,
           "measured": measured, "figures": dataclasses.asdict(figures),
           "parts": [{"part": n.part, "demand": n.demand, "unit": n.unit,
                      "per_unit": n.per_unit, "units": n.units, "load": n.load,
                      "setting": n.setting} for n in rows],
           "saturates_first": worst.part if worst.load > 1 else None}
    positions, held_by = intake(config, workers, figures)
    out["intake"] = {"positions_per_s": positions, "held_by": held_by}
    if figures.bytes_per_game > 0:
        sizings = redis_sizing(config, workers, nodes, figures.bytes_per_game,
                               figures.blob_bytes)
        out["redis"] = {name: s.to_dict() for name, s in sizings.items()}
        out["redis_k8s"] = largest_sizing(sizings).conf_lines()
    return out


def report(config: TrainConfig, workers: int, nodes: int, figures: UnitFigures,
           measured: bool) -> str:
    """The plan as text: the per-unit figures, then a row per part, the first to
    saturate marked."""
    rows = needs(config, workers, nodes, figures)
    worst = max(rows, key=lambda n: n.load)
    how = "given"
    if measured:
        how = "measured here" + ("" if figures.measured_load is None else
                                 f", load {figures.measured_load:.2f} a CPU")
    lines = [
        f"zeroforge plan: {config.game}, net {_net_name(config)}, "
        f"{config.search.num_simulations} simulations"
        f"{' (Gumbel)' if config.search.gumbel else ''}, precision "
        f"{config.selfplay.precision}; {workers} workers on {nodes} nodes",
        f"per worker {figures.positions_per_s_per_worker:,.1f} positions/s ({how}); "
        f"{figures.bytes_per_position:,.0f} B a position; weights blob "
        f"{figures.blob_bytes / 1e6:,.2f} MB; one learner replica "
        f"{figures.learner_steps_per_s:,.2f} steps/s ({how})",
        "",
        f"{'part':<22} {'demand':>16} {'one unit':>16} {'units':>7}  setting",
    ]
    for n in rows:
        mark = "  <- saturates first" if n is worst and n.load > 1 else ""
        lines.append(f"{n.part:<22} {_amount(n.demand, n.unit):>16} "
                     f"{_amount(n.per_unit, n.unit):>16} {n.units:>7}  {n.setting}{mark}")
    if worst.load <= 1:
        lines.append("nothing saturates: one unit of every part holds this run")
    positions, held_by = intake(config, workers, figures)
    lines.append(f"the run takes in {positions:,.1f} positions/s (held by {held_by}, with "
                 f"{config.distributed.stream_shards} stream shard(s) and "
                 f"{config.learner.replicas} learner replica(s))")
    lines.append(_controller_line(config, redis_shape(config, workers, nodes,
                                                      figures.bytes_per_game,
                                                      figures.blob_bytes)))
    threads = _threaded_search_line(config)
    if threads:
        lines.append(threads)
    if figures.bytes_per_game > 0:
        lines += ["", *sizing_lines(redis_sizing(config, workers, nodes,
                                                 figures.bytes_per_game, figures.blob_bytes))]
    return "\n".join(lines)


def _controller_line(config: TrainConfig, run: RunShape) -> str:
    """The controller's calls a tick: one stats call and one liveness check a self-play
    actor (a host, or a worker at ``workers_per_host`` 1)."""
    per_host = run.workers_per_host
    hosts = run.workers if per_host == 1 else run.selfplay_hosts()
    shape = ("a node host a node" if per_host == 0 else
             "an actor a worker, as the default node hosts place workers fed by inference "
             "servers; distributed.host_workers=thread keeps node hosts"
             if per_host != config.distributed.workers_per_host else
             f"{per_host} worker(s) a host (distributed.workers_per_host)")
    interval = config.distributed.monitor_interval_s
    return (f"controller: {hosts:,} hosts ({shape}), a stats call and a liveness check a "
            f"host every {interval:g} s: {2 * hosts / interval:,.0f} Ray calls/s")


def _threaded_search_line(config: TrainConfig) -> str:
    """A warning for workers behind inference servers (``inference`` server, or auto with
    the learner on a GPU) left in hosts of several (``workers_per_host`` K > 1, or node
    hosts with ``host_workers`` thread): a host runs them as threads of one process, and
    their own search then shares one core (docs/lab/gpu.md, "Node hosts and the GPU job");
    "" otherwise (the default node hosts make them an actor each)."""
    d = expected_placement(config).distributed
    # (host_workers "process" with servers and hosts of several is refused by the config)
    if d.inference != "server" or d.workers_per_host == 1 or config.selfplay.simulate_from:
        return ""
    return ("threads: hosts run workers behind inference servers as threads of one "
            "process, whose searches share one core (370 against 1,198 positions/s for "
            "go9-gpu on an H200); with a core a worker, distributed.workers_per_host=1")


def _net_name(config: TrainConfig) -> str:
    n = config.net
    return f"resnet{n.blocks}x{n.channels}" if n.kind == "resnet" else f"convnet{n.trunk}"


def _amount(value: float, unit: str) -> str:
    if unit == "B/s":
        for scale, name in ((1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s")):
            if value >= scale:
                return f"{value / scale:,.1f} {name}"
        return f"{value:,.0f} B/s"
    return f"{value:,.1f} {unit}"
