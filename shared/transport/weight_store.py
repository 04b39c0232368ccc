"""The weight store: the learner publishes versioned weights, inference servers fetch them.

Keys of a run (the braces make the run id a Redis Cluster hash tag, so all of them live
on one node and one Lua script may touch them all):

- ``zf:{RUN}:weights:{V}``: the ``weight_blob.weights_to_bytes`` blob of version V
- ``zf:{RUN}:weights:{V}:meta``: hash of version, sha256, size (bytes), time (unix s)
  and, from a learner that signs, sig (hex Ed25519 signature: ``signing.py``)
- ``zf:{RUN}:weights:latest``: the newest version; ``zf:{RUN}:weights:versions``: a
  sorted set of the versions kept (the last ``keep``; older blobs are deleted)
- channel ``zf:{RUN}:weights``: each new version number is PUBLISHed on it

A run may have a second set of these, the ``average`` channel (``AVERAGE_CHANNEL``): the
same keys under ``zf:{RUN}:weights:average:`` and the pub/sub channel
``zf:{RUN}:weights:average``. The learner publishes its averaged weights there when
self-play plays the raw ones (``learner.average_selfplay`` false); the evaluator reads them.
Its signatures bind the channel, so a version signed for one channel is refused on the
other.

A publish is one atomic script (version check, install, prune, announce), so readers
never see a ``latest`` whose blob is missing, and versions only ever go up. A fetch checks
the blob against the sha256 recorded at publish time and refuses a mismatch; a store with
a verifier first checks that the learner's key signed that sha256 (run, version and sha
bound together) and refuses a version signed by another key or not at all.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import secrets
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any, cast

import redis
from torch import nn

from zeroforge.shared.formats import StateDict, weights_from_bytes, weights_to_bytes
from zeroforge.shared.transport.connection import TransportError, redis_errors
from zeroforge.shared.transport.fencing import epoch_key, fence_check, fenced_reply
from zeroforge.shared.transport.signing import WeightSigner, WeightVerifier
from zeroforge.shared.transport.stream import check_run_id

log = logging.getLogger(__name__)

# KEYS: staging, blob, meta, latest, versions, the learner epoch. ARGV: version, sha256,
# size, time, keep, channel, key prefix, the publisher's epoch ('' without one), the
# signature ('' from a learner that does not sign). The blob
# arrives in a staging key set just before (in the same pipeline) rather than as an
# argument, so a large net is not copied into Lua's memory.
_PUBLISH_SCRIPT = fence_check(6, 8) + """
local version = tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[4]) or '-1')
if version <= current then
  redis.call('DEL', KEYS[1])
  return redis.error_reply('STALE ' .. current)
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('NOSTAGING staging key expired before publish')
end
redis.call('RENAME', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[3], 'version', ARGV[1], 'sha256', ARGV[2], 'size', ARGV[3],
           'time', ARGV[4])
if ARGV[9] ~= '' then redis.call('HSET', KEYS[3], 'sig', ARGV[9]) end
redis.call('SET', KEYS[4], ARGV[1])
redis.call('ZADD', KEYS[5], version, ARGV[1])
local keep = tonumber(ARGV[5])
local old = redis.call('ZRANGE', KEYS[5], 0, -(keep + 1))
for _, v in ipairs(old) do
  redis.call('DEL', ARGV[7] .. v, ARGV[7] .. v .. ':meta')
end
if #old > 0 then redis.call('ZREMRANGEBYRANK', KEYS[5], 0, -(keep + 1)) end
redis.call('PUBLISH', ARGV[6], ARGV[1])
return #old
"""


AVERAGE_CHANNEL = "average"
"""The channel of a run's averaged weights when self-play plays the raw ones."""
WEIGHT_CHANNELS = ("", AVERAGE_CHANNEL)
"""The channels a run's weights may go on ("": the default one, self-play's)."""


def check_channel(channel: str) -> str:
    if channel not in WEIGHT_CHANNELS:
        raise ValueError(f"weights channel must be one of {WEIGHT_CHANNELS}, got {channel!r}")
    return channel


def signed_scope(run_id: str, channel: str) -> str:
    """What a signature binds besides the version and the sha256: the run id, and the
    channel for any but the default one (a run id never holds ':'), so a version signed
    for one channel does not verify on the other."""
    return f"{run_id}:{check_channel(channel)}" if channel else run_id


class StaleVersionError(ValueError):
    """``publish`` of a version not above the latest one: versions only go up."""


class WeightsIntegrityError(TransportError):
    """A stored blob does not match its recorded sha256 or does not parse; not applied."""

    def __init__(self, message: str, version: int = -1, reason: str = "corrupt") -> None:
        super().__init__(message)
        self.version = version
        """The version refused (-1: not known)."""
        self.reason = reason
        """``weights_rejected_total``'s reason: ``corrupt``, ``unsigned`` or
        ``bad_signature``."""


