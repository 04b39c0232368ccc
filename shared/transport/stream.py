"""The sample stream: finished games from self-play workers to the learner, via Redis.

One Redis stream per run (``zf:{RUN}:samples``) holds one entry per finished game (field
``d`` = ``shared.samples.encode(game)``); the learner reads it through a consumer group.

Nothing unread is ever dropped
    There is no ``MAXLEN`` on ``XADD``. Memory is bounded by backpressure instead: the
    backlog is the stream's length, which counts every entry not yet acknowledged by the
    group, because ``trim`` removes exactly the entries below the oldest unacknowledged one
    (below the oldest pending entry, or up to the last delivered one when none is pending;
    the minimum over all groups). ``append`` adds a batch only if the backlog stays within
    ``max_backlog``, checked and appended in one script, so the bound holds however many
    producers append at once (a batch larger than the bound goes only into an empty
    stream, alone). Otherwise it waits for the learner to catch up, woken by the trim
    that makes room, not polling (``stream_room``); after ``append_timeout_s`` it raises
    ``BackpressureTimeout`` having written nothing, so the caller still holds its games
    and may retry. (Redis 6.2, the bundled server, has no ``XINFO GROUPS lag``; the
    stream length is also the quantity that costs memory, so it is the right one to bound.)

Bad entries never block the stream
    An entry that fails ``decode`` (garbage, unknown schema, oversized, ...) is
    acknowledged at once, counted in ``SampleStream.rejected[reason]``, logged in one
    line with its id, and skipped; reading goes on with the entries after it.

Exactly once, for the learner
    Entries stay pending (delivered, unacknowledged) until the consumer acks them, and a
    restarted consumer first gets back its own pending entries (``XREADGROUP ... 0``), so
    a crash loses nothing. To also never count an entry twice the learner follows one
    rule: **checkpoint first, then ack**. Its checkpoint stores the id of the last entry
    it added to its replay window (the "cursor"; ids of one consumer's deliveries only
    grow). After a restore it calls ``skip_through(cursor, already)``: re-delivered
    pending entries at or below the cursor whose game the checkpoint holds (``already``)
    are acked and not returned; the ones above it were lost with the crash and come back
    as new, and so do those below it that the checkpoint never got (a delivery whose reply
    was lost: newer entries reached the learner first).
    A game Redis acknowledged but lost in a restart (its AOF write was still postponed)
    is appended again by its producer, which keeps its last seconds of appends
    (``recent_appends``); a copy of a game the learner already has is dropped by id.
    (Acking only after a checkpoint means the backlog includes everything read since the
    last one: keep ``max_backlog`` above the games read per checkpoint interval, or the
    workers wait for the next checkpoint.)
"""

from __future__ import annotations

import logging
import re
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import redis

from zeroforge.shared.samples import (
    MAX_ENTRY_BYTES,
    EntryLimits,
    GameSamples,
    SampleFormatError,
    decode,
    encode,
)
from zeroforge.shared.transport.connection import TransportError, redis_errors, text
from zeroforge.shared.transport.fencing import epoch_key, fence_check, fenced_reply
from zeroforge.shared.transport.recent_appends import DEFAULT_WINDOW_S
from zeroforge.shared.transport.stream_room import (
    TRIM_SCRIPT,
    StreamRoom,
    room_key,
    trim_args,
)
from zeroforge.shared.transport.stream_room import (
    BackpressureTimeout as BackpressureTimeout,  # defined beside the wait that raises it
)
from zeroforge.shared.transport.writer_counts import WriterCounts

log = logging.getLogger(__name__)

FIELD = b"d"
"""The entry field holding the encoded game."""

_RUN_ID = re.compile(r"[A-Za-z0-9_.\-]{1,64}")

