"""One contract for every transport: the same tests against Redis (a real redis-server)
and the in-memory twin the local run uses. A service written against the Protocols in
``shared.transport.base`` may rely on exactly what is checked here."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace

import msgpack
import numpy as np
import pytest
import torch

from zeroforge.shared.formats import weights_to_bytes
from zeroforge.shared.pace import Pace
from zeroforge.shared.samples import GameSamples, decode, encode
from zeroforge.shared.transport import (
    AVERAGE_CHANNEL,
    BackpressureTimeout,
    FencedError,
    MemoryTransport,
    PaceSignal,
    RedisServer,
    RedisTransport,
    ResultsStore,
    SampleSink,
    SampleSource,
    ShardedSampleStream,
    StaleVersionError,
    StreamConfig,
    Transport,
    WeightSigner,
    WeightSink,
    WeightsIntegrityError,
    WeightsSignatureError,
    WeightVerifier,
    WriterCounts,
    advance_cursor,
    parse_cursor,
    parse_id,
    shard_of,
)

GAME = "gomoku:size=6,k=4"


def make_games(n: int, start: int = 0, plies: int = 6) -> list[GameSamples]:
    """``n`` 6x6-gomoku-shaped games with distinct ids and contents."""
    games = []
    for i in range(start, start + n):
        rng = np.random.default_rng(i)
        policy = rng.random((plies, 36)).astype(np.float32)
        policy /= policy.sum(axis=1, keepdims=True)
        games.append(GameSamples(
            game=GAME, game_version=1, obs=(rng.random((plies, 4, 6, 6)) < 0.2).astype(np.uint8),
            policy=policy, to_play=(np.arange(plies) % 2).astype(np.int8),
            outcome=int(rng.integers(-1, 2)), weights_version=2, run_id="r", worker_id="w0",
            game_id=f"g{i}"))
    return games


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with RedisServer() as server:
        yield server.url


SHARDS = 3
"""Stream shards of the sharded variants (``shared.transport.shards``)."""


def open_test_transport(request, kind: str) -> Transport:
    run_id = f"c-{uuid.uuid4().hex[:10]}"
    shards = SHARDS if kind.endswith("-sharded") else 1
    if kind.startswith("memory"):
        return MemoryTransport(run_id, stream_shards=shards)
    return RedisTransport(request.getfixturevalue("redis_url"), run_id, stream_shards=shards)


@pytest.fixture(params=["memory", "redis"])
def transport(request) -> Iterator[Transport]:
    """A fresh run's transport, in memory or over a real redis-server."""
    t = open_test_transport(request, request.param)
    yield t
    t.close()


@pytest.fixture(params=["memory", "redis", "memory-sharded", "redis-sharded"])
def streams(request) -> Iterator[Transport]:
    """As ``transport``, also with its sample stream in ``SHARDS`` shards: the sample
    stream's contract holds for one stream and for several."""
    t = open_test_transport(request, request.param)
    yield t
    t.close()


def shard_count(t: Transport) -> int:
    samples = t.samples()
    return len(samples.shards) if isinstance(samples, ShardedSampleStream) else 1


def one_shard_games(t: Transport, n: int, start: int = 0) -> list[GameSamples]:
    """``n`` games (ids from ``g{start}`` on) that all go to shard 0: within one shard the
    order and backlog promises are the stream's own, so a test of them means the same with
    one stream or several."""
    shards, games, i = shard_count(t), [], start
    while len(games) < n:
        if shard_of(f"g{i}", shards) == 0:
            games.extend(make_games(1, start=i))
        i += 1
    return games


def ids(entries) -> list[str]:
    return [g.game_id for _, g in entries]


def drain(source, batch: int = 4, ack: bool = True) -> list:
    out = []
    while got := source.read(batch):
        out.extend(got)
        if ack:
            source.ack([i for i, _ in got])
    return out


def test_endpoints_implement_the_protocols(streams):
    samples = streams.samples()
    assert isinstance(samples, SampleSink) and isinstance(samples, SampleSource)
    assert isinstance(streams.weights(), WeightSink)
    assert isinstance(streams.results(), ResultsStore)


