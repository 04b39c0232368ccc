"""A process-hosted worker's data plane, through its host (``distributed.host_workers``).

A hosted worker in a child process of its own (``actors.process_worker``) would open a
transport of its own: a connection to the run's Redis and one to each stream-shard
server, for every worker, so a host's connections grew with its workers. Here the child
opens none: its worker's sink, weight source and pace are ``Relay*`` proxies that forward
each call over a pipe to the host process, which answers with the endpoints of ONE
transport shared by all of its workers (``HostEndpoints``). A host then holds a handful of
connections to each server, whatever its workers.

The wire: each request and each reply is one msgpack array, sent with ``send_bytes``
(nothing of ours is pickled across the boundary). Requests, ``[op, *args]``:

- ``["append", [game, ...], timeout_s]`` -> ``[ids, counts]``: the entry ids, and this
  worker's ``writer_counts`` after the append (``WriterCounts.to_wire``: its own, as the
  host serves each worker's pipe in a thread of its own and the sink counts per
  thread); each game as ``shared.samples.encode`` bytes, decoded (so checked) by the
  host before it appends
- ``["room", timeout_s, count]`` -> None (``wait_for_room``); ``["room_checks"]``
- ``["fetch", newer_than]`` -> None or ``[version, blob, counts]``: the blob as the store
  holds it, verified by the host's source (which has the run's verifier), and where it
  came from (``RelayWeights.fetch_counts``)
- ``["latest"]`` -> a version or None; ``["info", version]`` -> the version's publish
  record (a map of ``WeightInfo``'s fields) or None, for ``weights_delivery_seconds``
- ``["pace"]`` -> ``shared.pace.encode_pace`` bytes or None

Replies: ``["ok", value]``, or ``["err", kind, line, version, reason]`` raised in the child
as the host's error was: ``transport`` a ``TransportError`` with the same line (so
``append_held`` retries exactly as over a transport of its own), ``integrity`` a
``WeightsIntegrityError`` with its version and reason (a refused version is noted once),
``value`` a ``ValueError`` (a game over the size limit), anything else a ``RuntimeError``
(a fault of the host's, not an outage). A pipe that ends (the host is gone) is a
``TransportError`` in one line.

Threads: the child's worker thread calls its proxies (one call at a time: a lock); in the
host, one thread per hosted worker serves its pipe (``serve``). Those threads share the
host's endpoints as a thread host's workers share its transport: the transport bounds
its connections (``open_run_transport(shared_by_threads=True)``: a few calls at once, one
blocked read for room a shard), so each append keeps its own timeout and no append
waits behind another's wait for room. Weights fetches take turns (a lock), so a version
is fetched once and then handed out from the host's copy.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

import msgpack

from zeroforge.shared.pace import PACE_TTL_S, Pace, decode_pace, encode_pace
from zeroforge.shared.samples import GameSamples, decode, encode
from zeroforge.shared.transport import (
    PaceSignal,
    SampleSink,
    TransportError,
    WeightSource,
    WriterCounts,
)

if TYPE_CHECKING:
    from zeroforge.shared.formats import StateDict
    from zeroforge.shared.transport import WeightInfo

GONE = "worker relay: the host process is gone (its end of the pipe closed)"
"""The one line a relay call raises (a ``TransportError``) once the host is gone."""
POLL_S = 0.5
"""How often a serving thread looks whether its worker has ended, between requests."""
HOST_COPY = "host"
"""``fetch_counts``'s source for a blob the host held already, fetched for another of its
workers: one fetch from the store per version and host."""


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def _unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False)


# ------------------------------------------------------------------------------------------
# the host's side
# ------------------------------------------------------------------------------------------

class HostEndpoints:
    """The host's shared endpoints, answering its workers' requests: ``samples`` (a
    sink), ``weights`` (a source with ``fetch_bytes``, verifying as the run says) and
    ``pace``, all of the host's one transport. The host closes them (with its transport),
    never a worker."""

    def __init__(self, samples: SampleSink, weights: WeightSource, pace: PaceSignal) -> None:
        fetch_bytes = getattr(weights, "fetch_bytes", None)
        if fetch_bytes is None:
            raise TypeError(f"HostEndpoints: a {type(weights).__name__} has no fetch_bytes")
        self.samples, self.weights, self.pace = samples, weights, pace
        self._fetch_bytes: Callable[[int], tuple[int, bytes] | None] = fetch_bytes
        self._weights_lock = threading.Lock()
        self._held: tuple[int, bytes] | None = None
        """The newest blob fetched (verified), handed to the host's other workers as is:
        one copy of the net per host, not one fetch per worker."""

    def answer(self, request: bytes) -> bytes:
        """The reply to one request (see the module docstring); never raises."""
        try:
            op, *args = _unpack(request)
            return _pack(["ok", self._do(op, args)])
        except Exception as err:  # every error goes back to the worker that asked
            return _pack(_error_reply(err))

    def _do(self, op: str, args: list) -> Any:
        if op == "append":
            ids = self.samples.append([decode(blob) for blob in args[0]], args[1])
            return [ids, self.samples.writer_counts().to_wire()]
        if op == "room":
            return self.samples.wait_for_room(args[0], args[1])
        if op == "room_checks":
            return self.samples.room_checks
        if op == "fetch":
            with self._weights_lock:
                return self._fetch(int(args[0]))
        if op == "latest":
            return self.weights.latest_version()
        if op == "info":
            store = getattr(self.weights, "store", self.weights)  # a node cache's store
            info = store.info(int(args[0])) if hasattr(store, "info") else None
            return None if info is None else dataclasses.asdict(info)
        if op == "pace":
            pace = self.pace.read()
            return None if pace is None else encode_pace(pace)
        raise LookupError(f"worker relay: unknown request {op!r}")

    def _fetch(self, newer_than: int) -> list | None:
        latest = self.weights.latest_version()
        if latest is None or latest <= newer_than:
            return None
        if self._held is not None and self._held[0] == latest:
            return [latest, self._held[1], {HOST_COPY: 1}]
        before = self.weights.fetch_counts()
        got = self._fetch_bytes(newer_than)
        if got is None:
            return None
        self._held = got
        after = self.weights.fetch_counts()
        moved = {k: n - before.get(k, 0) for k, n in after.items() if n > before.get(k, 0)}
        return [got[0], got[1], moved]


def _error_reply(err: Exception) -> list:
    from zeroforge.shared.transport import WeightsIntegrityError

    line = " ".join(str(err).split()) or type(err).__name__
    if isinstance(err, WeightsIntegrityError):
        return ["err", "integrity", line, err.version, err.reason]
    if isinstance(err, TransportError):
        return ["err", "transport", line, -1, ""]
    if isinstance(err, ValueError):
        return ["err", "value", line, -1, ""]
    return ["err", "error", f"{type(err).__name__}: {line}", -1, ""]


def serve(conn: Connection, host: HostEndpoints, done: threading.Event) -> None:
    """Answer one worker's requests on ``conn`` until its end of the pipe closes (its
    process ended) or ``done`` is set; closes ``conn``."""
    try:
        while not done.is_set():
            if not conn.poll(POLL_S):
                continue
            try:
                request = conn.recv_bytes()
                conn.send_bytes(host.answer(request))
            except (EOFError, OSError):
                return
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------
# the worker's side
# ------------------------------------------------------------------------------------------

class RelayTransport:
    """The child's end of its relay pipe: the worker's endpoints (``samples``,
    ``weights``, ``pace``), each call a round trip to the host. ``run_id``: the run's,
    for the errors of a blob that does not decode."""

    def __init__(self, conn: Connection, run_id: str) -> None:
        self.run_id = run_id
        self._conn = conn
        self._lock = threading.Lock()
        self._gone = False

    def call(self, op: str, *args: Any) -> Any:
        """Send one request and wait for its reply; raises as the host's call did."""
        with self._lock:
            if self._gone:
                raise TransportError(GONE)
            try:
                self._conn.send_bytes(_pack([op, *args]))
                reply = _unpack(self._conn.recv_bytes())
            except (EOFError, OSError):
                self._gone = True
                raise TransportError(GONE) from None
        if reply[0] == "ok":
            return reply[1]
        _, kind, line, version, reason = reply
        if kind == "integrity":
            from zeroforge.shared.transport import WeightsIntegrityError

            raise WeightsIntegrityError(line, version, reason)
        if kind == "transport":
            raise TransportError(line)
        if kind == "value":
            raise ValueError(line)
        raise RuntimeError(f"worker relay: the host failed: {line}")

    def samples(self) -> RelaySink:
        return RelaySink(self)

    def weights(self) -> RelayWeights:
        return RelayWeights(self)

    def pace(self) -> RelayPace:
        return RelayPace(self)