# KEYS: the stream. ARGV: group, consumer, count, start id, the most bytes of data an entry
# may bring back, the data field, OVERSIZE_FIELD. XREADGROUP as the reader asked, but the
# data of an entry above the cap stays in Redis: the field comes back as OVERSIZE_FIELD with
# the data's size, so that one read of COUNT hostile entries cannot cost COUNT x 512 MB.
_CAPPED_READ_SCRIPT = """
local reply = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3],
                         'STREAMS', KEYS[1], ARGV[4])
if not reply then return {} end
local entries = reply[1][2]
local cap = tonumber(ARGV[5])
for _, entry in ipairs(entries) do
  local fields = entry[2]
  if fields then
    for j = 1, #fields - 1, 2 do
      if fields[j] == ARGV[6] and #fields[j + 1] > cap then
        fields[j] = ARGV[7]
        fields[j + 1] = tostring(#fields[j + 1])
      end
    end
  end
end
return entries
"""
OVERSIZE_FIELD = b"zf:oversize"
"""The field a capped read puts in place of data it left in Redis (its value: the size)."""
READ_POLL_S = (0.01, 0.1)
"""A read that may wait looks for new entries after 10 ms, then twice as long each time up
to 100 ms (a script cannot block): quick when games flow, about 1% of a core when idle."""


def _entry_data(fields: dict | None) -> bytes | int | None:
    """An entry's data, or the size of data a capped read left in Redis (an int)."""
    if not fields:
        return None
    if OVERSIZE_FIELD in fields:
        return int(fields[OVERSIZE_FIELD])
    return fields.get(FIELD)


# KEYS: the run's learner epoch, the stream. ARGV: the learner's epoch, group, ids...
_FENCED_XACK_SCRIPT = fence_check() + """
return redis.call('XACK', KEYS[2], ARGV[2], unpack(ARGV, 3))
"""


@dataclass(frozen=True)
class StreamConfig:
    """How a run's sample stream is read and written."""

    group: str = "learner"
    """Consumer group of the learner."""
    consumer: str = "learner-0"
    """This reader's name in the group; unique per live reader, stable across restarts
    (a restarted reader gets back the pending entries of its name)."""
    max_backlog: int = 2000
    """The most games the stream holds not yet acknowledged (and trimmed): an ``append``
    that would go past it waits (a hard bound; a larger batch goes only into an empty
    stream). A 15x15 gomoku game is ~50 KB, so 2000 games is ~100 MB of Redis memory."""
    append_timeout_s: float = 120.0
    """Seconds ``append`` waits for room before raising ``BackpressureTimeout``."""
    poll_interval_s: float | None = None
    """Deprecated, ignored (with a DeprecationWarning): waiting appends no longer poll;
    ``room_check_interval_s`` is their fallback check. (Kept in its place, so that the
    fields after it keep their positions.)"""
    max_entry_bytes: int = MAX_ENTRY_BYTES
    """Encoded games above this are refused by ``append`` and rejected by ``read``."""
    entry_limits: EntryLimits | None = None
    """What a read entry may hold (the reader's games: ``EntryLimits.for_games``), checked
    while it is decoded; None: the loosest limits (``max_entry_bytes`` for any field)."""
    room_check_interval_s: float = 2.0
    """Seconds between a waiting ``append``'s own checks for room: the fallback for a
    wake-up that never comes (a waiting append is woken by the trim that makes room, see
    ``stream_room``; this interval only bounds how late it is when that wake-up is lost)."""
    resend_window_s: float = DEFAULT_WINDOW_S
    """Seconds of its own appends a producer keeps, to append again those a restarted
    Redis comes back without (``recent_appends``: acknowledged but not yet in its AOF)."""
    notify_room: bool = True
    """Whether this endpoint's acks and trims wake the appends waiting for room; False:
    they find the room at their next ``room_check_interval_s`` check (tests of that
    fallback use it)."""

    def __post_init__(self) -> None:
        if (self.max_backlog < 1 or self.append_timeout_s < 0
                or self.room_check_interval_s <= 0 or self.resend_window_s < 0):
            raise ValueError(f"StreamConfig: max_backlog >= 1, append_timeout_s >= 0, "
                             f"room_check_interval_s > 0 and resend_window_s >= 0 required, "
                             f"got {self}")
        if self.poll_interval_s is not None:
            warnings.warn("StreamConfig.poll_interval_s is ignored: waiting appends are "
                          "woken by the learner's trim; room_check_interval_s is their "
                          "fallback check", DeprecationWarning, stacklevel=3)
        if not 0 < self.max_entry_bytes <= MAX_ENTRY_BYTES:
            raise ValueError(f"StreamConfig.max_entry_bytes must be 1..{MAX_ENTRY_BYTES}")
        if not self.group or not self.consumer:
            raise ValueError("StreamConfig: group and consumer names must be non-empty")

    def read_limits(self) -> EntryLimits:
        """``entry_limits`` within ``max_entry_bytes``."""
        limits = self.entry_limits or EntryLimits()
        return EntryLimits(max_bytes=min(limits.max_bytes, self.max_entry_bytes),
                           max_bin_bytes=min(limits.max_bin_bytes, self.max_entry_bytes))