def test_games_arrive_as_encoded_in_order_and_exactly_once(streams):
    sink, source = streams.samples(), streams.samples()
    games = one_shard_games(streams, 10)
    appended = sink.append(games[:6]) + sink.append(games[6:])
    got = drain(source)
    assert [i for i, _ in got] == appended
    assert ids(got) == [g.game_id for g in games]
    for (_, received), sent in zip(got, games, strict=True):
        # the transport carries the wire format: what arrives is what decode(encode) gives
        expect = decode(encode(sent))
        assert np.array_equal(received.obs, expect.obs)
        assert np.array_equal(received.policy, expect.policy)
        assert received.outcome == sent.outcome and received.weights_version == 2
    assert source.read(4) == []
    assert source.info().length == 0  # acked entries are trimmed


def test_games_of_every_shard_arrive_exactly_once(streams):
    """Games spread over the shards by id; each arrives once; within a shard, in order."""
    sink, source = streams.samples(), streams.samples()
    games = make_games(30)
    appended = sink.append(games[:17]) + sink.append(games[17:])
    got = drain(source, batch=7)
    assert sorted(i for i, _ in got) == sorted(appended)
    assert sorted(ids(got)) == sorted(g.game_id for g in games)
    shards = shard_count(streams)
    for k in range(shards):
        mine = [g for g in ids(got) if shard_of(g, shards) == k]
        assert mine == [g.game_id for g in games if shard_of(g.game_id, shards) == k]
        assert shards == 1 or mine  # 30 ids reach every one of 3 shards
    assert source.info().length == 0 and source.info().pending == 0


def test_a_restarted_reader_gets_its_unacknowledged_entries_back(streams):
    sink = streams.samples()
    games = one_shard_games(streams, 5)
    sink.append(games)
    first = streams.samples()
    taken = first.read(3)
    first.ack([taken[0][0]])
    # the reader "crashes"; a new one with the same consumer name takes over
    again = streams.samples()
    assert ids(drain(again)) == [g.game_id for g in games[1:]]


def test_the_checkpoint_cursor_skips_redelivered_entries(streams):
    streams.samples().append(make_games(12))
    first = streams.samples()
    taken = first.read(12)
    cursor = None
    for entry_id, _ in taken[:5]:  # the checkpoint holds the first five added
        cursor = advance_cursor(cursor, entry_id)
    again = streams.samples()
    again.skip_through(cursor)
    assert sorted(ids(drain(again))) == sorted(ids(taken[5:]))
    assert again.skipped_duplicates == 5


@pytest.mark.parametrize("shards", [1, SHARDS])
def test_a_new_memory_stream_goes_on_after_an_earlier_process_s_cursor(shards):
    """A local run resumed from its checkpoint: the cursor is from the stream of the
    process that wrote it, and this process's memory stream starts empty. Its games are
    all new, and their ids come after the cursor (as a new Redis stream's time-based ids
    do), so the next checkpoint's cursor moves on. Ids restarting at 1 had every game up
    to the cursor's number dropped as already in the window."""
    earlier = MemoryTransport("resumed", stream_shards=shards)
    earlier.samples().append(make_games(40))
    cursor = None
    for entry_id, _ in drain(earlier.samples()):
        cursor = advance_cursor(cursor, entry_id)
    now = MemoryTransport("resumed", stream_shards=shards)
    source = now.samples()
    source.skip_through(cursor)
    now.samples().append(make_games(6, start=40))
    got = drain(source)
    assert sorted(ids(got)) == [f"g{i}" for i in range(40, 46)]
    assert source.skipped_duplicates == 0
    later = cursor
    for entry_id, _ in got:
        later = advance_cursor(later, entry_id)
    before, after = parse_cursor(cursor), parse_cursor(later)
    moved = [k for k in after if parse_id(after[k]) > parse_id(before.get(k, "0-0"))]
    assert sorted(moved) == sorted({shard_of(f"g{i}", shards) for i in range(40, 46)})


def test_deliveries_whose_reply_was_lost_are_recovered(streams):
    """The server may deliver entries (into this consumer's pending list) while the reply
    is lost with the connection; a plain read asks only for new entries and would leave
    them unread until a restart. ``recover_pending`` gets them, and only them."""
    sink, source = streams.samples(), streams.samples()
    games = one_shard_games(streams, 5)
    sink.append(games[:2])
    assert ids(source.read(4)) == [g.game_id for g in games[:2]]
    sink.append(games[2:])
    ghost = streams.samples()  # the same consumer name: its deliveries are "lost replies"
    names = [g.game_id for g in games]
    assert ids(ghost.read(4)) == names[:2]  # its pending history first
    assert ids(ghost.read(4)) == names[2:]
    assert source.read(4) == []  # delivered, so not new: without recovery they wait
    source.recover_pending()
    assert ids(drain(source)) == names[2:]  # the first two were handed out already
    assert source.info().pending == 2  # the first two: the caller has not acked them