class WeightsSignatureError(WeightsIntegrityError):
    """A version not signed by the run's learner (signed by another key, or unsigned)."""


@dataclass(frozen=True)
class WeightInfo:
    """What ``publish`` recorded about one version."""

    version: int
    """The version number (the learner's count of publishes)."""
    sha256: str
    """Hex sha256 of the stored blob."""
    size: int
    """Blob size in bytes."""
    time: float
    """Unix time of the publish."""
    signature: str = ""
    """Hex Ed25519 signature of (run, version, sha256) by the learner; "" if unsigned."""


class WeightStore:
    """Versioned weights of one run in Redis (see the module docstring for the keys)."""

    def __init__(self, client: redis.Redis, run_id: str, keep: int = 3,
                 staging_ttl_s: float = 120.0, epoch: int | None = None,
                 signer: WeightSigner | None = None,
                 verifier: WeightVerifier | None = None, channel: str = "") -> None:
        """``epoch``: the publishing learner's (``fencing.take_epoch``): a publish then
        fails with ``FencedError`` once a newer learner has taken a higher one.
        ``signer``: the learner's key, which signs each publish; ``verifier``: a reader's
        check of those signatures (``signing.py``), refusing unsigned versions too.
        ``channel``: "" or ``AVERAGE_CHANNEL`` (the module docstring)."""
        if keep < 1:
            raise ValueError(f"WeightStore: keep must be >= 1, got {keep}")
        self.redis = client
        self.run_id = check_run_id(run_id)
        self.keep = keep
        """Versions kept; older blobs are deleted on publish."""
        self.staging_ttl_s = staging_ttl_s
        """Lifetime of a blob uploaded but not (yet) installed, e.g. by a crashed publisher."""
        base = f"zf:{{{run_id}}}:weights"
        self.channel = f"{base}:{channel}" if check_channel(channel) else base
        """The pub/sub channel new versions are announced on."""
        self.prefix = f"{self.channel}:"
        self.signed_as = signed_scope(run_id, channel)
        """The scope its signatures bind (``signed_scope``)."""
        self._publish = client.register_script(_PUBLISH_SCRIPT)
        self.epoch = epoch
        self.signer = signer
        self.verifier = verifier
        self._fetched = 0

    def key(self, version: int) -> str:
        return f"{self.prefix}{version}"

    # --- learner side --------------------------------------------------------------------
    def publish(self, weights: nn.Module | StateDict | bytes, version: int) -> str:
        """Store ``weights`` as ``version`` (> every earlier one), announce it, prune old
        versions; returns the blob's sha256. Raises StaleVersionError for an old version
        and ValueError for bytes that are not a weights blob."""
        version = check_version(version)
        blob = publishable_blob(weights)
        sha = hashlib.sha256(blob).hexdigest()
        staging = f"{self.prefix}staging:{secrets.token_hex(8)}"
        with redis_errors(self.redis):
            pipe = self.redis.pipeline(transaction=False)
            pipe.set(staging, blob, px=int(self.staging_ttl_s * 1000))
            self._publish(
                keys=[staging, self.key(version), f"{self.key(version)}:meta",
                      f"{self.prefix}latest", f"{self.prefix}versions",
                      epoch_key(self.run_id)],
                args=[version, sha, len(blob), f"{time.time():.6f}", self.keep,
                      self.channel, self.prefix, "" if self.epoch is None else self.epoch,
                      signature_of(self.signer, self.signed_as, version, sha)],
                client=pipe)
            staged, result = pipe.execute(raise_on_error=False)
            if isinstance(staged, redis.ResponseError):
                raise staged  # OOM (a full Redis), MISCONF: one line (redis_errors)
        if isinstance(result, redis.ResponseError):
            fenced = fenced_reply(result, f"publish of weights version {version}", self.epoch)
            if fenced:
                with contextlib.suppress(redis.RedisError):
                    self.redis.delete(staging)
                raise fenced
            text = str(result)
            if text.startswith("STALE"):
                raise StaleVersionError(f"cannot publish weights version {version} of run "
                                        f"{self.run_id}: latest is already {text.split()[1]}")
            raise TransportError(f"publishing weights version {version} failed: {text}")
        return sha

    # --- reader side ---------------------------------------------------------------------
    def latest_version(self) -> int | None:
        """The newest published version, or None before the first publish."""
        with redis_errors(self.redis):
            value = self.redis.get(f"{self.prefix}latest")
        return None if value is None else int(value)

    def versions(self) -> list[int]:
        """The versions still stored, oldest first."""
        with redis_errors(self.redis):
            # Members only (no scores), as bytes: clients have decode_responses=False.
            members = cast("list[bytes]", self.redis.zrange(f"{self.prefix}versions", 0, -1))
            return [int(v) for v in members]

    def info(self, version: int) -> WeightInfo | None:
        """What was recorded about ``version``, or None if it is not stored."""
        with redis_errors(self.redis):
            # bytes keys and values: clients have decode_responses=False.
            meta = cast("dict[bytes, bytes]", self.redis.hgetall(f"{self.key(version)}:meta"))
        return _info(meta) if meta else None

    def signed_info(self, version: int) -> WeightInfo | None:
        """``info`` of ``version`` once its signature verifies (with a verifier; else as
        recorded): WeightsSignatureError if it does not."""
        info = self.info(version)
        return None if info is None else checked_signature(version, info, self.signed_as,
                                                           self.verifier)

    def fetch(self, newer_than: int = -1) -> tuple[int, StateDict] | None:
        """``(version, state_dict)`` of the latest version if it is > ``newer_than``, else
        None. Raises WeightsIntegrityError if the blob fails its sha256 check, and its
        subclass WeightsSignatureError (before reading the blob) if a verifier refuses
        the version's signature."""
        got = self.fetch_bytes(newer_than)
        return None if got is None else (got[0], decoded_blob(got[0], got[1], self.run_id))

    def fetch_bytes(self, newer_than: int = -1) -> tuple[int, bytes] | None:
        """Like ``fetch`` but returns the verified blob undecoded."""
        with redis_errors(self.redis):
            # A version can be pruned between reading `latest` and its blob when publishes
            # race ahead by `keep`; then the newer latest is read again.
            for _ in range(5):
                latest = self.latest_version()
                if latest is None or latest <= newer_than:
                    return None
                if self.verifier is not None:
                    got = self._signed_fetch(latest)
                    if got is None:
                        continue
                    self._fetched += 1
                    return latest, got
                pipe = self.redis.pipeline(transaction=False)
                pipe.get(self.key(latest))
                pipe.hgetall(f"{self.key(latest)}:meta")
                blob, meta = pipe.execute()
                if blob is not None and meta:
                    verified = self._verified(latest, blob, _info(meta))
                    self._fetched += 1
                    return latest, verified
        raise TransportError(f"weights of run {self.run_id} changed under five fetches in a "
                             f"row; publishing faster than fetching?")

    def close(self) -> None:
        """Nothing to let go: the connection belongs to the transport."""

    def fetch_counts(self) -> dict[str, int]:
        return {"redis": self._fetched}

    def _verified(self, version: int, blob: bytes, info: WeightInfo) -> bytes:
        return verified_blob(version, blob, info, self.run_id)

    def _signed_fetch(self, version: int) -> bytes | None:
        """The blob of ``version`` checked against its signed record; None if it was
        pruned meanwhile. The record is verified before the blob is read, so a refused
        version costs a reader polling it a few hundred bytes, not the blob each time."""
        info = self.signed_info(version)
        if info is None:
            return None
        blob = self.redis.get(self.key(version))
        # a blob replaced after the record was read fails the signed sha256: refused too
        return None if blob is None else self._verified(version, cast("bytes", blob), info)

    # --- notifications -------------------------------------------------------------------
    def subscribe(self) -> WeightSubscription:
        """A subscription to new-version announcements (use as a context manager)."""
        return WeightSubscription(self)

    def wait_for_version(self, version: int, timeout_s: float) -> int | None:
        """Block until a version >= ``version`` is published; returns the latest version,
        or None if none arrived within ``timeout_s``."""
        with self.subscribe() as sub:
            # Subscribed first, then checked: a publish in between is not missed.
            latest = self.latest_version()
            deadline = time.monotonic() + timeout_s
            while latest is None or latest < version:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                announced = sub.poll(left)
                if announced is not None:
                    latest = max(announced, latest if latest is not None else -1)
            return latest


