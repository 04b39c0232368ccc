"""The in-memory twin of the Redis transport: the same seams, in one process.

The local run (``zeroforge train --local``) and unit tests use it; its sample stream is
in ``memory_stream.py``. It is not a mock: it keeps the Redis transport's promises
(consumer-group delivery with pending entries that come back to a restarted reader, acks,
trimming below the oldest unacknowledged entry, backpressure, rejection of bad entries by
reason, versioned weights with sha256 checks, announcements, a pace that expires, the
controller's saved state) and it carries the same bytes: games are stored as
``shared.samples`` entries, weights as weights blobs and the pace as ``shared.pace``
bytes, so the local run exercises the wire formats too.
The contract suite runs the same tests against both.

Thread-safe: one lock per run's data; readers and writers of one process may be on
different threads. The backlog bound is hard (checked and appended under the lock), and a
waiting ``append`` is woken by the ack or trim that makes room (a ``threading.Condition``,
the Redis room list's twin), with the same fallback check every ``room_check_interval_s``.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any, ClassVar

import msgpack

from zeroforge.shared.pace import PACE_TTL_S, Pace, encode_pace
from zeroforge.shared.transport.base import SampleStreamEndpoint, StateDict
from zeroforge.shared.transport.control_state import (
    ControlStateMalformed,
    SavedControlState,
    encode_control_state,
)
from zeroforge.shared.transport.fencing import MemoryFence
from zeroforge.shared.transport.memory_stream import MemorySampleStream, StreamData
from zeroforge.shared.transport.pace_signal import PaceDecoder, check_ttl
from zeroforge.shared.transport.results import EvalResultsStore, ResultsFormatError
from zeroforge.shared.transport.shards import ShardedSampleStream
from zeroforge.shared.transport.signing import WeightSigner, WeightVerifier
from zeroforge.shared.transport.stream import (
    StreamConfig,
    check_run_id,
)
from zeroforge.shared.transport.weight_store import (
    WEIGHT_CHANNELS,
    StaleVersionError,
    WeightInfo,
    check_channel,
    check_version,
    checked_signature,
    decoded_blob,
    publishable_blob,
    signature_of,
    signed_scope,
    verified_blob,
)

log = logging.getLogger(__name__)


class _WeightData:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.blobs: dict[int, tuple[bytes, WeightInfo]] = {}
        self.latest: int | None = None
        self.announced: list[int] = []


class MemoryWeightStore:
    """``WeightSink``: versioned weights blobs with sha256 checks and announcements, signed
    and verified as the Redis store's (``signer``, ``verifier``)."""

    def __init__(self, data: _WeightData, run_id: str, keep: int = 3,
                 fence: MemoryFence | None = None, epoch: int | None = None,
                 signer: WeightSigner | None = None,
                 verifier: WeightVerifier | None = None, channel: str = "") -> None:
        if keep < 1:
            raise ValueError(f"WeightStore: keep must be >= 1, got {keep}")
        self._data = data
        self._fence = fence or MemoryFence()
        self.epoch = epoch
        self.run_id = check_run_id(run_id)
        self.signed_as = signed_scope(run_id, channel)
        self.keep = keep
        self.signer = signer
        self.verifier = verifier
        self._fetched = 0

    def publish(self, weights: Any, version: int) -> str:
        version = check_version(version)
        blob = publishable_blob(weights)
        sha = hashlib.sha256(blob).hexdigest()
        d = self._data
        with d.cond:
            self._fence.check(f"publish of weights version {version}", self.epoch)
            if d.latest is not None and version <= d.latest:
                raise StaleVersionError(f"cannot publish weights version {version} of run "
                                        f"{self.run_id}: latest is already {d.latest}")
            d.blobs[version] = (blob, WeightInfo(version, sha, len(blob), time.time(),
                                                 signature_of(self.signer, self.signed_as,
                                                              version, sha)))
            d.latest = version
            for old in sorted(d.blobs)[:-self.keep]:
                del d.blobs[old]
            d.announced.append(version)
            d.cond.notify_all()
        return sha

    def latest_version(self) -> int | None:
        with self._data.cond:
            return self._data.latest

    def versions(self) -> list[int]:
        with self._data.cond:
            return sorted(self._data.blobs)

    def info(self, version: int) -> WeightInfo | None:
        with self._data.cond:
            got = self._data.blobs.get(version)
        return None if got is None else got[1]

    def close(self) -> None:
        """Nothing to let go."""

    def fetch_counts(self) -> dict[str, int]:
        return {"memory": self._fetched}

    def fetch(self, newer_than: int = -1) -> tuple[int, StateDict] | None:
        got = self.fetch_bytes(newer_than)
        return None if got is None else (got[0], decoded_blob(got[0], got[1], self.run_id))

    def fetch_bytes(self, newer_than: int = -1) -> tuple[int, bytes] | None:
        with self._data.cond:
            latest = self._data.latest
            if latest is None or latest <= newer_than:
                return None
            blob, info = self._data.blobs[latest]
        checked_signature(latest, info, self.signed_as, self.verifier)
        verified = verified_blob(latest, blob, info, self.run_id)
        self._fetched += 1
        return latest, verified

    def subscribe(self) -> MemorySubscription:
        return MemorySubscription(self._data)

    def wait_for_version(self, version: int, timeout_s: float) -> int | None:
        d = self._data
        with d.cond:
            d.cond.wait_for(lambda: d.latest is not None and d.latest >= version, timeout_s)
            return d.latest if d.latest is not None and d.latest >= version else None