def test_two_consumers_share_the_work_without_overlap(streams):
    streams.samples().append(make_games(8))
    a = streams.samples(StreamConfig(consumer="a"))
    b = streams.samples(StreamConfig(consumer="b"))
    got_a, got_b = a.read(3), b.read(8)
    assert len(got_a) == 3 and len(got_b) == 5
    assert set(ids(got_a)).isdisjoint(ids(got_b))


def test_bad_entries_are_rejected_by_reason_and_reading_goes_on(streams):
    sink, source = streams.samples(), streams.samples(StreamConfig(max_entry_bytes=20_000))
    good = one_shard_games(streams, 2)
    sink.append(good[:1])
    sink.append_raw([b"\xc1not msgpack", None, b"\x00" * 30_000])
    sink.append(good[1:])
    assert ids(drain(source)) == [g.game_id for g in good]
    assert source.rejected == {"not_msgpack": 1, "no_data": 1, "oversized": 1}
    assert source.info().pending == 0  # rejected entries are acked, never re-delivered


def test_an_oversized_game_is_refused_and_nothing_is_written(streams):
    sink = streams.samples(StreamConfig(max_entry_bytes=500))
    with pytest.raises(ValueError, match="entry limit"):
        sink.append(make_games(2))
    assert sink.info().length == 0


def games_filling_every_shard(t: Transport, per_shard: int) -> list[GameSamples]:
    """Games that put ``per_shard`` entries on every shard of ``t``'s stream."""
    shards, counts, games, i = shard_count(t), Counter(), [], 0
    while len(games) < per_shard * shards:
        k = shard_of(f"g{i}", shards)
        if counts[k] < per_shard:
            counts[k] += 1
            games.extend(make_games(1, start=i))
        i += 1
    return games


def test_backpressure_waits_then_times_out_writing_nothing(streams):
    """A full stream (with shards: every shard full, for a full shard's games go to the
    next one with room) makes ``append`` wait, then time out having written nothing."""
    config = StreamConfig(max_backlog=3, append_timeout_s=0.3)
    sink, source = streams.samples(config), streams.samples(config)
    full = games_filling_every_shard(streams, 3)
    sink.append(full)
    extra = make_games(2, start=1000)
    start = time.monotonic()
    with pytest.raises(BackpressureTimeout):
        sink.append(extra)
    assert time.monotonic() - start >= 0.25
    assert sink.info().length == len(full)
    # the learner catches up from another thread: the waiting append goes through
    def consume():
        time.sleep(0.1)
        source.ack([i for i, _ in source.read(len(full))])

    helper = threading.Thread(target=consume)
    helper.start()
    assert len(sink.append(extra[:1], timeout_s=5)) == 1
    helper.join()


def shard_lengths(t: Transport, config: StreamConfig) -> list[int]:
    """Each shard's length (one stream: its length)."""
    samples = t.samples(config)
    if isinstance(samples, ShardedSampleStream):
        return [info.length for info in samples.shard_infos()]
    return [samples.info().length]


def test_concurrent_appends_never_take_the_backlog_past_its_bound(streams):
    """The bound is hard: producers racing into a nearly full stream (each shard nearly
    full) never leave more than ``max_backlog`` entries in it. (A length check followed by
    a separate append let each of them overshoot by its batch: 8 x 2 games past 7 of 10.)
    Nothing is read, so the final length is the largest the stream ever held."""
    config = StreamConfig(max_backlog=10, append_timeout_s=0.3)
    streams.samples(config).append(games_filling_every_shard(streams, 7))
    producers, outcomes = 8, []
    start = threading.Barrier(producers)

    def produce(k: int) -> None:
        sink = streams.samples(config)
        start.wait()
        for batch in range(3):
            try:
                sink.append(make_games(2, start=1000 + 100 * k + 2 * batch))
                outcomes.append("in")
            except BackpressureTimeout:
                outcomes.append("timed out")

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert max(shard_lengths(streams, config)) <= config.max_backlog
    assert {"in", "timed out"} <= set(outcomes), outcomes