class WeightSubscription:
    """Announcements of new weight versions of one run, over Redis pub/sub."""

    def __init__(self, store: WeightStore) -> None:
        self.store = store
        self._pubsub = store.redis.pubsub(ignore_subscribe_messages=True)
        with redis_errors(store.redis):
            self._pubsub.subscribe(store.channel)

    def poll(self, timeout_s: float = 0.0) -> int | None:
        """The newest version announced since the last poll, waiting up to ``timeout_s``
        for the first announcement; None if there was none."""
        newest: int | None = None
        deadline = time.monotonic() + timeout_s
        with redis_errors(self.store.redis):
            while True:
                left = max(deadline - time.monotonic(), 0.0)
                # Wait only while nothing has arrived; then just drain what is queued.
                msg = self._pubsub.get_message(timeout=left if newest is None else 0.0)
                if msg is None:
                    if newest is not None or left <= 0:
                        return newest
                    continue
                if msg.get("type") == "message":
                    try:
                        version = int(msg["data"])
                    except (TypeError, ValueError):
                        continue  # not one of ours; announcements are plain integers
                    newest = version if newest is None else max(newest, version)

    def close(self) -> None:
        self._pubsub.close()

    def __enter__(self) -> WeightSubscription:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def publishable_blob(weights: nn.Module | StateDict | bytes) -> bytes:
    """The blob a store publishes for ``weights``; ready bytes are checked to load first
    (refuse to announce something nobody can load: ValueError)."""
    if isinstance(weights, bytes | bytearray | memoryview):
        blob = bytes(weights)
        try:
            weights_from_bytes(blob)
        except ValueError as err:
            raise ValueError(f"publish: not a weights blob: {err}") from None
        return blob
    return weights_to_bytes(weights)


