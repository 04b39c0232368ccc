"""Sharded sample streams: a run's games spread over S streams, read as one.

One stream, in one Redis, is one ceiling on a run's intake however many nodes it has
(docs/lab/scale.md, "Redis transport"). ``ShardedSampleStream`` spreads the games over S
streams (``distributed.stream_shards``), each an ordinary ``SampleStreamEndpoint`` of the
transport (its own Redis key, and its own Redis server when the run has several), and
gives the learner the same endpoint over all of them. It knows nothing of Redis.

Placement by game id
    A game goes to shard ``shard_of(game_id, S)`` (CRC-32 of the id, mod S), so a resent
    append (a worker retrying a batch whose first try failed part-way) lands on the same
    shard as its first copy, and the learner's game-id window drops it. A game without an
    id goes round-robin. A shard that refuses an append (down, or full past the timeout)
    gets its games re-routed to the next shard that takes them; one line names the shard
    when it starts failing (and one when it works again), and ``rerouted`` counts the
    games. Entries the refusing shard took before failing come
    back as copies when it returns, and are dropped by the learner's window like any resend.

Ids and the cursor
    An entry id is ``"K/ID"``: the shard's index, then the shard's own id. The learner's
    cursor (the last entry it added to its replay window, checkpointed) becomes one id per
    shard, ``"0=ID,1=ID,..."``; ``advance_cursor`` keeps it, ``skip_through`` hands each
    shard its own part. A plain id (the cursor of an unsharded run) is shard 0's, so a run
    can go from one stream to several; never fewer (``skip_through`` refuses a cursor
    naming a shard the run no longer has: its games would be stranded).

Exactly once
    Each shard keeps the stream's own promises (own consumer group, pending entries back
    after a restart, bad entries acked and counted, ack after checkpoint), and ids of one
    shard only grow, so one cursor per shard is all a restarted learner needs.

Faults
    A shard that cannot be read is skipped for that read, in one logged line naming it,
    and counted in ``shard_errors``; the other shards' games keep flowing. Only when every
    shard fails does ``read`` raise. An ack is tried on every shard it concerns before the
    first failure is raised (the learner keeps the ids and acks again later; acks repeat
    harmlessly).
"""

from __future__ import annotations

import collections
import logging
import zlib
from collections.abc import Callable, Sequence

from zeroforge.shared.samples import GameSamples
from zeroforge.shared.transport.base import SampleStreamEndpoint
from zeroforge.shared.transport.connection import PartialAckError, TransportError
from zeroforge.shared.transport.stream import StreamConfig, StreamInfo
from zeroforge.shared.transport.writer_counts import ThreadTallies, WriterCounts

log = logging.getLogger(__name__)

SEPARATOR = "/"
"""Between a shard's index and its own id in an entry id."""


def shard_of(game_id: str, shards: int) -> int:
    """The shard a game with ``game_id`` goes to: stable across processes and runs."""
    return zlib.crc32(game_id.encode()) % shards


def split_id(entry_id: str) -> tuple[int, str]:
    """``"K/ID"`` as (K, ID); a plain id is shard 0's. ValueError for anything else."""
    shard, sep, own = entry_id.partition(SEPARATOR)
    if not sep:
        return 0, entry_id
    if not shard.isdigit() or not own:
        raise ValueError(f"not a sharded stream id: {entry_id!r}")
    return int(shard), own


def parse_cursor(cursor: str | None) -> dict[int, str]:
    """A checkpointed cursor as {shard: its last id}: ``"0=ID,1=ID"``, a plain id (shard
    0's), or None (nothing yet). ValueError for a malformed one."""
    if not cursor:
        return {}
    if "=" not in cursor:
        return {0: cursor}
    parts: dict[int, str] = {}
    for part in cursor.split(","):
        shard, sep, own = part.partition("=")
        if not sep or not shard.isdigit() or not own:
            raise ValueError(f"not a sharded stream cursor: {cursor!r}")
        parts[int(shard)] = own
    return parts