def test_a_batch_larger_than_the_bound_goes_in_alone_into_an_empty_stream(streams):
    """Else it could never go in; the stream then holds it alone, and waits to be drained."""
    config = StreamConfig(max_backlog=2, append_timeout_s=0.2)
    sink = streams.samples(config)
    assert len(sink.append(one_shard_games(streams, 5))) == 5
    assert shard_lengths(streams, config)[0] == 5
    if shard_count(streams) == 1:  # (with shards, the next game goes to an empty one)
        with pytest.raises(BackpressureTimeout):
            sink.append(one_shard_games(streams, 1, start=500))
        assert sink.info().length == 5


def blocked_append(sink, games: list[GameSamples]) -> tuple[threading.Thread, list[str]]:
    """A thread appending ``games`` to ``sink`` (started), and the ids it got."""
    appended: list[str] = []
    thread = threading.Thread(target=lambda: appended.extend(sink.append(games)))
    thread.start()
    return thread, appended


def test_a_waiting_append_is_woken_by_the_ack_that_makes_room_not_by_polling(streams):
    """It waits ~1 s with its own checks 5 s apart: the learner's ack wakes it at once, and
    it checked for room about once (a 50 ms poll made ~20 checks, each a script run)."""
    config = StreamConfig(max_backlog=3, append_timeout_s=30, room_check_interval_s=5.0)
    sink, source = streams.samples(config), streams.samples(config)
    full = games_filling_every_shard(streams, 3)
    sink.append(full)
    blocked, appended = blocked_append(sink, make_games(1, start=1000))
    blocked.join(1.0)
    assert blocked.is_alive() and not appended, "appended past max_backlog"
    acked_at = time.monotonic()
    source.ack([i for i, _ in source.read(len(full))])
    blocked.join(10)
    woke_after = time.monotonic() - acked_at
    assert len(appended) == 1
    assert woke_after < 2.0, f"woken {woke_after:.2f} s after the ack"  # fallback: >= 3.75 s
    assert 1 <= sink.room_checks <= 3
    assert sink.backpressure_wait_s >= 0.9


def test_writer_counts_are_the_calling_threads_own(streams):
    """A host's worker threads may share one sink: the thread whose append waited for room
    sees that wait in its ``writer_counts``, the thread that filled the stream without
    waiting sees none; a healthy stream resends and reroutes nothing."""
    config = StreamConfig(max_backlog=3, append_timeout_s=30, room_check_interval_s=0.2)
    sink, source = streams.samples(config), streams.samples(config)
    assert sink.writer_counts() == WriterCounts()
    full = games_filling_every_shard(streams, 3)
    sink.append(full)
    counted: list[WriterCounts] = []

    def append_and_count() -> None:
        sink.append(make_games(1, start=1000))
        counted.append(sink.writer_counts())

    waiter = threading.Thread(target=append_and_count)
    waiter.start()
    waiter.join(0.8)
    assert waiter.is_alive(), "appended past max_backlog"
    source.ack([i for i, _ in source.read(len(full))])
    waiter.join(10)
    (theirs,) = counted
    assert 0.7 <= theirs.backpressure_wait_s < 10
    assert (theirs.resent, theirs.rerouted) == (0, 0)
    assert sink.writer_counts() == WriterCounts()


def test_a_waiting_append_finds_room_at_its_fallback_check_when_no_wake_up_comes(streams):
    """Correctness never rests on the wake-up: a reader that acks and trims without waking
    anyone (``notify_room`` off: as a lost notification) still lets the append through, at
    its next check ``room_check_interval_s`` later."""
    config = StreamConfig(max_backlog=3, append_timeout_s=30, room_check_interval_s=0.4)
    sink = streams.samples(config)
    silent = streams.samples(replace(config, notify_room=False))
    full = games_filling_every_shard(streams, 3)
    sink.append(full)
    blocked, appended = blocked_append(sink, make_games(1, start=1000))
    blocked.join(1.0)
    assert blocked.is_alive() and not appended, "appended past max_backlog"
    checks_before = sink.room_checks
    assert checks_before >= 1  # it looked by itself meanwhile, every 0.3-0.4 s
    silent.ack([i for i, _ in silent.read(len(full))])
    blocked.join(10)
    assert len(appended) == 1
    assert sink.room_checks > checks_before


