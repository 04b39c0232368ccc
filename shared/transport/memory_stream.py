"""The in-memory sample stream (``memory.py``'s, the local run's): one run's entries and
consumer group (``StreamData``) and the ``SampleSink`` / ``SampleSource`` over them
(``MemorySampleStream``), keeping the Redis stream's promises: consumer-group delivery
with pending entries that come back to a restarted reader, acks, trimming below the oldest
unacknowledged entry, a hard backlog bound with waits woken by the ack or trim that makes
room (a ``threading.Condition``, the Redis room list's twin), and rejection of bad
entries by reason. Entries are ``shared.samples`` bytes, as on Redis.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence

from zeroforge.shared.samples import GameSamples
from zeroforge.shared.transport.fencing import MemoryFence
from zeroforge.shared.transport.stream import (
    StreamConfig,
    StreamInfo,
    check_run_id,
    decode_entries,
    encode_entries,
    parse_id,
)
from zeroforge.shared.transport.stream_room import backpressure_timeout
from zeroforge.shared.transport.writer_counts import ThreadTallies, WriterCounts


class StreamData:
    """One run's stream and its consumer group (a single group, as the learner uses)."""

    def __init__(self) -> None:
        lock = threading.RLock()
        self.cond = threading.Condition(lock)
        """Readers wait on it for new entries; held by everything that touches the data."""
        self.room = threading.Condition(lock)
        """Appends wait on it for room (the same lock): trims that free entries notify it."""
        self.entries: dict[int, bytes | None] = {}
        """Sequence number -> encoded game (None: an entry without data), oldest first."""
        self.next_seq = 1
        self.last_delivered = 0
        self.pending: dict[int, str] = {}
        """Delivered, unacknowledged entries -> the consumer they went to."""

    def trim(self) -> int:
        """Drop entries the group no longer needs; returns the new length (lock held)."""
        floor = min(self.pending) if self.pending else self.last_delivered + 1
        for seq in [s for s in self.entries if s < floor]:
            del self.entries[seq]
        return len(self.entries)


def _entry_id(seq: int) -> str:
    return f"{seq}-0"


