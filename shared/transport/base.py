"""The transport seams: what services need from the data plane, as Protocols.

Two implementations hold each of them: Redis (``stream.py``, ``weight_store.py``,
``results.py``, ``pace_signal.py``; between processes and machines) and in memory
(``memory.py``; one process, the local run and unit tests). Both encode what they carry
in the same wire formats, and one contract suite
(``tests/contract/test_transport_contract.py``) runs against both. Services are written
against these Protocols only.

``Transport`` hands out the endpoints of one run; ``open_transport``
(``opener.py``) picks the implementation from a URL (``redis://``, ``rediss://`` or
``memory://``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from zeroforge.shared.pace import PACE_TTL_S

StateDict = dict[str, Any]
"""Parameter name -> tensor (torch stays out of this module)."""

if TYPE_CHECKING:
    from zeroforge.shared.pace import Pace
    from zeroforge.shared.samples import GameSamples
    from zeroforge.shared.transport.control_state import SavedControlState
    from zeroforge.shared.transport.signing import WeightSigner, WeightVerifier
    from zeroforge.shared.transport.stream import StreamConfig, StreamInfo
    from zeroforge.shared.transport.writer_counts import WriterCounts


@runtime_checkable
class SampleSink(Protocol):
    """Where a self-play worker puts finished games (acme's Adder)."""

    def append(self, games: list[GameSamples], timeout_s: float | None = None) -> list[str]:
        """Append one entry per game after waiting for room (backpressure); returns the
        entry ids in order. The bound is hard: the games go in only if the backlog then
        stays within ``max_backlog`` (a larger batch only into an empty stream), however
        many producers append at once. A waiting append is woken by the ack or trim that
        makes room, and checks by itself only every ``room_check_interval_s``. Writes
        nothing and raises ``BackpressureTimeout`` if no room came within ``timeout_s``,
        ``ValueError`` for a game over the entry size limit."""
        ...

    def wait_for_room(self, timeout_s: float | None = None, count: int = 1) -> None:
        """Return once an append of ``count`` games would not wait; ``BackpressureTimeout``
        after ``timeout_s`` (default: the stream's ``append_timeout_s``)."""
        ...

    @property
    def room_checks(self) -> int:
        """Times waiting appends checked for room again (woken, or at the fallback)."""
        ...

    def writer_counts(self) -> WriterCounts:
        """What the calling thread's appends (and waits for room) cost so far: seconds
        waited for room, games resent, games rerouted (``writer_counts``). Per thread: a
        host's worker threads share one sink, and each worker reports its own."""
        ...


@runtime_checkable
class SampleSource(Protocol):
    """Where the learner reads finished games from: at-least-once delivery with acks."""

    config: StreamConfig

    @property
    def rejected(self) -> Counter[str]:
        """Entries rejected while reading, by reason (never returned, acked at once)."""
        ...

    @property
    def skipped_duplicates(self) -> int:
        """Re-delivered entries at or below the ``skip_through`` cursor, acked unread."""
        ...

    def read(self, max_count: int = 64, block_ms: int = 0) -> list[tuple[str, GameSamples]]:
        """Up to ``max_count`` decoded games with entry ids, oldest first: this reader's
        unacknowledged entries from before a restart first, then new ones."""
        ...

    def ack(self, ids: list[str]) -> int:
        """Acknowledge entries (they are never delivered again); returns how many."""
        ...

    def skip_through(self, cursor: str | None,
                     already: Callable[[str], bool] | None = None) -> None:
        """Ack-and-skip re-delivered entries with id <= ``cursor`` (with ``already``, game
        id -> held: only those whose game it holds, or that carry no game id)."""
        ...

    def recover_pending(self) -> None:
        """Have the next ``read`` return this reader's pending entries it never handed out
        (delivered by the server, reply lost with a dropped connection) before new ones."""
        ...

    def info(self) -> StreamInfo:
        """Length (unacknowledged backlog), pending, lag and ids."""
        ...


class SampleStreamEndpoint(SampleSink, SampleSource, Protocol):
    """A sample stream endpoint as ``Transport.samples`` hands it out: both halves."""


class WeightAnnouncements(Protocol):
    """A subscription to new-version announcements (``WeightSink.subscribe``)."""

    def poll(self, timeout_s: float = 0.0) -> int | None:
        """The newest version announced since the last poll, waiting up to ``timeout_s``
        for the first announcement; None if there was none."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class WeightSource(Protocol):
    """Where workers, inference servers and the evaluator get weights (acme's
    VariableSource)."""

    def latest_version(self) -> int | None:
        """The newest published version, or None before the first publish."""
        ...

    def fetch(self, newer_than: int = -1) -> tuple[int, StateDict] | None:
        """``(version, state_dict)`` of the latest version if it is > ``newer_than``."""
        ...

    def close(self) -> None:
        """Let go of what this source holds beyond the transport's connection (a node
        cache's share of its directory); the source is not used afterwards."""
        ...

    def fetch_counts(self) -> dict[str, int]:
        """Fetches that returned weights so far, by where the blob came from: ``redis``,
        ``memory``, ``node_cache`` or ``redis_fallback`` (a node cache that failed)."""
        ...


@runtime_checkable
class WeightSink(WeightSource, Protocol):
    """The learner's side of the weight store."""

    def publish(self, weights: Any, version: int) -> str:
        """Store weights (a module, state dict or weights blob) as ``version``, which must
        exceed every earlier one (``StaleVersionError``); returns the blob's sha256."""
        ...

    def subscribe(self) -> WeightAnnouncements:
        """A subscription to new-version announcements (inference servers wait on it)."""
        ...


@runtime_checkable
class ResultsStore(Protocol):
    """The evaluator's results and its best weights so far."""

    def put(self, results: Mapping[str, Any]) -> None: ...

    def latest(self) -> dict | None: ...

    def history(self, limit: int | None = None) -> list[dict]: ...

    def put_best(self, version: int, weights: bytes) -> None: ...

    def best(self) -> tuple[int, bytes] | None: ...


@runtime_checkable
class ControlStateStore(Protocol):
    """The run controller's last state (``shared.transport.control_state``): the
    controller saves it every couple of seconds, a new driver for the run loads it to take
    over the run's live actors."""

    malformed: int
    """Loads that found something this code did not write (counted, read as absent)."""

    def claim(self) -> int:
        """Take the next controller epoch of the run and return it: from now on every
        ``save`` and ``clear`` through a store of an earlier claim raises ``FencedError``
        (a store never claimed is not checked). Raises ``TransportError`` when the store is
        unreachable."""
        ...

    def save(self, state: dict[str, Any]) -> None:
        """Replace the saved state with ``state`` (plain data), stamped with the time."""
        ...

    def load(self) -> SavedControlState | None:
        """The last saved state, or None if there is none (or it is not one this code
        wrote). Raises ``TransportError`` only when the store is unreachable."""
        ...

    def clear(self) -> None:
        """Remove the saved state (the run ended: nothing to take over)."""
        ...


@runtime_checkable
class PaceSignal(Protocol):
    """The learner's pace (``shared.pace``): the learner publishes it, self-play workers
    read it to decide whether to wait. One small record per run that expires ``ttl_s``
    seconds after its last publish, so a dead learner never leaves workers waiting."""

    ttl_s: float
    """Seconds a publish holds."""
    malformed: int
    """Reads that found something this code did not write (counted, read as absent)."""

    def publish(self, pace: Pace) -> None:
        """Replace the run's pace with ``pace``, to hold for ``ttl_s`` seconds."""
        ...

    def read(self) -> Pace | None:
        """The run's pace; None if none was published, it expired or was cleared, or the
        record is not one this code wrote (then ``malformed`` counts it and one line is
        logged). Raises ``TransportError`` only when the store is unreachable."""
        ...

    def clear(self) -> None:
        """Remove the pace (a learner that stops): readers see None at once."""
        ...


class Transport(Protocol):
    """The data plane of one run, as seen from one process."""

    run_id: str

    def take_epoch(self) -> int:
        """Take a new learner epoch, fencing off every earlier learner of the run: the
        endpoints handed out afterwards write only while no newer one is taken
        (``shared.transport.fencing``; a refused write raises ``FencedError``)."""
        ...

    def samples(self, config: StreamConfig | None = None) -> SampleStreamEndpoint:
        """A sample stream endpoint (both append and read; each side uses its half)."""
        ...

    def weights(self, keep: int = 3, signer: WeightSigner | None = None,
                verifier: WeightVerifier | None = None, channel: str = "") -> WeightSink:
        """The weight store; ``signer`` (the learner's key) signs each publish, ``verifier``
        (a reader's) refuses versions not signed by that key (``signing.py``);
        ``channel``: "" (self-play's) or ``weight_store.AVERAGE_CHANNEL`` (the averaged
        weights, when self-play plays the raw ones), each with its own versions."""
        ...

    def results(self) -> ResultsStore:
        """The evaluation results store."""
        ...

    def pace(self, ttl_s: float = PACE_TTL_S) -> PaceSignal:
        """The learner's pace signal; a publish through it holds ``ttl_s`` seconds."""
        ...

    def control_state(self) -> ControlStateStore:
        """Where the run's controller saves its state for a successor."""
        ...

    def close(self) -> None:
        """Release connections (idempotent)."""
        ...