class RelaySink:
    """A ``SampleSink`` appending through the host's sink."""

    def __init__(self, relay: RelayTransport) -> None:
        self._relay = relay
        self._counts = WriterCounts()

    def append(self, games: list[GameSamples], timeout_s: float | None = None) -> list[str]:
        if not games:
            return []
        ids, counts = self._relay.call("append", [encode(g) for g in games], timeout_s)
        self._counts = WriterCounts.from_wire(counts)
        return list(ids)

    def wait_for_room(self, timeout_s: float | None = None, count: int = 1) -> None:
        self._relay.call("room", timeout_s, count)

    @property
    def room_checks(self) -> int:
        """The host's sink's count (shared by its workers)."""
        return int(self._relay.call("room_checks"))

    def writer_counts(self) -> WriterCounts:
        """This worker's appends' counts, as the host's sink kept them for the thread
        serving this worker's pipe, brought back by the last append that succeeded (a
        failed append's wait shows with the next one: the counts are running totals)."""
        return self._counts


class RelayWeights:
    """A ``WeightSource`` fetching through the host's source, which verifies what it hands
    over (the run's key): this side only decodes, as ``WeightStore.fetch`` does.

    ``fetch_counts`` counts this worker's fetches by where the blob came from: the host's
    source's own counts that this worker's fetch moved (``redis``, ``node_cache``...), or
    ``host`` (``HOST_COPY``) when the host held the blob already, fetched for another of
    its workers. Summed over a host's workers (its merged snapshot), ``redis`` is then the
    host's fetches from Redis, once per version, not once per worker."""

    def __init__(self, relay: RelayTransport) -> None:
        self._relay = relay
        self._counts: Counter[str] = Counter()

    def latest_version(self) -> int | None:
        return self._relay.call("latest")

    def fetch(self, newer_than: int = -1) -> tuple[int, StateDict] | None:
        from zeroforge.shared.transport import decoded_blob

        got = self.fetch_bytes(newer_than)
        return None if got is None else (got[0], decoded_blob(got[0], got[1],
                                                               self._relay.run_id))

    def fetch_bytes(self, newer_than: int = -1) -> tuple[int, bytes] | None:
        """The newest version's verified blob if it is > ``newer_than``, undecoded."""
        got = self._relay.call("fetch", newer_than)
        if got is None:
            return None
        version, blob, counts = got
        self._counts.update(counts)
        return int(version), bytes(blob)

    def info(self, version: int) -> WeightInfo | None:
        """What the store recorded about ``version`` (``publish_age_s`` reads its time)."""
        from zeroforge.shared.transport import WeightInfo

        record = self._relay.call("info", version)
        return None if record is None else WeightInfo(**record)

    def fetch_counts(self) -> dict[str, int]:
        return dict(self._counts)

    def close(self) -> None:
        """Nothing to let go: the source (a node cache's share included) is the host's,
        which closes it once, with its transport, when its last worker has ended."""


class RelayPace:
    """A ``PaceSignal`` that reads the host's: a worker reads the pace, never writes it.
    ``malformed``: always 0 here; the host's reader counts (and logs) bad records."""

    ttl_s = PACE_TTL_S
    malformed = 0

    def __init__(self, relay: RelayTransport) -> None:
        self._relay = relay

    def read(self) -> Pace | None:
        blob = self._relay.call("pace")
        return None if blob is None else decode_pace(blob)

    def publish(self, pace: Pace) -> None:
        raise TypeError("a worker's relayed pace is read-only; the learner publishes it")

    def clear(self) -> None:
        raise TypeError("a worker's relayed pace is read-only; the learner clears it")