@dataclass(frozen=True)
class StreamInfo:
    """A snapshot of the stream and of this reader's group."""

    length: int
    """Entries in the stream: the backlog that ``append`` bounds (all unacknowledged ones,
    plus any acknowledged out of order behind an older pending one)."""
    pending: int
    """Entries delivered to the group but not acknowledged."""
    lag: int
    """Entries not yet delivered to the group (Redis >= 7 reports it; on 6.2 it is
    ``length - pending``, exact when the group acknowledges in order, as the learner does)."""
    last_delivered_id: str
    """Id of the last entry delivered to the group ("0-0" before the first)."""
    last_generated_id: str
    """Id of the newest entry ever added ("0-0" for a new stream)."""


def stream_key(run_id: str, shard: int = 0) -> str:
    """Redis key of a run's sample stream (of its stream shard ``shard`` > 0, see
    ``shared.transport.shards``); the braces make ``run_id`` a cluster hash tag."""
    base = f"zf:{{{check_run_id(run_id)}}}:samples"
    return f"{base}:{shard}" if shard else base


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id must be 1-64 characters of letters, digits, '_', '.', '-'; "
                         f"got {run_id!r}")
    return run_id


def parse_id(entry_id: str) -> tuple[int, int]:
    """A stream id ``"MS-SEQ"`` as a comparable pair."""
    ms, _, seq = entry_id.partition("-")
    try:
        return int(ms), int(seq or 0)
    except ValueError:
        raise ValueError(f"not a stream id: {entry_id!r}") from None