def test_unacknowledged_entries_are_never_trimmed(streams):
    sink, source = streams.samples(), streams.samples()
    sink.append(one_shard_games(streams, 6))
    got = source.read(4)
    source.ack([got[1][0], got[3][0]])
    info = source.info()
    # trimming stops at the oldest unacknowledged entry (the first): all six are held
    assert info.length == 6 and info.pending == 2
    # (``lag`` is exact in memory and on Redis >= 7; Redis 6.2 estimates it)
    source.ack([got[0][0], got[2][0]])
    assert source.info().length == 2  # the last two: never delivered


@pytest.fixture
def weights() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return {"a.weight": torch.randn(4, 3), "a.bias": torch.randn(4),
            "bn.num_batches_tracked": torch.tensor(7)}


def test_weights_round_trip_exactly_and_only_when_newer(transport, weights):
    store = transport.weights()
    assert store.latest_version() is None and store.fetch() is None
    store.publish(weights, 0)
    version, got = store.fetch(newer_than=-1)
    assert version == 0 and got.keys() == weights.keys()
    assert all(torch.equal(got[k], weights[k]) for k in weights)
    assert store.fetch(newer_than=0) is None
    store.publish(weights_to_bytes(weights), 1)  # a ready blob is accepted too
    assert store.fetch(newer_than=0)[0] == 1


def test_versions_only_go_up_and_old_ones_are_pruned(transport, weights):
    store = transport.weights(keep=2)
    for v in (1, 2, 5):
        store.publish(weights, v)
    with pytest.raises(StaleVersionError):
        store.publish(weights, 5)
    with pytest.raises(StaleVersionError):
        store.publish(weights, 3)
    assert store.versions() == [2, 5] and store.latest_version() == 5
    with pytest.raises(ValueError, match="not a weights blob"):
        store.publish(b"garbage", 6)


def test_new_versions_are_announced(transport, weights):
    store = transport.weights()
    with store.subscribe() as sub:
        assert sub.poll(0.05) is None
        store.publish(weights, 1)
        store.publish(weights, 2)
        assert sub.poll(2.0) == 2
    waiter = threading.Thread(target=lambda: (time.sleep(0.1), store.publish(weights, 3)))
    waiter.start()
    assert store.wait_for_version(3, timeout_s=5) == 3
    waiter.join()
    assert store.wait_for_version(9, timeout_s=0.1) is None


def test_results_and_best_weights_round_trip(transport, weights):
    results = transport.results()
    assert results.latest() is None and results.best() is None
    results.put({"weights_version": 1, "anchors": {"random": {"score": 0.5}}})
    results.put({"weights_version": 2, "anchors": {}})
    assert results.latest()["weights_version"] == 2
    assert [r["weights_version"] for r in results.history()] == [2, 1]
    blob = weights_to_bytes(weights)
    results.put_best(2, blob)
    assert results.best() == (2, blob)


def test_a_corrupt_weights_blob_is_detected(transport, weights):
    """Corruption inside the store (disk, memory, a bad actor with the password) is caught
    by the sha256 recorded at publish time."""
    store = transport.weights()
    store.publish(weights, 1)
    if isinstance(transport, MemoryTransport):
        blob, info = store._data.blobs[1]
        store._data.blobs[1] = (blob[:-1] + bytes([blob[-1] ^ 1]), info)
    else:
        key = store.key(1)
        blob = transport.redis.get(key)
        transport.redis.set(key, blob[:-1] + bytes([blob[-1] ^ 1]))
    with pytest.raises(WeightsIntegrityError):
        store.fetch()