def verified_blob(version: int, blob: bytes, info: WeightInfo, run_id: str) -> bytes:
    """``blob`` if it matches the sha256 and size recorded at publish time, else
    WeightsIntegrityError."""
    sha = hashlib.sha256(blob).hexdigest()
    if sha != info.sha256 or len(blob) != info.size:
        raise WeightsIntegrityError(
            f"weights version {version} of run {run_id} fail their sha256 check "
            f"(recorded {info.sha256[:12]}, got {sha[:12]}, {len(blob)} of {info.size} "
            f"bytes); not applied", version)
    return blob


def signature_of(signer: WeightSigner | None, run_id: str, version: int, sha: str) -> str:
    """What a store records as ``sig`` for a publish: "" without a signer."""
    return "" if signer is None else signer.sign(run_id, version, sha)


def checked_signature(version: int, info: WeightInfo, run_id: str,
                      verifier: WeightVerifier | None) -> WeightInfo:
    """``info``, the record stored for ``version``, if ``verifier`` (None: no check)
    accepts its signature, else WeightsSignatureError naming the run, the version and why.
    Verified for ``version``, the key's, not the record's own field: an older version's
    record copied under a newer key does not verify (no rollback dressed as new)."""
    if verifier is None or verifier.verify(run_id, version, info.sha256, info.signature):
        return info
    reason = "bad_signature" if info.signature else "unsigned"
    why = ("signed by another key or for another version" if info.signature
           else "unsigned")
    raise WeightsSignatureError(
        f"weights version {version} of run {run_id}: {why}, not by this run's learner; "
        f"not applied", version, reason)


def decoded_blob(version: int, blob: bytes, run_id: str) -> StateDict:
    """The state dict of a verified blob; WeightsIntegrityError if it does not decode."""
    try:
        return weights_from_bytes(blob)
    except ValueError as err:
        raise WeightsIntegrityError(f"weights version {version} of run {run_id} "
                                    f"is unusable ({err}); not applied", version) from None


def check_version(version: int) -> int:
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ValueError(f"weights version must be an integer >= 0, got {version!r}")
    return version


def _info(meta: dict[bytes, bytes]) -> WeightInfo:
    return WeightInfo(version=int(meta[b"version"]), sha256=meta[b"sha256"].decode(),
                      size=int(meta[b"size"]), time=float(meta[b"time"]),
                      signature=meta.get(b"sig", b"").decode(errors="replace"))


def publish_age_s(source: Any, version: int) -> float | None:
    """Seconds since ``version`` was published, from its record in the store behind
    ``source`` (a ``WeightStore``, or a cache over one: ``weights_delivery_seconds``);
    None when the store keeps no record or cannot be read now."""
    store = getattr(source, "store", source)
    info_of = getattr(store, "info", None)
    if info_of is None:
        return None
    try:
        info = info_of(version)
    except TransportError:
        return None
    return None if info is None else max(time.time() - info.time, 0.0)


class RefusedVersions:
    """A reader's record of the weights versions it refused: each is logged in one line
    and counted in ``weights_rejected_total`` once, however often the reader polls it
    (a forged latest version stays the latest until the learner publishes past it)."""

    def __init__(self, who: str, recorder: Any = None, component: str = "") -> None:
        """``who`` starts the log line; ``recorder`` (a ``shared.metrics.Recorder``, or
        None) counts under ``component``."""
        self.who = who
        self.recorder = recorder
        self.component = component
        self.refused: dict[int, str] = {}
        """Version -> reason, of every version refused so far."""

    def note(self, err: WeightsIntegrityError, keeping: int) -> bool:
        """Record the refusal ``err`` while the reader keeps version ``keeping``; True the
        first time for that version (logged and counted then only)."""
        if err.version >= 0 and err.version in self.refused:
            return False
        if err.version >= 0:
            self.refused[err.version] = err.reason
        log.warning("%s: %s; keeping weights version %d", self.who, err, keeping)
        if self.recorder is not None:
            self.recorder.inc("weights_rejected_total", 1, component=self.component,
                              reason=err.reason)
        return True