class SampleStream:
    """Append finished games (workers) and read / acknowledge them (the learner)."""

    def __init__(self, client: redis.Redis, run_id: str,
                 config: StreamConfig | None = None, shard: int = 0,
                 epoch: int | None = None) -> None:
        """``epoch``: the learner's (``fencing.take_epoch``): every ack then checks, in the
        script that acks, that no newer learner has taken the fence (``FencedError``)."""
        if client.connection_pool.connection_kwargs.get("decode_responses"):
            raise ValueError("SampleStream needs a client with decode_responses=False "
                             "(entries are binary); use shared.transport.connect")
        self.redis = client
        self.run_id = check_run_id(run_id)
        self.config = config or StreamConfig()
        self.key = stream_key(run_id, shard)
        self.rejected: Counter[str] = Counter()
        """Entries rejected by ``read``, by reason (``SampleFormatError.reason``, or
        ``no_data`` for an entry without the ``d`` field)."""
        self.skipped_duplicates = 0
        """Re-delivered entries at or below the ``skip_through`` cursor, acked unread."""
        self._room = StreamRoom(client, self.key, FIELD,
                                max_backlog=self.config.max_backlog,
                                append_timeout_s=self.config.append_timeout_s,
                                room_check_interval_s=self.config.room_check_interval_s,
                                resend_window_s=self.config.resend_window_s)
        self._trim = client.register_script(TRIM_SCRIPT)
        self.epoch = epoch
        self._fenced_xack = client.register_script(_FENCED_XACK_SCRIPT)
        self._capped_read = client.register_script(_CAPPED_READ_SCRIPT)
        # After a (re)start, first drain our own pending entries: they were delivered to
        # this consumer name before a crash and never acknowledged.
        self._pending_cursor: str | None = "0"
        self._skip_through: tuple[int, int] | None = None
        self._already: Callable[[str], bool] | None = None
        self._handed_out: set[str] = set()
        """Ids this reader has returned and not acked yet: a pending scan skips these (the
        caller holds them), and only these. (Skipping every id up to the newest returned
        one lost entries whose delivery reply was lost: newer reads had passed them.)"""
        self._ensure_group()

    # --- producer side -------------------------------------------------------------------
    def append(self, games: list[GameSamples], timeout_s: float | None = None) -> list[str]:
        """XADD one entry per game once they all fit under ``max_backlog`` (checked and
        added in one script: ``stream_room``), waiting for room; returns their ids in order.

        Raises ValueError (writing nothing) if a game encodes above ``max_entry_bytes``,
        and BackpressureTimeout (writing nothing) if the games do not fit within
        ``timeout_s`` (default ``config.append_timeout_s``).
        """
        if not games:
            return []
        return self._room.append(encode_entries(games, self.config.max_entry_bytes),
                                 timeout_s)

    def append_raw(self, blobs: list[bytes | None]) -> list[str]:
        """XADD entries as given, unchecked and unbounded (None: an entry without the data
        field); for tests and fuzzers of the reading side."""
        with redis_errors(self.redis):
            pipe = self.redis.pipeline(transaction=False)
            for blob in blobs:
                pipe.xadd(self.key, {FIELD: blob} if blob is not None else {b"x": b""})
            return [text(i) for i in pipe.execute()]

    def wait_for_room(self, timeout_s: float | None = None, count: int = 1) -> None:
        """Return once ``count`` games would fit under ``max_backlog``; BackpressureTimeout
        after ``timeout_s`` (default ``config.append_timeout_s``)."""
        self._room.wait(count, timeout_s)

    @property
    def backpressure_wait_s(self) -> float:
        """Total seconds ``append`` and ``wait_for_room`` spent waiting for room."""
        return self._room.backpressure_wait_s

    @property
    def resent(self) -> int:
        """Games appended again because a restarted Redis had lost them."""
        return self._room.recent.resent

    def writer_counts(self) -> WriterCounts:
        """The calling thread's share of ``backpressure_wait_s`` and ``resent``."""
        return self._room.tallies.mine()

    @property
    def room_checks(self) -> int:
        """Times a waiting append checked for room again (woken by a trim, or at its
        ``room_check_interval_s`` fallback): few, however long it waits."""
        return self._room.room_checks

    # --- consumer side -------------------------------------------------------------------
    def skip_through(self, cursor: str | None,
                     already: Callable[[str], bool] | None = None) -> None:
        """Ack-and-skip re-delivered entries with id <= ``cursor`` (the last id already in
        the restored checkpoint); None turns skipping off. With ``already`` (game id ->
        in the checkpoint), such an entry is skipped only if its game is: one whose
        delivery reply was lost never reached the checkpoint, though it sits below the
        cursor, and is returned."""
        self._skip_through = None if cursor is None else parse_id(cursor)
        self._already = already

    def read(self, max_count: int = 64, block_ms: int = 0) -> list[tuple[str, GameSamples]]:
        """Up to ``max_count`` decoded games with their entry ids, oldest first.

        Own pending entries (from before a restart) come first, then new ones; waits up to
        ``block_ms`` for new entries (0: do not wait). Bad entries are acked, counted in
        ``rejected`` and skipped. Returns [] only when nothing arrived in time.
        """
        if max_count < 1:
            raise ValueError(f"read: max_count must be >= 1, got {max_count}")
        self._check_block(block_ms)
        try:
            with redis_errors(self.redis):
                while True:
                    raw = self._read_raw(max_count, block_ms)
                    if not raw:
                        return []
                    games = self._decode_batch(raw)
                    if games:
                        self._handed_out.update(i for i, _ in games)
                        return games
                    # Everything in that batch was bad or a duplicate: keep going, so that
                    # an empty answer keeps meaning "no data".
        except TransportError:
            self.recover_pending()
            raise

    def recover_pending(self) -> None:
        """Look at this reader's pending entries again before new ones. Redis may have
        delivered entries (moved them into the group's pending list) whose reply was lost
        with a dropped connection; a retried read only asks for *new* entries, so those
        would wait, unread, until a restart. The next ``read`` returns them, and skips the
        pending entries it already handed out (they are the caller's, not yet acked)."""
        self._pending_cursor = "0"

    def ack(self, ids: list[str]) -> int:
        """XACK ``ids`` and trim what no group needs any more (waking as many waiting appends
        as it removed entries: ``trim``); returns how many were acked."""
        if not ids:
            return 0
        with redis_errors(self.redis):
            pipe = self.redis.pipeline(transaction=False)
            self._xack(ids, pipe)
            self._trim(keys=[self.key, room_key(self.key)], args=trim_args(self.config.notify_room),
                       client=pipe)
            acked, _ = pipe.execute(raise_on_error=False)
        count = self._acked(acked)
        self._handed_out.difference_update(ids)
        return count

    def _xack(self, ids: list[str], client: Any) -> Any:
        """XACK ``ids`` on ``client`` (a pipeline or the connection), fenced by ``epoch``
        (none: ``''``, not checked)."""
        epoch = "" if self.epoch is None else self.epoch
        return self._fenced_xack(keys=[epoch_key(self.run_id), self.key],
                                 args=[epoch, self.config.group, *ids], client=client)

    def _acked(self, reply: Any) -> int:
        if isinstance(reply, Exception):
            raise fenced_reply(reply, f"ack on {self.key}", self.epoch) or TransportError(
                f"ack on {self.key} failed: {reply}")
        return int(reply)

    def trim(self) -> int:
        """Drop entries every group has acknowledged, waking as many waiting appends (with
        ``notify_room``); returns the stream's new length."""
        with redis_errors(self.redis):
            return int(self._trim(keys=[self.key, room_key(self.key)],
                                  args=trim_args(self.config.notify_room)))

    def lag(self) -> int:
        """Entries not yet delivered to the group (see ``StreamInfo.lag``)."""
        return self.info().lag

    def info(self) -> StreamInfo:
        """Length, pending, lag and ids of the stream and this reader's group."""
        with redis_errors(self.redis):
            pipe = self.redis.pipeline(transaction=False)
            pipe.xlen(self.key)
            pipe.xinfo_groups(self.key)
            pipe.xinfo_stream(self.key)
            try:
                length, groups, stream = pipe.execute()
            except redis.ResponseError as err:
                if "no such key" not in str(err):
                    raise
                return StreamInfo(0, 0, 0, "0-0", "0-0")
        group = next((g for g in groups if text(g["name"]) == self.config.group), None)
        if group is None:
            raise TransportError(f"sample stream {self.key} has no group "
                                 f"{self.config.group!r}")
        pending = int(group["pending"])
        lag = group.get("lag")
        return StreamInfo(
            length=int(length), pending=pending,
            lag=int(lag) if lag is not None else max(int(length) - pending, 0),
            last_delivered_id=text(group["last-delivered-id"]),
            last_generated_id=text(stream["last-generated-id"]),
        )

    # --- internals -----------------------------------------------------------------------
    def _ensure_group(self) -> None:
        with redis_errors(self.redis):
            try:
                # id 0: the group sees entries appended before it existed, too.
                self.redis.xgroup_create(self.key, self.config.group, id="0", mkstream=True)
            except redis.exceptions.NoPermissionError:
                # A role that only appends (acl.py's worker): the reader makes the group,
                # and it still sees every entry appended before (id 0).
                pass
            except redis.ResponseError as err:
                if "BUSYGROUP" not in str(err):
                    raise

    def _check_block(self, block_ms: int) -> None:
        timeout = self.redis.connection_pool.connection_kwargs.get("socket_timeout")
        if block_ms < 0 or (timeout and block_ms / 1000 >= timeout):
            raise ValueError(f"read: block_ms must be >= 0 and below the socket timeout "
                             f"({timeout} s), got {block_ms}")

    def _read_raw(self, count: int, block_ms: int) -> list[tuple[bytes, dict | None]]:
        group, consumer = self.config.group, self.config.consumer
        while self._pending_cursor is not None:
            reply = self._xreadgroup(group, consumer, self._pending_cursor, count, None)
            if not reply:
                self._pending_cursor = None  # history drained: from now on only new entries
                break
            self._pending_cursor = text(reply[-1][0])
            fresh = [e for e in reply if text(e[0]) not in self._handed_out]
            if fresh:
                return fresh
        # BLOCK 0 means "forever" to Redis; our 0 means "do not wait", i.e. no BLOCK.
        return self._xreadgroup(group, consumer, ">", count, block_ms or None)

    def _xreadgroup(self, group: str, consumer: str, start: str, count: int,
                    block: int | None) -> list[tuple[bytes, dict | None]]:
        """XREADGROUP through ``_CAPPED_READ_SCRIPT``: an entry's data above the read
        limit never leaves Redis (its field is replaced by its size). A script cannot
        block, so ``block`` ms are waited by polling (``READ_POLL_S``)."""
        deadline = time.monotonic() + (block or 0) / 1000
        cap = self.config.read_limits().max_bytes
        poll, longest = READ_POLL_S
        while True:
            try:
                reply = self._capped_read(keys=[self.key],
                                          args=[group, consumer, count, start, cap, FIELD,
                                                OVERSIZE_FIELD])
            except redis.ResponseError as err:
                if "NOGROUP" not in str(err):
                    raise
                # The stream vanished (e.g. Redis restarted without persistence): recreate.
                log.warning("sample stream %s lost its group %r; recreating it", self.key,
                            group)
                self._ensure_group()
                return []
            # entries as [id, [field, value, ...]] (None for an entry deleted since)
            entries = [(raw_id, None if not pairs else dict(zip(pairs[::2], pairs[1::2],
                                                                  strict=True)))
                       for raw_id, pairs in cast("list[list[Any]]", reply or [])]
            left = deadline - time.monotonic()
            if entries or block is None or left <= 0:
                return entries
            time.sleep(min(poll, left))
            poll = min(poll * 2, longest)

    def _decode_batch(self, raw: list[tuple[bytes, dict | None]]
                      ) -> list[tuple[str, GameSamples]]:
        entries = [(text(raw_id), _entry_data(fields)) for raw_id, fields in raw]
        good, drop, skipped = decode_entries(entries, self._skip_through,
                                             self.config.read_limits(), self.rejected, self.key,
                                             self._already)
        self.skipped_duplicates += skipped
        if drop:
            # Ack the bad ones now: left pending they would come back after every restart.
            try:
                self._acked(self._xack(drop, self.redis))
            except redis.ResponseError as err:
                self._acked(err)
        return good