def test_a_verifying_reader_takes_only_what_the_learner_signed(transport, weights):
    """A writer of the run's store without the learner's key (anyone with write access to
    the run's Redis) cannot make a verifying reader take its weights, signed with another
    key or not at all; the learner's next version is taken as ever."""
    key, forger = WeightSigner.generate(), WeightSigner.generate()
    learner = transport.weights(signer=key)
    reader = transport.weights(verifier=WeightVerifier(key.public_key))
    learner.publish(weights, 1)
    assert reader.fetch()[0] == 1 and reader.info(1).signature
    transport.weights(signer=forger).publish(weights, 2)
    with pytest.raises(WeightsSignatureError, match="version 2 of run .*another key") as err:
        reader.fetch(newer_than=1)
    assert (err.value.version, err.value.reason) == (2, "bad_signature")
    assert isinstance(err.value, WeightsIntegrityError)  # readers already skip those
    transport.weights().publish(weights, 3)
    with pytest.raises(WeightsSignatureError, match="version 3 of run .*unsigned") as err:
        reader.fetch(newer_than=1)
    assert (err.value.version, err.value.reason) == (3, "unsigned")
    assert transport.weights().fetch(newer_than=2)[0] == 3  # no verifier: an unsigned run
    learner.publish(weights, 4)
    version, got = reader.fetch(newer_than=1)
    assert version == 4 and all(torch.equal(got[k], weights[k]) for k in weights)


def test_the_average_channel_has_its_own_versions_and_its_signatures_bind_it(transport,
                                                                           weights):
    """The averaged weights' channel (``AVERAGE_CHANNEL``) beside self-play's: versions,
    blobs and announcements of each are their own, and a version the learner signed for
    one channel is refused on the other (copied there by anyone with write access)."""
    key = WeightSigner.generate()
    play, average = (transport.weights(signer=key, channel=c) for c in ("", AVERAGE_CHANNEL))
    other = {k: v + 1 if v.is_floating_point() else v for k, v in weights.items()}
    with average.subscribe() as sub:
        play.publish(weights, 1)
        play.publish(weights, 2)
        assert sub.poll(0.2) is None  # self-play's publishes are not announced on it
        average.publish(other, 2)
        assert sub.poll(2.0) == 2
    assert (play.latest_version(), average.latest_version()) == (2, 2)
    assert play.versions() == [1, 2] and average.versions() == [2]
    got = transport.weights(channel=AVERAGE_CHANNEL).fetch()
    assert got is not None and got[0] == 2
    assert all(torch.equal(got[1][k], other[k]) for k in other)
    assert torch.equal(transport.weights().fetch()[1]["a.bias"], weights["a.bias"])
    # the average's record and blob of version 2, copied over self-play's version 2
    if isinstance(transport, MemoryTransport):
        play._data.blobs[2] = average._data.blobs[2]
    else:
        for suffix in ("", ":meta"):
            transport.redis.copy(average.key(2) + suffix, play.key(2) + suffix, replace=True)
    reader = transport.weights(verifier=WeightVerifier(key.public_key))
    with pytest.raises(WeightsSignatureError, match="version 2 of run"):
        reader.fetch(newer_than=1)
    with pytest.raises(ValueError, match="weights channel must be one of"):
        transport.weights(channel="best")


# --- the learner's pace ----------------------------------------------------------------------
def _pace(ratio: float = 3.5, trainable: bool = True) -> Pace:
    return Pace(samples_per_insert=ratio, target=16.0, tolerance=0.25, trainable=trainable)


def _put_raw(transport: Transport, signal, blob: bytes) -> None:
    """Something this code did not write in the pace slot (another program, a bug)."""
    if isinstance(transport, MemoryTransport):
        signal._data.blob, signal._data.expires = blob, time.monotonic() + 60
    else:
        transport.redis.set(signal.key, blob, ex=60)


def test_pace_round_trips_to_every_reader_and_clears(transport):
    signal = transport.pace()
    assert isinstance(signal, PaceSignal)
    assert signal.read() is None  # nothing published yet: not throttled
    signal.publish(_pace(3.5))
    assert transport.pace().read() == _pace(3.5)  # another reader of the run sees it
    signal.publish(_pace(12.25, trainable=False))  # a publish replaces the last one
    assert signal.read() == _pace(12.25, trainable=False)
    signal.clear()
    assert signal.read() is None and transport.pace().read() is None
    assert signal.malformed == 0


def _other_run(transport: Transport) -> Transport:
    """The same kind of transport, to the same store, for another run id."""
    if isinstance(transport, MemoryTransport):
        return MemoryTransport(transport.run_id + "-b")
    return RedisTransport(transport.url, transport.run_id + "-b")