class MemorySampleStream:
    """``SampleSink`` and ``SampleSource`` over a ``StreamData`` (see module docstring)."""

    def __init__(self, data: StreamData, run_id: str, config: StreamConfig | None = None,
                 shard: int = 0, fence: MemoryFence | None = None,
                 epoch: int | None = None) -> None:
        self._data = data
        self._fence = fence or MemoryFence()
        self.epoch = epoch
        self.run_id = check_run_id(run_id)
        self.config = config or StreamConfig()
        self.key = f"memory:{run_id}:samples" + (f":{shard}" if shard else "")
        self.rejected: Counter[str] = Counter()
        self.skipped_duplicates = 0
        self.backpressure_wait_s = 0.0
        self._tallies = ThreadTallies()
        """``backpressure_wait_s`` per appending thread (``writer_counts``)."""
        self.room_checks = 0
        """Times a waiting append checked for room again (see ``SampleStream``)."""
        self._pending_cursor: int | None = 0
        self._skip_through: tuple[int, int] | None = None
        self._already: Callable[[str], bool] | None = None
        self._returned_through = 0
        """Newest sequence number this reader has handed out (or acked as bad)."""

    # --- producer side -------------------------------------------------------------------
    def append(self, games: list[GameSamples], timeout_s: float | None = None) -> list[str]:
        if not games:
            return []
        blobs = encode_entries(games, self.config.max_entry_bytes)
        with self._data.cond:
            self._wait_locked(len(blobs), timeout_s)
            return self._add(blobs)

    def wait_for_room(self, timeout_s: float | None = None, count: int = 1) -> None:
        with self._data.cond:
            self._wait_locked(count, timeout_s)

    def _wait_locked(self, count: int, timeout_s: float | None) -> None:
        """Return once ``count`` entries fit (as on Redis: within ``max_backlog``, or any
        batch into an empty stream), waiting on ``room``; lock held."""
        timeout = self.config.append_timeout_s if timeout_s is None else timeout_s
        d = self._data
        started: float | None = None
        while True:
            length = self._trim_locked()  # trim first, as a Redis role that may
            if length == 0 or length + count <= self.config.max_backlog:
                break
            now = time.monotonic()
            started = now if started is None else started
            waited = now - started
            if waited >= timeout:
                self.backpressure_wait_s += waited
                self._tallies.add(backpressure_wait_s=waited)
                raise backpressure_timeout(self.key, length, self.config.max_backlog, count,
                                           waited)
            d.room.wait(min(self.config.room_check_interval_s, timeout - waited))
            self.room_checks += 1
        if started is not None:
            waited = time.monotonic() - started
            self.backpressure_wait_s += waited
            self._tallies.add(backpressure_wait_s=waited)

    def writer_counts(self) -> WriterCounts:
        """The calling thread's waits for room (nothing is resent or rerouted here)."""
        return self._tallies.mine()

    def append_raw(self, blobs: list[bytes | None]) -> list[str]:
        """Append entries as given, unchecked (None: an entry without data); for tests and
        fuzzers of the reading side."""
        with self._data.cond:
            return self._add(blobs)

    def _add(self, blobs: Sequence[bytes | None]) -> list[str]:
        d = self._data
        ids = []
        for blob in blobs:
            d.entries[d.next_seq] = blob
            ids.append(_entry_id(d.next_seq))
            d.next_seq += 1
        d.cond.notify_all()
        return ids

    # --- consumer side -------------------------------------------------------------------
    def skip_through(self, cursor: str | None,
                     already: Callable[[str], bool] | None = None) -> None:
        self._skip_through = None if cursor is None else parse_id(cursor)
        self._already = already
        if self._skip_through is None:
            return
        with self._data.cond:
            d = self._data
            if self._skip_through[0] >= d.next_seq:
                # A cursor past every id this stream has given is an earlier process's (a
                # local run resumed from its checkpoint): this stream began empty, so
                # nothing in it is a re-delivery. Its ids go on after the cursor, as a new
                # Redis stream's time-based ids would; restarted at 1, every game up to
                # the cursor's number was dropped as "already in the window".
                # (Entries appended before this call keep their lower ids and are
                # delivered first, in order.)
                d.next_seq = self._skip_through[0] + 1
                self._skip_through = None

    def read(self, max_count: int = 64, block_ms: int = 0) -> list[tuple[str, GameSamples]]:
        if max_count < 1:
            raise ValueError(f"read: max_count must be >= 1, got {max_count}")
        if block_ms < 0:
            raise ValueError(f"read: block_ms must be >= 0, got {block_ms}")
        deadline = time.monotonic() + block_ms / 1000
        d = self._data
        with d.cond:
            while True:
                raw = self._take(max_count)
                if raw:
                    games = self._decode_batch(raw)
                    if games:
                        return games
                    continue  # all bad or duplicates: an empty answer means "no data"
                left = deadline - time.monotonic()
                if left <= 0:
                    return []
                d.cond.wait(left)

    def _take(self, count: int) -> list[tuple[int, bytes | None]]:
        """This consumer's pending entries first (after a restart), then new ones."""
        d, me = self._data, self.config.consumer
        if self._pending_cursor is not None:
            floor = max(self._pending_cursor, self._returned_through)
            mine = sorted(s for s, c in d.pending.items() if c == me and s > floor)
            if mine:
                mine = mine[:count]
                self._pending_cursor = self._returned_through = mine[-1]
                return [(s, d.entries.get(s)) for s in mine]
            self._pending_cursor = None
        fresh = [s for s in d.entries if s > d.last_delivered][:count]
        for s in fresh:
            d.pending[s] = me
        if fresh:
            d.last_delivered = self._returned_through = fresh[-1]
        return [(s, d.entries[s]) for s in fresh]

    def recover_pending(self) -> None:
        """Look at this reader's pending entries again (see the Redis stream: there a
        reply can be lost with a connection; here it cannot, but the promise is the same)."""
        self._pending_cursor = 0

    def _decode_batch(self, raw: list[tuple[int, bytes | None]]
                      ) -> list[tuple[str, GameSamples]]:
        good, drop, skipped = decode_entries([(_entry_id(seq), data) for seq, data in raw],
                                             self._skip_through, self.config.read_limits(),
                                             self.rejected, self.key, self._already)
        self.skipped_duplicates += skipped
        if drop:
            self._ack_locked(drop)
        return good

    def ack(self, ids: list[str]) -> int:
        with self._data.cond:
            return self._ack_locked(ids)

    def _ack_locked(self, ids: list[str]) -> int:
        self._fence.check(f"ack on {self.key}", self.epoch)
        d = self._data
        acked = 0
        for entry_id in ids:
            if d.pending.pop(parse_id(entry_id)[0], None) is not None:
                acked += 1
        self._trim_locked()
        return acked

    def trim(self) -> int:
        with self._data.cond:
            return self._trim_locked()

    def _trim_locked(self) -> int:
        """Trim; wake the waiting appends if that freed entries (with ``notify_room``)."""
        d = self._data
        before = len(d.entries)
        length = d.trim()
        if length < before and self.config.notify_room:
            d.room.notify_all()
        return length

    def lag(self) -> int:
        return self.info().lag

    def info(self) -> StreamInfo:
        d = self._data
        with d.cond:
            return StreamInfo(
                length=len(d.entries), pending=len(d.pending),
                lag=sum(1 for s in d.entries if s > d.last_delivered),
                last_delivered_id=_entry_id(d.last_delivered) if d.last_delivered else "0-0",
                last_generated_id=_entry_id(d.next_seq - 1) if d.next_seq > 1 else "0-0")