def advance_cursor(cursor: str | None, entry_id: str) -> str:
    """The cursor after the entry ``entry_id`` was added: the id itself for an unsharded
    stream, else ``cursor`` with that entry's shard moved on."""
    shard, own = split_id(entry_id)
    if own == entry_id:
        return entry_id
    parts = parse_cursor(cursor)
    parts[shard] = own
    return ",".join(f"{k}={parts[k]}" for k in sorted(parts))


class ShardedSampleStream:
    """``SampleStreamEndpoint`` over ``shards`` (two or more), one per stream of the run."""

    def __init__(self, shards: Sequence[SampleStreamEndpoint]) -> None:
        if len(shards) < 2:
            raise ValueError(f"ShardedSampleStream needs 2 or more shards, got {len(shards)}")
        self.shards = list(shards)
        self.config: StreamConfig = self.shards[0].config
        """Each shard's config (``max_backlog`` bounds each shard)."""
        self.key = ",".join(str(getattr(s, "key", i)) for i, s in enumerate(self.shards))
        self.rerouted = 0
        """Games appended to another shard than their own because it refused them."""
        self._tallies = ThreadTallies()
        """``rerouted`` per appending thread (``writer_counts``)."""
        self.shard_errors: collections.Counter[int] = collections.Counter()
        """Failed reads, appends and acks, by shard index."""
        self._next_read = 0
        self._next_unnamed = 0
        self._failing: set[int] = set()
        """Shards whose last call failed (logged once until they work again)."""
        self.unread_shards: tuple[str, ...] = ()
        """The shards the last ``read`` could not read (an empty read with some is not
        the end of the stream: the learner's drain waits for them)."""
        self._last_info: dict[int, StreamInfo] = {}

    # --- the shards' counters, summed ----------------------------------------------------
    @property
    def rejected(self) -> collections.Counter[str]:
        """Entries rejected while reading, by reason, over all shards."""
        total: collections.Counter[str] = collections.Counter()
        for shard in self.shards:
            total.update(shard.rejected)
        return total

    @property
    def skipped_duplicates(self) -> int:
        return sum(s.skipped_duplicates for s in self.shards)

    @property
    def backpressure_wait_s(self) -> float:
        return sum(float(getattr(s, "backpressure_wait_s", 0.0)) for s in self.shards)

    @property
    def room_checks(self) -> int:
        """Checks for room made while waiting, over all shards."""
        return sum(s.room_checks for s in self.shards)

    def writer_counts(self) -> WriterCounts:
        """The calling thread's counts over all shards, with the games it rerouted."""
        total = self._tallies.mine()
        for shard in self.shards:
            total += shard.writer_counts()
        return total

    # --- producer side -------------------------------------------------------------------
    def append(self, games: list[GameSamples], timeout_s: float | None = None) -> list[str]:
        """Each game to its shard (re-routed past a shard that is down or full); ids in
        order. A ``BackpressureTimeout`` (every shard full) or a game over the entry limit
        writes nothing: a shard is found for every game before the first write. Each
        shard's append keeps its own bound (``max_backlog`` per shard) atomically; one
        that lost its room to another producer since it was chosen waits again."""
        if not games:
            return []
        by_shard: dict[int, list[int]] = collections.defaultdict(list)
        for i, game in enumerate(games):
            by_shard[self._shard_for(game)].append(i)
        placed: dict[int, list[int]] = collections.defaultdict(list)
        for own in sorted(by_shard):
            target = self._room(own, timeout_s, len(by_shard[own]))
            placed[target].extend(by_shard[own])
            if target != own:
                self.rerouted += len(by_shard[own])
                self._tallies.add(rerouted=len(by_shard[own]))
        ids: list[str] = [""] * len(games)
        for target in sorted(placed):
            self._append_to(target, games, sorted(placed[target]), ids, timeout_s)
        return ids

    def wait_for_room(self, timeout_s: float | None = None, count: int = 1) -> None:
        """Wait until every shard has room for ``count`` games (see
        ``SampleSink.wait_for_room``)."""
        for shard in self.shards:
            shard.wait_for_room(timeout_s, count)

    def _shard_for(self, game: GameSamples) -> int:
        if game.game_id:
            return shard_of(game.game_id, len(self.shards))
        self._next_unnamed = (self._next_unnamed + 1) % len(self.shards)
        return self._next_unnamed

    def _room(self, own: int, timeout_s: float | None, count: int) -> int:
        """The shard ``own``'s ``count`` games go to: ``own`` once it has room for them
        (waiting up to ``timeout_s``), else the next shard with room now; raises the first
        failure when none has."""
        failure: TransportError | None = None
        for step in range(len(self.shards)):
            shard = (own + step) % len(self.shards)
            try:
                self.shards[shard].wait_for_room(timeout_s if step == 0 else 0.0, count)
            except TransportError as err:
                self._failed(shard, "refuses appends", err)
                failure = failure or err
                continue
            self._recovered(shard)
            return shard
        assert failure is not None
        raise failure

    def _append_to(self, first: int, games: list[GameSamples], which: list[int],
                   ids: list[str], timeout_s: float | None) -> None:
        """Append ``games[which]`` to shard ``first`` (waiting up to ``timeout_s`` if its
        room went to another producer meanwhile), or the next one that takes them now (a
        shard that died since it was found to have room)."""
        batch = [games[i] for i in which]
        failure: TransportError | None = None
        for step in range(len(self.shards)):
            shard = (first + step) % len(self.shards)
            try:
                own = self.shards[shard].append(batch, 0.0 if step else timeout_s)
            except TransportError as err:
                self._failed(shard, "refuses appends", err)
                failure = failure or err
                continue
            if step:
                self.rerouted += len(batch)
                self._tallies.add(rerouted=len(batch))
            for i, entry_id in zip(which, own, strict=True):
                ids[i] = f"{shard}{SEPARATOR}{entry_id}"
            return
        assert failure is not None
        raise failure

    def append_raw(self, blobs: list[bytes | None]) -> list[str]:
        """Entries as given, unchecked, all to shard 0 (for tests of the reading side)."""
        return [f"0{SEPARATOR}{i}" for i in self.shards[0].append_raw(blobs)]  # type: ignore[attr-defined]

    # --- consumer side -------------------------------------------------------------------
    def read(self, max_count: int = 64, block_ms: int = 0) -> list[tuple[str, GameSamples]]:
        """Up to ``max_count`` games from the shards, starting at a shard that turns each
        call (so none starves); waits up to ``block_ms`` in all, shared over the shards,
        only when none has anything. Raises only when every shard failed."""
        if max_count < 1:
            raise ValueError(f"read: max_count must be >= 1, got {max_count}")
        if block_ms < 0:
            raise ValueError(f"read: block_ms must be >= 0, got {block_ms}")
        count = len(self.shards)
        start = self._next_read
        self._next_read = (start + 1) % count
        order = [(start + k) % count for k in range(count)]
        got, failed = self._read_round(order, max_count, 0)
        if not got and block_ms and len(failed) < count:
            per_shard = max(block_ms // (count - len(failed)), 1)
            got, again = self._read_round([k for k in order if k not in failed], max_count,
                                          per_shard, stop_at_first=True)
            failed |= again
        self.unread_shards = tuple(self._name(k) for k in sorted(failed))
        if not got and len(failed) == count:
            raise TransportError(f"every sample stream shard failed to read "
                                 f"({', '.join(self.unread_shards)})")
        return got

    def _read_round(self, order: list[int], max_count: int, block_ms: int,
                    stop_at_first: bool = False) -> tuple[list[tuple[str, GameSamples]], set[int]]:
        got: list[tuple[str, GameSamples]] = []
        failed: set[int] = set()
        for shard in order:
            if len(got) >= max_count:
                break
            try:
                entries = self.shards[shard].read(max_count - len(got), block_ms)
            except TransportError as err:
                failed.add(shard)
                self._failed(shard, "cannot be read, reading the others", err)
                continue
            self._recovered(shard)
            got.extend((f"{shard}{SEPARATOR}{i}", g) for i, g in entries)
            if got and stop_at_first:
                break
        return got, failed

    def ack(self, ids: list[str]) -> int:
        """Ack each id on its shard; every shard is tried before a failure is raised: a
        ``PartialAckError`` naming the failed shards' ids when others took theirs."""
        by_shard: dict[int, list[tuple[str, str]]] = collections.defaultdict(list)
        for entry_id in ids:
            shard, own = self._split(entry_id)
            by_shard[shard].append((entry_id, own))
        acked = 0
        failure: TransportError | None = None
        failed: list[str] = []
        for shard, pairs in sorted(by_shard.items()):
            try:
                acked += self.shards[shard].ack([own for _, own in pairs])
            except TransportError as err:
                self._failed(shard, "cannot ack (kept for later)", err)
                failure = failure or err
                failed += [entry_id for entry_id, _ in pairs]
        if failure is not None:
            if len(failed) < len(ids):
                raise PartialAckError(str(failure), failed)
            raise failure
        return acked

    def skip_through(self, cursor: str | None,
                     already: Callable[[str], bool] | None = None) -> None:
        """Each shard skips what the cursor's part for it covers (``already``: see
        ``SampleStream.skip_through``). ValueError for a cursor naming a shard this stream
        does not have (the run's shards were reduced)."""
        parts = parse_cursor(cursor)
        extra = sorted(k for k in parts if k >= len(self.shards))
        if extra:
            raise ValueError(f"the stream cursor {cursor!r} names shard {extra[0]}, but the "
                             f"run has {len(self.shards)} stream shards "
                             f"(distributed.stream_shards may grow during a run, not shrink)")
        for k, shard in enumerate(self.shards):
            shard.skip_through(parts.get(k), already)

    def recover_pending(self) -> None:
        for shard in self.shards:
            shard.recover_pending()

    def info(self) -> StreamInfo:
        """The shards' lengths, pending and lag summed; the ids as cursors (``K=ID,...``).
        A shard that cannot be asked counts with its last answer (one line when it starts
        failing); raises only when no shard answers."""
        infos = self.shard_infos()
        return StreamInfo(
            length=sum(i.length for i in infos), pending=sum(i.pending for i in infos),
            lag=sum(i.lag for i in infos),
            last_delivered_id=",".join(f"{k}={i.last_delivered_id}"
                                       for k, i in enumerate(infos)),
            last_generated_id=",".join(f"{k}={i.last_generated_id}"
                                       for k, i in enumerate(infos)))

    def shard_infos(self) -> list[StreamInfo]:
        """Each shard's own ``info`` in shard order (a failing shard's last answer, or
        zeros before it ever answered)."""
        failure: TransportError | None = None
        for k, shard in enumerate(self.shards):
            try:
                self._last_info[k] = shard.info()
                self._recovered(k)
            except TransportError as err:
                self._failed(k, "cannot be asked for its length", err)
                failure = failure or err
        if failure is not None and len(self._failing) == len(self.shards):
            raise failure
        return [self._last_info.get(k, StreamInfo(0, 0, 0, "0-0", "0-0"))
                for k in range(len(self.shards))]

    def trim(self) -> int:
        return sum(shard.trim() for shard in self.shards)  # type: ignore[attr-defined]

    def lag(self) -> int:
        return self.info().lag

    # --- internals -----------------------------------------------------------------------
    def _split(self, entry_id: str) -> tuple[int, str]:
        shard, own = split_id(entry_id)
        if shard >= len(self.shards) or own == entry_id:
            raise ValueError(f"entry id {entry_id!r} is not one of this stream's "
                             f"{len(self.shards)} shards")
        return shard, own

    def _failed(self, shard: int, what: str, err: TransportError) -> None:
        """Count a shard's failure; one log line when it starts failing, not one per call."""
        self.shard_errors[shard] += 1
        if shard not in self._failing:
            self._failing.add(shard)
            log.warning("sample stream shard %d (%s) %s: %s", shard, self._name(shard), what,
                        " ".join(str(err).split())[:200])

    def _recovered(self, shard: int) -> None:
        if shard in self._failing:
            self._failing.discard(shard)
            log.warning("sample stream shard %d (%s) works again", shard, self._name(shard))

    def _name(self, shard: int) -> str:
        return str(getattr(self.shards[shard], "key", f"shard {shard}"))