def test_paces_of_two_runs_are_apart(transport):
    other = _other_run(transport)
    try:
        transport.pace().publish(_pace(1.0))
        assert other.pace().read() is None
    finally:
        other.close()


def test_pace_expires_unless_published_again(transport):
    with pytest.raises(ValueError, match="ttl_s must be > 0"):
        transport.pace(ttl_s=0)
    short = transport.pace(ttl_s=0.3)
    short.publish(_pace())
    assert short.read() == _pace()
    deadline = time.monotonic() + 10
    while short.read() is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert short.read() is None  # expired: a dead learner leaves no worker paused
    # A publish renews the whole lifetime: published at 0 and at 0.8 s with a 1.5 s TTL,
    # the pace is still there at 1.7 s (it would have expired at 1.5 s otherwise).
    renewed = transport.pace(ttl_s=1.5)
    first = time.monotonic()
    renewed.publish(_pace(1.0))
    while time.monotonic() - first < 0.8:
        time.sleep(0.05)
    renewed.publish(_pace(2.0))
    while time.monotonic() - first < 1.7:
        time.sleep(0.05)
    assert renewed.read() == _pace(2.0)


def test_a_bad_pace_reads_as_absent_is_counted_and_logged_once(transport, caplog):
    signal = transport.pace()
    bad = [b"\xc1garbage", msgpack.packb([1, 2]), msgpack.packb({"format": 99}),
           msgpack.packb({"format": 1, "samples_per_insert": 1.0, "target": 4.0,
                          "tolerance": 2.0, "trainable": True})]
    with caplog.at_level(logging.WARNING):
        for blob in bad:
            _put_raw(transport, signal, blob)
            assert signal.read() is None
    assert signal.malformed == len(bad)
    lines = [r for r in caplog.records if "pace signal" in r.getMessage()]
    assert len(lines) == 1 and "not msgpack" in lines[0].getMessage()
    signal.publish(_pace(5.0))  # a good pace reads again, and a new bad one logs again
    assert signal.read() == _pace(5.0)
    _put_raw(transport, signal, b"\xc1")
    with caplog.at_level(logging.WARNING):
        assert signal.read() is None
    assert len([r for r in caplog.records if "pace signal" in r.getMessage()]) == 2
    assert signal.malformed == len(bad) + 1
    if isinstance(transport, RedisTransport):
        # a key of another type (WRONGTYPE) is bad content too, never a crash
        transport.redis.delete(signal.key)
        transport.redis.hset(signal.key, "a", "b")
        assert signal.read() is None and signal.malformed == len(bad) + 2


# --- the controller's saved state --------------------------------------------------------
def _control_state(seq: int) -> dict:
    """A state shaped like ``Controller.controller_state()`` (maps with int keys, lists,
    floats, None, nested reports)."""
    return {"seq": seq, "state": "running", "desired": {"selfplay": 3, "learner": 1},
            "restarts": {"selfplay": 1}, "clock_from_wall": None,
            "crashes": {"selfplay": [1.7e9 + 0.25]}, "final_reports": {},
            "slots": [{"kind": "selfplay", "index": 0, "last_stats": {"games": 12.0},
                       "workers": [[0, 12, 90]]}], "by_index": {3: "three"},
            # the counter floors' keys (``shared.metrics.Series``): tuples, kept as tuples
            "guard": {"_values": {("games_total", (("worker", "3"),)): 12.0,
                                  ("learner_steps_total", ()): 7.0}}}


def test_control_state_round_trips_to_a_new_reader_and_clears(transport):
    store = transport.control_state()
    assert store.load() is None  # never saved: a new driver adopts without floors
    before = time.time()
    store.save(_control_state(1))
    store.save(_control_state(2))  # a save replaces the last one
    loaded = transport.control_state().load()  # another reader of the run sees it
    assert loaded is not None and loaded.state == _control_state(2)
    assert before - 1 <= loaded.saved <= time.time() + 1 and loaded.age_s < 60
    store.clear()
    assert store.load() is None and store.malformed == 0