class MemorySubscription:
    """Announcements of new versions since the subscription was made."""

    def __init__(self, data: _WeightData) -> None:
        self._data = data
        with data.cond:
            self._seen = len(data.announced)

    def poll(self, timeout_s: float = 0.0) -> int | None:
        d = self._data
        with d.cond:
            d.cond.wait_for(lambda: len(d.announced) > self._seen, timeout_s)
            fresh = d.announced[self._seen:]
            self._seen = len(d.announced)
        return max(fresh) if fresh else None

    def close(self) -> None:
        pass

    def __enter__(self) -> MemorySubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MemoryResultsStore:
    """``ResultsStore``: results kept as msgpack blobs, like the Redis store."""

    def __init__(self, run_id: str, history: int = 200) -> None:
        self.run_id = check_run_id(run_id)
        self.history_len = history
        self.key = f"memory:{run_id}:eval"
        self._lock = threading.Lock()
        self._history: list[bytes] = []
        self._best: bytes | None = None

    def put(self, results: Mapping[str, Any]) -> None:
        blob = msgpack.packb(dict(results), use_bin_type=True)
        with self._lock:
            self._history.insert(0, blob)
            del self._history[self.history_len:]

    def latest(self) -> dict | None:
        with self._lock:
            blob = self._history[0] if self._history else None
        return None if blob is None else EvalResultsStore._decode(blob, self.key)

    def history(self, limit: int | None = None) -> list[dict]:
        with self._lock:
            blobs = list(self._history if limit is None else self._history[:max(limit, 1)])
        return [EvalResultsStore._decode(b, self.key) for b in blobs]

    def put_best(self, version: int, weights: bytes) -> None:
        blob = msgpack.packb({"version": int(version), "weights": bytes(weights),
                              "sha256": hashlib.sha256(weights).hexdigest()},
                             use_bin_type=True)
        with self._lock:
            self._best = blob

    def best(self) -> tuple[int, bytes] | None:
        with self._lock:
            blob = self._best
        if blob is None:
            return None
        entry = EvalResultsStore._decode(blob, self.key)
        version, weights = entry.get("version"), entry.get("weights")
        if not isinstance(version, int) or not isinstance(weights, bytes):
            raise ResultsFormatError(f"{self.key}: not a best-weights record")
        if hashlib.sha256(weights).hexdigest() != entry.get("sha256"):
            raise ResultsFormatError(f"{self.key}: weights fail their sha256 check")
        return version, weights


class _PaceData:
    """One run's pace: its bytes and when they expire (monotonic seconds)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.blob: bytes | None = None
        self.expires = 0.0


class MemoryPaceSignal(PaceDecoder):
    """``PaceSignal`` in memory: the same bytes and expiry as the Redis key."""

    def __init__(self, data: _PaceData, run_id: str, ttl_s: float = PACE_TTL_S,
                 fence: MemoryFence | None = None, epoch: int | None = None) -> None:
        super().__init__()
        self._data = data
        self._fence = fence or MemoryFence()
        self.epoch = epoch
        self.run_id = check_run_id(run_id)
        self.ttl_s = check_ttl(ttl_s)
        self.key = f"memory:{run_id}:pace"

    def publish(self, pace: Pace) -> None:
        blob = encode_pace(pace)
        with self._data.lock:
            self._fence.check(f"pace write to {self.key}", self.epoch)
            self._data.blob = blob
            self._data.expires = time.monotonic() + self.ttl_s

    def read(self) -> Pace | None:
        with self._data.lock:
            blob = self._data.blob if time.monotonic() < self._data.expires else None
        return self._decoded(blob)

    def clear(self) -> None:
        with self._data.lock:
            self._fence.check(f"pace write to {self.key}", self.epoch)
            self._data.blob = None


class _ControlData:
    """One run's saved controller state (its bytes)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.blob: bytes | None = None
        self.fence = MemoryFence()