def encode_entries(games: list[GameSamples], max_entry_bytes: int) -> list[bytes]:
    """The entries for ``games``; ValueError (nothing to write) if one is over the limit."""
    blobs = [encode(g) for g in games]
    for game, blob in zip(games, blobs, strict=True):
        if len(blob) > max_entry_bytes:
            raise ValueError(f"game {game.game_id or '?'} encodes to {len(blob)} bytes, "
                             f"over the {max_entry_bytes}-byte entry limit")
    return blobs


def decode_entries(entries: Sequence[tuple[str, bytes | int | None]],
                   skip_through: tuple[int, int] | None,
                   limits: EntryLimits, rejected: Counter[str], where: str,
                   already: Callable[[str], bool] | None = None
                   ) -> tuple[list[tuple[str, GameSamples]], list[str], int]:
    """The reading rules every ``SampleSource`` shares: entries at or below the
    ``skip_through`` cursor are duplicates (with ``already``: those whose game it says is
    held, or that carry no game id); an entry without data or failing ``decode`` within
    ``limits`` is counted in ``rejected`` by reason and logged in one line. Returns
    (decoded games with their ids, ids to ack unread, duplicates skipped)."""
    good: list[tuple[str, GameSamples]] = []
    drop: list[str] = []
    skipped = 0
    for entry_id, data in entries:
        below = skip_through is not None and parse_id(entry_id) <= skip_through
        if below and already is None:
            skipped += 1
            drop.append(entry_id)
            continue
        try:
            if data is None:
                raise SampleFormatError("no_data", "entry has no data field (or was deleted)")
            if isinstance(data, int):  # left in Redis by a capped read: only its size came
                raise SampleFormatError("oversized", f"{data} bytes > {limits.max_bytes} "
                                        "(not read)")
            game = decode(data, limits)
        except SampleFormatError as err:
            rejected[err.reason] += 1
            drop.append(entry_id)
            log.warning("rejected sample entry %s of %s: %s", entry_id, where,
                        " ".join(str(err).split())[:200])
            continue
        if below and already is not None and (not game.game_id or already(game.game_id)):
            skipped += 1
            drop.append(entry_id)
            continue
        good.append((entry_id, game))
    return good, drop, skipped