def test_a_controller_replaced_saves_and_clears_nothing(transport):
    """A controller's store claims an epoch; once a newer controller of the run has
    claimed one, the older one's save and clear are refused in one line naming both
    epochs and change nothing, and the newer one saves on. A store that never claimed
    (a driver reading the state to re-attach) is not fenced."""
    old = transport.control_state()
    epoch = old.claim()
    old.save(_control_state(1))
    new = successor_of(transport).control_state()
    newer = new.claim()
    assert newer > epoch
    new.save(_control_state(2))
    refused = (f"this controller holds epoch {epoch}, a newer controller of the run took "
               f"epoch {newer}")
    with pytest.raises(FencedError, match=refused):
        old.save(_control_state(3))
    with pytest.raises(FencedError, match=refused):
        old.clear()
    reader = transport.control_state()  # never claimed: reads, and is not refused
    loaded = reader.load()
    assert loaded is not None and loaded.state == _control_state(2)
    new.save(_control_state(4))
    assert reader.load().state == _control_state(4)
    new.clear()
    assert reader.load() is None


def test_control_states_of_two_runs_are_apart(transport):
    other = _other_run(transport)
    try:
        transport.control_state().save(_control_state(1))
        assert other.control_state().load() is None
    finally:
        other.close()


def test_a_bad_control_state_loads_as_absent_and_is_counted(transport, caplog):
    store = transport.control_state()
    bad = [b"\xc1garbage", msgpack.packb([1, 2]), msgpack.packb({"v": 99, "state": {}}),
           msgpack.packb({"v": 1, "saved": "yesterday", "state": {}})]
    with caplog.at_level(logging.WARNING):
        for blob in bad:
            if isinstance(transport, MemoryTransport):
                store._data.blob = blob
            else:
                transport.redis.set(store.key, blob)
            assert store.load() is None
    assert store.malformed == len(bad)
    assert len([r for r in caplog.records if "control state" in r.getMessage()]) == len(bad)
    if isinstance(transport, RedisTransport):
        transport.redis.delete(store.key)
        transport.redis.hset(store.key, "a", "b")  # WRONGTYPE: bad content, never a crash
        assert store.load() is None and store.malformed == len(bad) + 1


# --- fencing -------------------------------------------------------------------------------
def successor_of(t: Transport) -> Transport:
    """The transport of the run's next learner: over Redis its own connections (another
    process), in memory the same data (the endpoints ``t`` handed out keep their epoch)."""
    if isinstance(t, MemoryTransport):
        return t
    return RedisTransport(t.url, t.run_id, stream_shards=shard_count(t))


def test_a_fenced_off_learner_acks_publishes_and_paces_nothing(streams, weights):
    """Once a newer learner has taken an epoch, every write of the older one is refused
    in one line naming both epochs, changes nothing, and the newer learner gets the
    older one's unacknowledged entries back and writes on."""
    t = streams
    epoch = t.take_epoch()
    stream, store, pace = t.samples(), t.weights(), t.pace()
    stream.append(make_games(6))
    got = drain(stream, ack=False)
    assert len(got) == 6
    stream.ack([got[0][0], got[1][0]])
    store.publish(weights, 1)
    pace.publish(_pace(1.0))

    successor = successor_of(t)
    newer = successor.take_epoch()
    assert newer > epoch
    refused = f"this learner holds epoch {epoch}, a newer learner of the run took epoch {newer}"
    with pytest.raises(FencedError, match=refused):
        stream.ack([i for i, _ in got[2:]])
    with pytest.raises(FencedError, match=refused):
        store.publish(weights, 2)
    with pytest.raises(FencedError, match=refused):
        pace.publish(_pace(9.0))
    with pytest.raises(FencedError, match=refused):
        pace.clear()
    assert store.latest_version() == 1 and pace.read() == _pace(1.0)

    taken = drain(successor.samples())  # the same consumer name: the four left pending
    assert sorted(g.game_id for _, g in taken) == sorted(g.game_id for _, g in got[2:])
    successor.weights().publish(weights, 2)
    successor.pace().publish(_pace(2.0))
    assert successor.weights().latest_version() == 2 and successor.pace().read() == _pace(2.0)
    assert successor.samples().info().pending == 0
    if successor is not t:
        successor.close()


def test_endpoints_without_an_epoch_are_not_fenced(transport, weights):
    """Workers, the evaluator and tools take no epoch: a learner's fence does not stop them."""
    before = transport.weights()
    successor_of(transport).take_epoch()
    before.publish(weights, 1)
    transport.samples().append(make_games(2))
    assert len(drain(transport.samples())) == 2
