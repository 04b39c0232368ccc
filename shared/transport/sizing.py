"""Redis sized for the run: ``maxclients``, ``maxmemory`` and client output buffers.

Redis's defaults fit no run of size: ``maxclients`` 10,000 is a hard wall for a run of 10k
self-play workers that each hold a connection, there is no ``maxmemory`` (the kernel's OOM
killer is the bound) and a normal client's output buffer has no limit. ``size_servers``
computes all three for the run's Redis and for each stream server from the run's shape
(``RunShape``: its processes, its stream shards and their bound, the weights blob and the
versions kept), each figure with the reasoning in one line (``RedisSizing.reasons``).
``zeroforge plan`` prints them (deploy/plan.py, docs/scaling.md, "Redis sized by the
plan"), the bundled server writes them into its redis.conf (``RedisServerConfig.sizing``)
and k8s/base/redis.conf carries what the plan printed for the cluster's size.

The policy is always ``noeviction``: a full Redis refuses writes (``connection.RedisFull``,
one line) instead of silently dropping games or weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from zeroforge.shared.transport.redis_transport import HOST_CONNECTIONS

MB = 1 << 20
"""A megabyte as redis.conf counts it (``1mb`` = 1024 x 1024 bytes)."""


@dataclass(frozen=True)
class ProcessConnections:
    """The Redis connections one process of a kind holds."""

    run: int
    """Connections to the run's Redis."""
    stream: int
    """Connections to each stream server (a process connects to every one it is given)."""
    why: str
    """Where they come from, for the reasoning line."""
    per_shard: int = 0
    """More connections to a server for each stream shard it holds (a blocked read each)."""


CONNECTIONS_PER_PROCESS: dict[str, ProcessConnections] = {
    "self-play worker": ProcessConnections(
        1, 1, "one worker an actor: its own transport, one client a server, used by the "
              "worker's thread"),
    "self-play host": ProcessConnections(
        HOST_CONNECTIONS, HOST_CONNECTIONS,
        "a host's one transport, shared by its worker threads or relayed for its worker "
        "processes: calls at once, plus one blocked read a shard", per_shard=1),
    "learner": ProcessConnections(
        4, 4, "rank 0: its loop and its Ray call threads (max_concurrency 4)"),
    "learner replica": ProcessConnections(0, 0, "ranks 1..: no transport"),
    "evaluator": ProcessConnections(4, 1, "max_concurrency 4; one client a stream server"),
    "inference server": ProcessConnections(
        3, 0, "its commands, the weights pub/sub, its weights thread"),
    "controller": ProcessConnections(2, 0, "its saved state, read at start"),
    "driver and tools": ProcessConnections(
        8, 2, "the driver's checks, zeroforge status and top, the dashboard, redis-cli"),
}
"""Connections per process kind: THE table to change when a kind's connections change.
The counts of each kind come from ``RunShape.processes``."""

REDIS_DEFAULT_MAXCLIENTS = 10_000
"""Redis's own ``maxclients``: the floor (a lower cap saves nothing and would refuse a run
scaled up past its plan)."""
CLIENT_HEADROOM = 0.25
"""Clients above those expected: replaced actors whose old sockets linger (a partitioned
node's until TCP gives up), reconnects in flight, a modest scale-up."""
STREAM_ENTRY_OVERHEAD_BYTES = 256
"""Redis's bytes a stream entry beyond its data: its listpack header and node (a game is
above ``stream-node-max-bytes``, so a node of its own) and its pending-entries record."""
LEARNER_READ_GAMES = 256
"""Games in the learner's largest read of a shard (its drain, learner/service.py)."""
BASE_MEMORY_BYTES = 64 * MB
"""Redis's own memory and the run's small keys (pace, results, saved state, fences)."""
MEMORY_HEADROOM = 0.25
"""Over the sum: the allocator's rounding and fragmentation."""
MIN_NORMAL_LIMIT_BYTES = 32 * MB
"""The least hard limit of a normal client's output buffer (the run's other replies,
results and saved state, are far smaller)."""
PUBSUB_LIMIT = (32 * MB, 8 * MB, 60)
"""Pub/sub clients' (hard, soft, soft seconds): Redis's default. They only hear weights
announcements (a version number each); blobs come over their normal connection."""