class MemoryControlStateStore(ControlStateMalformed):
    """``ControlStateStore`` in memory: the same bytes as the Redis key, the same fence."""

    def __init__(self, data: _ControlData, run_id: str) -> None:
        super().__init__(f"memory:{check_run_id(run_id)}:control")
        self._data = data
        self.epoch: int | None = None

    def claim(self) -> int:
        self.epoch = self._data.fence.take()
        return self.epoch

    def save(self, state: dict[str, Any]) -> None:
        blob = encode_control_state(state)
        with self._data.lock:
            self._data.fence.check(f"controller state save of {self.key}", self.epoch,
                                   "controller")
            self._data.blob = blob

    def load(self) -> SavedControlState | None:
        with self._data.lock:
            blob = self._data.blob
        return self.decoded(blob)

    def clear(self) -> None:
        with self._data.lock:
            self._data.fence.check(f"controller state clear of {self.key}", self.epoch,
                                   "controller")
            self._data.blob = None


class MemoryTransport:
    """The data plane of one run inside this process (see module docstring).

    Endpoints handed out by one MemoryTransport share its data, so a new
    ``samples()`` reader with a crashed one's consumer name gets its pending entries back,
    as from Redis."""

    _named: ClassVar[dict[tuple[str, str], MemoryTransport]] = {}
    _named_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, run_id: str = "local", stream_shards: int = 1) -> None:
        self.run_id = check_run_id(run_id)
        if stream_shards < 1:
            raise ValueError(f"stream_shards must be >= 1, got {stream_shards}")
        self.url = "memory://"
        self._streams = [StreamData() for _ in range(stream_shards)]
        self._weights = {channel: _WeightData() for channel in WEIGHT_CHANNELS}
        self._results = MemoryResultsStore(run_id)
        self._pace = _PaceData()
        self._control = _ControlData()
        self._fence = MemoryFence()
        self.epoch: int | None = None
        """The learner epoch this transport took last (``take_epoch``)."""

    @classmethod
    def named(cls, url: str, run_id: str, stream_shards: int = 1) -> MemoryTransport:
        """The process-wide transport for ``url`` (``memory://NAME``) and run."""
        with cls._named_lock:
            key = (url, run_id)
            if key not in cls._named:
                cls._named[key] = cls(run_id, stream_shards)
                cls._named[key].url = url
            return cls._named[key]

    def take_epoch(self) -> int:
        """Fence off every earlier learner of the run (``shared.transport.fencing``): the
        endpoints handed out from now on write under the new epoch."""
        self.epoch = self._fence.take()
        return self.epoch

    def samples(self, config: StreamConfig | None = None) -> SampleStreamEndpoint:
        streams = [MemorySampleStream(data, self.run_id, config, shard=k, fence=self._fence,
                                      epoch=self.epoch)
                   for k, data in enumerate(self._streams)]
        return streams[0] if len(streams) == 1 else ShardedSampleStream(streams)

    def weights(self, keep: int = 3, signer: WeightSigner | None = None,
                verifier: WeightVerifier | None = None, channel: str = ""
                ) -> MemoryWeightStore:
        return MemoryWeightStore(self._weights[check_channel(channel)], self.run_id, keep,
                                 fence=self._fence, epoch=self.epoch, signer=signer,
                                 verifier=verifier, channel=channel)

    def results(self) -> MemoryResultsStore:
        return self._results

    def pace(self, ttl_s: float = PACE_TTL_S) -> MemoryPaceSignal:
        return MemoryPaceSignal(self._pace, self.run_id, ttl_s, fence=self._fence,
                                epoch=self.epoch)

    def control_state(self) -> MemoryControlStateStore:
        return MemoryControlStateStore(self._control, self.run_id)

    def close(self) -> None:
        pass