@dataclass(frozen=True)
class RunShape:
    """What a run puts on its Redis servers: processes, streams, weights."""

    workers: int
    """Self-play workers."""
    nodes: int
    """Nodes the workers run on (with ``weights_per_node``: blob readers at once)."""
    bytes_per_game: float
    """Encoded bytes of one game in the sample stream."""
    blob_bytes: int
    """Bytes of one weights blob."""
    learner_replicas: int = 1
    """Learner replicas (rank 0 holds the connections)."""
    evaluator: bool = True
    """Whether the run has an evaluator."""
    inference_servers: int = 0
    """Inference servers."""
    stream_shards: int = 1
    """Sample stream shards."""
    stream_servers: int = 0
    """Redis servers of the shards (started or the cluster's own); 0: the run's Redis."""
    max_backlog: int = 2000
    """Unacknowledged games a shard holds before appends wait (``StreamConfig``)."""
    weights_keep: int = 3
    """Weights versions the store keeps."""
    weights_channels: int = 1
    """Weights channels the learner publishes on: 2 with its average kept apart from
    self-play's (``AVERAGE_CHANNEL``; read by the evaluator only)."""
    weights_per_node: bool = True
    """Weights read once per node (``distributed.weights_per_node``), not per worker."""
    learner_read_games: int = LEARNER_READ_GAMES
    """Games in the learner's largest read of a shard."""
    workers_per_host: int = 0
    """Self-play workers an actor (``distributed.workers_per_host``): 1, a process and its
    connections each; K > 1, hosts of K; 0, node hosts, one a node."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool):
                continue
            least = 1 if f.name in ("nodes", "learner_replicas", "stream_shards", "max_backlog",
                                    "weights_keep", "weights_channels",
                                    "learner_read_games") else 0
            if value < least:
                raise ValueError(f"RunShape.{f.name} must be >= {least}, got {value}")
        if self.stream_servers > self.stream_shards:
            raise ValueError(f"RunShape.stream_servers must be <= stream_shards "
                             f"({self.stream_shards}), got {self.stream_servers}")

    def shards_on(self, server: str) -> int:
        """Stream shards the ``run`` server holds, or the busiest ``stream`` server."""
        if server == "run":
            return 0 if self.stream_servers else self.stream_shards
        return -(-self.stream_shards // self.stream_servers) if self.stream_servers else 0

    def selfplay_hosts(self) -> int:
        """Self-play actors that host workers: a node each (node hosts, 0), ``workers / K``
        of K > 1; none at 1 (each worker is an actor of its own)."""
        per = self.workers_per_host
        return self.nodes if per == 0 else -(-self.workers // per) if per > 1 else 0

    def processes(self) -> dict[str, int]:
        """Processes of each kind of ``CONNECTIONS_PER_PROCESS``."""
        return {"self-play worker": self.workers if self.workers_per_host == 1 else 0,
                "self-play host": self.selfplay_hosts(), "learner": 1,
                "learner replica": self.learner_replicas - 1,
                "evaluator": int(self.evaluator), "inference server": self.inference_servers,
                "controller": 1, "driver and tools": 1}


@dataclass(frozen=True)
class RedisSizing:
    """The sizing directives of one redis-server (``directives``; ``conf_lines``)."""

    maxclients: int
    """Most clients connected at once (``maxclients``)."""
    maxmemory_bytes: int
    """Memory above which writes are refused (``maxmemory``; policy noeviction)."""
    normal_limit_bytes: int
    """Hard limit of a normal client's output buffer (0: none); no soft limit."""
    pubsub_hard_bytes: int = PUBSUB_LIMIT[0]
    """Hard limit of a pub/sub client's output buffer."""
    pubsub_soft_bytes: int = PUBSUB_LIMIT[1]
    """Soft limit of a pub/sub client's output buffer."""
    pubsub_soft_s: int = PUBSUB_LIMIT[2]
    """Seconds a pub/sub client may stay over its soft limit."""
    reasons: tuple[str, ...] = ()
    """One line per figure: how it was reached."""

    def __post_init__(self) -> None:
        for name in ("maxclients", "maxmemory_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"RedisSizing.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("normal_limit_bytes", "pubsub_hard_bytes", "pubsub_soft_bytes",
                     "pubsub_soft_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"RedisSizing.{name} must be >= 0, got {getattr(self, name)}")
        if self.pubsub_hard_bytes and self.pubsub_soft_bytes > self.pubsub_hard_bytes:
            raise ValueError(f"RedisSizing.pubsub_soft_bytes must be <= pubsub_hard_bytes "
                             f"({self.pubsub_hard_bytes}), got {self.pubsub_soft_bytes}")

    def directives(self) -> list[tuple[str, str]]:
        """(name, value) of each directive, as redis.conf and CONFIG SET take them,
        ``maxmemory-policy noeviction`` among them; the output-buffer limit once a class."""
        return [("maxclients", str(self.maxclients)),
                ("maxmemory", conf_bytes(self.maxmemory_bytes)),
                # never evict: a full Redis refuses writes (one line at the writer, which
                # holds its games and retries) rather than silently drop games or weights
                ("maxmemory-policy", "noeviction"),
                ("client-output-buffer-limit",
                 f"normal {conf_bytes(self.normal_limit_bytes)} 0 0"),
                ("client-output-buffer-limit",
                 f"pubsub {conf_bytes(self.pubsub_hard_bytes)} "
                 f"{conf_bytes(self.pubsub_soft_bytes)} {self.pubsub_soft_s}")]

    def conf_lines(self) -> list[str]:
        """The redis.conf lines of ``directives``."""
        return [f"{name} {value}" for name, value in self.directives()]

    def to_dict(self) -> dict[str, object]:
        return {"maxclients": self.maxclients, "maxmemory_bytes": self.maxmemory_bytes,
                "maxmemory_policy": "noeviction",
                "normal_limit_bytes": self.normal_limit_bytes,
                "pubsub_limit": [self.pubsub_hard_bytes, self.pubsub_soft_bytes,
                                 self.pubsub_soft_s],
                "conf": self.conf_lines(), "reasons": list(self.reasons)}


def conf_bytes(n: int) -> str:
    """``n`` bytes as redis.conf writes them: ``Nmb`` when whole megabytes."""
    return f"{n // MB}mb" if n and n % MB == 0 else str(n)


def _mb_up(n: float) -> int:
    return max(1, math.ceil(n / MB)) * MB


def _mb(n: float) -> str:
    return f"{n / MB:,.1f} MB" if n >= MB else f"{n / 1024:,.1f} kB"


def expected_connections(shape: RunShape, server: str) -> tuple[int, str]:
    """Connections expected at a server (``run`` or ``stream``) and the sum in words."""
    total, terms = 0, []
    for kind, count in shape.processes().items():
        conn = CONNECTIONS_PER_PROCESS[kind]
        each = getattr(conn, server) + conn.per_shard * shape.shards_on(server)
        if count and each:
            total += count * each
            terms.append(f"{kind} {count:,} x {each}")
    return total, " + ".join(terms) or "none"


def _maxclients(shape: RunShape, server: str) -> tuple[int, str]:
    expected, terms = expected_connections(shape, server)
    wanted = math.ceil(expected * (1 + CLIENT_HEADROOM))
    value = max(REDIS_DEFAULT_MAXCLIENTS, wanted)
    return value, (f"maxclients {value:,}: {expected:,} connections expected ({terms}) "
                   f"+ {CLIENT_HEADROOM:.0%} headroom = {wanted:,}; never below Redis's "
                   f"default {REDIS_DEFAULT_MAXCLIENTS:,}")


def _streams(shape: RunShape, shards: int) -> tuple[float, list[str]]:
    """Bytes of ``shards`` shards at their bound, and the term. The bound is hard (one
    script checks and appends, ``stream_room.py``): no producer appends past it."""
    if not shards:
        return 0.0, []
    per_game = shape.bytes_per_game + STREAM_ENTRY_OVERHEAD_BYTES
    bound = shards * shape.max_backlog * per_game
    return bound, [
        f"streams {_mb(bound)} ({shards} shard(s) x max_backlog {shape.max_backlog:,} x "
        f"{per_game:,.0f} B a game; the bound is hard)"]


def _learner_read(shape: RunShape) -> float:
    return shape.learner_read_games * (shape.bytes_per_game + STREAM_ENTRY_OVERHEAD_BYTES)


def _maxmemory(terms: list[tuple[float, str]]) -> tuple[int, str]:
    terms = [*terms, (BASE_MEMORY_BYTES, f"base {_mb(BASE_MEMORY_BYTES)} (Redis itself, the "
                                         f"run's small keys)")]
    total = sum(t for t, _ in terms)
    value = _mb_up(total * (1 + MEMORY_HEADROOM))
    return value, (f"maxmemory {conf_bytes(value)}: " + " + ".join(w for _, w in terms)
                   + f" = {_mb(total)}, + {MEMORY_HEADROOM:.0%} for the allocator; policy "
                   f"noeviction (a full Redis refuses writes, never drops games or weights)")


def _normal_limit(largest: float, what: str) -> tuple[int, str]:
    value = _mb_up(max(MIN_NORMAL_LIMIT_BYTES, 2 * largest))
    return value, (f"normal clients' output buffer {conf_bytes(value)} hard, no soft limit: "
                   f"twice the largest reply, {what} ({_mb(largest)}: one reply and the next "
                   f"behind it), at least {conf_bytes(MIN_NORMAL_LIMIT_BYTES)}")


def _pubsub_reason() -> str:
    hard, soft, secs = PUBSUB_LIMIT
    return (f"pub/sub clients' output buffer {conf_bytes(hard)} hard, {conf_bytes(soft)} for "
            f"{secs} s (Redis's default): they hear only weights announcements, a version "
            f"number each; blobs come over normal connections")


def run_server(shape: RunShape) -> RedisSizing:
    """The run's Redis: weights, the run's state and, without stream servers, the shards."""
    clients, clients_why = _maxclients(shape, "run")
    shards = 0 if shape.stream_servers else shape.stream_shards
    stream_bytes, stream_terms = _streams(shape, shards)
    readers = ((shape.nodes if shape.weights_per_node else shape.workers)
               + shape.inference_servers + int(shape.evaluator))
    who = "nodes" if shape.weights_per_node else "workers"
    blob = shape.blob_bytes
    terms: list[tuple[float, str]] = []
    if stream_terms:
        terms.append((stream_bytes, " + ".join(stream_terms)))
    channels = shape.weights_channels
    blobs = channels * (shape.weights_keep + 1) + 1
    kept = f"{shape.weights_keep} versions kept + 1 being published"
    if channels > 1:
        kept += f" on each of {channels} channels"
    terms += [(blobs * blob,
               f"weights {_mb(blobs * blob)} ({kept} + the evaluator's best, x {_mb(blob)})"),
              (readers * blob, f"replies in flight {_mb(readers * blob)} ({readers:,} readers "
                               f"of a new version at once: the {who}, inference servers and "
                               f"evaluator, a blob each)")]
    if shards:
        terms.append((_learner_read(shape),
                      f"the learner's read {_mb(_learner_read(shape))}"))
    memory, memory_why = _maxmemory(terms)
    largest, what = float(blob), "a weights blob"
    if shards and _learner_read(shape) > largest:
        largest, what = _learner_read(shape), f"the learner's read of {shape.learner_read_games}"
    normal, normal_why = _normal_limit(largest, what)
    return RedisSizing(clients, memory, normal,
                       reasons=(clients_why, memory_why, normal_why, _pubsub_reason()))


def stream_server(shape: RunShape) -> RedisSizing:
    """The busiest stream server: ``ceil(shards / servers)`` shards (shard K on server K mod
    N); every server gets this sizing."""
    if not shape.stream_servers:
        raise ValueError("RunShape.stream_servers is 0: the shards live in the run's Redis")
    clients, clients_why = _maxclients(shape, "stream")
    shards = -(-shape.stream_shards // shape.stream_servers)
    stream_bytes, stream_terms = _streams(shape, shards)
    read = _learner_read(shape)
    memory, memory_why = _maxmemory([
        (stream_bytes, " + ".join(stream_terms)),
        (read, f"the learner's read {_mb(read)} ({shape.learner_read_games} games)")])
    normal, normal_why = _normal_limit(read, f"the learner's read of "
                                             f"{shape.learner_read_games} games")
    return RedisSizing(clients, memory, normal,
                       reasons=(clients_why, memory_why, normal_why, _pubsub_reason()))


def size_servers(shape: RunShape) -> dict[str, RedisSizing]:
    """``{"run": ..., "stream": ...}`` (no ``stream`` without stream servers)."""
    out = {"run": run_server(shape)}
    if shape.stream_servers:
        out["stream"] = stream_server(shape)
    return out


def largest_sizing(sizings: dict[str, RedisSizing]) -> RedisSizing:
    """One sizing that holds for every server given: each figure the largest (one config
    for several servers, as k8s/base/redis.conf is for the StatefulSet's pods)."""
    values = list(sizings.values())
    return RedisSizing(
        maxclients=max(s.maxclients for s in values),
        maxmemory_bytes=max(s.maxmemory_bytes for s in values),
        normal_limit_bytes=max(s.normal_limit_bytes for s in values),
        pubsub_hard_bytes=max(s.pubsub_hard_bytes for s in values),
        pubsub_soft_bytes=max(s.pubsub_soft_bytes for s in values),
        pubsub_soft_s=max(s.pubsub_soft_s for s in values),
        reasons=tuple(f"{name}: {r}" for name, s in sizings.items() for r in s.reasons))
