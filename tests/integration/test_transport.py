"""The Redis transport against a real redis-server: server, sample stream, weight store."""

from __future__ import annotations

import gc
import logging
import socket
import threading
import time

import msgpack
import numpy as np
import pytest
import redis
import torch

from zeroforge.shared.formats import weights_to_bytes
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import build_net
from zeroforge.shared.samples import EntryLimits, GameSamples, encode
from zeroforge.shared.transport import (
    BINARY_ENV,
    PASSWORD_ENV,
    BackpressureTimeout,
    RedisServer,
    RedisServerConfig,
    RedisServerError,
    SampleStream,
    StaleVersionError,
    StreamConfig,
    TransportError,
    WeightsIntegrityError,
    WeightStore,
    connect,
    free_port,
    room_blockers,
)

GOMOKU = "gomoku:size=15,k=5"


def make_games(n: int, start: int = 0, t: int = 12) -> list[GameSamples]:
    """``n`` gomoku-shaped games with distinct ids and contents."""
    games = []
    for i in range(start, start + n):
        rng = np.random.default_rng(i)
        policy = np.zeros((t, 225), np.float32)
        for row in policy:
            top = rng.choice(225, 8, replace=False)
            row[top] = rng.random(8)
            row /= row.sum()
        games.append(GameSamples(
            game=GOMOKU, game_version=1,
            obs=(rng.random((t, 4, 15, 15)) < 0.1).astype(np.uint8),
            policy=policy, to_play=(np.arange(t) % 2).astype(np.int8),
            outcome=int(rng.integers(-1, 2)), weights_version=3, run_id="r",
            worker_id="w0", game_id=f"g{i}"))
    return games


def drain(stream: SampleStream, batch: int = 7, ack: bool = True) -> list[tuple[str, GameSamples]]:
    out = []
    while got := stream.read(batch):
        out += got
        if ack:
            stream.ack([i for i, _ in got])
    return out


# --- the server ---------------------------------------------------------------------------

def test_server_requires_a_password_and_binds_loopback(redis_server, redis_client):
    # A raw client that never authenticates: Redis itself must refuse it.
    with socket.create_connection(("127.0.0.1", redis_server.port), timeout=2) as sock:
        sock.sendall(b"PING\r\n")
        assert sock.recv(100).startswith(b"-NOAUTH")
    assert redis_client.config_get("bind") == {"bind": "127.0.0.1"}
    assert redis_client.config_get("protected-mode") == {"protected-mode": "yes"}
    assert redis_client.config_get("save") == {"save": ""}
    assert redis_server.url == (f"redis://:{redis_server.password}@127.0.0.1:"
                                f"{redis_server.port}/0")
    assert redis_server.password not in repr(redis_server)


def test_connect_needs_a_password_from_url_or_env(redis_server, monkeypatch):
    bare = f"redis://127.0.0.1:{redis_server.port}/0"
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    with pytest.raises(TransportError, match="no password for Redis at 127.0.0.1"):
        connect(bare)
    monkeypatch.setenv(PASSWORD_ENV, redis_server.password)
    assert connect(bare).ping()
    monkeypatch.setenv(PASSWORD_ENV, "not-the-password")
    with pytest.raises(TransportError, match="rejected our credentials"):
        connect(bare)


def test_dead_redis_is_a_one_line_transport_error():
    server = RedisServer().start()
    client = connect(server.url)
    stream = SampleStream(client, "dead")
    store = WeightStore(client, "dead")
    port = server.port
    server.stop()
    assert not server.running
    expected = f"cannot reach Redis at 127.0.0.1:{port}: Connection refused"
    for call in (lambda: stream.append(make_games(1)), lambda: stream.read(1),
                 store.latest_version, lambda: connect(f"redis://:pw@127.0.0.1:{port}/0")):
        with pytest.raises(TransportError) as info:
            call()
        assert str(info.value) == expected


def test_server_start_failure_quotes_its_log(redis_server):
    taken = RedisServerConfig(port=redis_server.port, startup_timeout_s=5)
    with pytest.raises(RedisServerError, match="exited with code 1.*(in use|bind)"):
        RedisServer(taken).start()


def test_binary_override_is_checked(monkeypatch, tmp_path):
    monkeypatch.setenv(BINARY_ENV, str(tmp_path / "no-such-redis"))
    with pytest.raises(RedisServerError, match="ZEROFORGE_REDIS_SERVER.*not an executable"):
        RedisServer()


def test_aof_keeps_data_across_a_restart(tmp_path):
    config = RedisServerConfig(data_dir=str(tmp_path), password="pw-aof", port=free_port())
    with RedisServer(config) as server:
        SampleStream(connect(server.url), "durable").append(make_games(2))
    with RedisServer(config) as server:
        games = drain(SampleStream(connect(server.url), "durable"))
    assert [g.game_id for _, g in games] == ["g0", "g1"]


# --- the sample stream --------------------------------------------------------------------

def test_append_read_ack_round_trip(redis_client, run_id):
    stream = SampleStream(redis_client, run_id)
    sent = make_games(3, t=90)
    ids = stream.append(sent)
    assert len(ids) == 3 and ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))
    got = stream.read(10)
    assert [i for i, _ in got] == ids
    for want, (_, back) in zip(sent, got, strict=True):
        np.testing.assert_array_equal(back.obs, want.obs)
        np.testing.assert_array_equal(back.policy, want.policy.astype(np.float16))
        np.testing.assert_array_equal(back.to_play, want.to_play)
        assert (back.game, back.outcome, back.game_id, back.weights_version) == (
            want.game, want.outcome, want.game_id, 3)
    assert stream.info().pending == 3
    assert stream.ack(ids) == 3
    info = stream.info()
    assert (info.length, info.pending, info.lag) == (0, 0, 0)
    assert info.last_delivered_id == ids[-1] == info.last_generated_id
    assert stream.read(10) == []


def test_every_game_is_read_exactly_once(redis_client, run_id):
    stream = SampleStream(redis_client, run_id)
    for start in range(0, 60, 20):
        stream.append(make_games(20, start, t=3))
    got = drain(stream)
    assert sorted(g.game_id for _, g in got) == sorted(f"g{i}" for i in range(60))
    assert stream.info().length == 0


def test_two_consumers_get_disjoint_entries(redis_client, run_id):
    a = SampleStream(redis_client, run_id, StreamConfig(consumer="a"))
    b = SampleStream(redis_client, run_id, StreamConfig(consumer="b"))
    a.append(make_games(30, t=2))
    seen = {"a": [], "b": []}
    while True:
        got_a, got_b = a.read(4), b.read(4)
        if not got_a and not got_b:
            break
        seen["a"] += [g.game_id for _, g in got_a]
        seen["b"] += [g.game_id for _, g in got_b]
    assert seen["a"] and seen["b"] and not set(seen["a"]) & set(seen["b"])
    assert sorted(seen["a"] + seen["b"]) == sorted(f"g{i}" for i in range(30))


def test_a_crashed_reader_gets_its_pending_entries_back(redis_client, run_id):
    stream = SampleStream(redis_client, run_id)
    stream.append(make_games(5, t=2))
    before = stream.read(3)  # delivered, then the reader "dies" without acking
    stream.append(make_games(2, 5, t=2))
    again = SampleStream(redis_client, run_id)  # same consumer name, as after a restart
    got = drain(again, batch=2)
    assert [i for i, _ in got[:3]] == [i for i, _ in before]
    assert [g.game_id for _, g in got] == [f"g{i}" for i in range(7)]
    assert again.info().pending == 0


def test_entries_whose_delivery_reply_was_lost_come_back_after_newer_ones(
        redis_client, run_id):
    """A read that Redis served but whose reply never arrived (a connection dropped, Redis
    killed mid-reply) leaves its entries pending for our consumer unseen; the next reads
    return newer entries. Once everything handed out is acked, ``recover_pending`` must
    return the unseen ones, although newer ids were handed out before them. (Skipping every
    pending id up to the newest handed out, as before 2026-12-02, lost them: 7 games in
    the heavy-load soak.)"""
    stream = SampleStream(redis_client, run_id)
    assert stream.read(8) == []  # its start-up look at its own pending entries is done
    stream.append(make_games(3, t=2))
    # the lost reply: the same group and consumer name, served to no one
    served = redis_client.xreadgroup(stream.config.group, stream.config.consumer,
                                     {stream.key: ">"}, count=3)
    assert len(served[0][1]) == 3
    stream.append(make_games(2, 3, t=2))
    newer = drain(stream, batch=8)
    assert [g.game_id for _, g in newer] == ["g3", "g4"]
    stream.recover_pending()  # what the learner does once everything it holds is acked
    back = drain(stream, batch=8)
    assert sorted(g.game_id for _, g in back) == ["g0", "g1", "g2"]
    assert stream.info().pending == 0


def test_a_successor_gets_lost_reply_entries_below_its_cursor_back(redis_client, run_id):
    """The same lost reply, then the reader dies before it looked again; its successor
    restores a cursor above those entries. With the checkpoint's game ids
    (``skip_through(cursor, already)``) it skips only the games the checkpoint holds and
    returns the ones it never saw; with the cursor alone they were dropped for good."""
    stream = SampleStream(redis_client, run_id)
    assert stream.read(8) == []
    stream.append(make_games(3, t=2))
    redis_client.xreadgroup(stream.config.group, stream.config.consumer,
                            {stream.key: ">"}, count=3)  # served to no one
    stream.append(make_games(2, 3, t=2))
    held = stream.read(8)  # g3, g4: in the checkpoint, not acked, then the reader dies
    assert [g.game_id for _, g in held] == ["g3", "g4"]
    successor = SampleStream(redis_client, run_id)
    successor.skip_through(held[-1][0], {"g3", "g4"}.__contains__)
    back = drain(successor, batch=8)
    assert sorted(g.game_id for _, g in back) == ["g0", "g1", "g2"]
    assert successor.skipped_duplicates == 2 and successor.info().pending == 0


def test_checkpoint_cursor_prevents_double_counting(redis_client, run_id):
    stream = SampleStream(redis_client, run_id)
    stream.append(make_games(6, t=2))
    got = stream.read(6)
    cursor = got[3][0]  # the learner checkpointed after adding four games, then crashed
    again = SampleStream(redis_client, run_id)
    again.skip_through(cursor)
    back = drain(again)
    assert [g.game_id for _, g in back] == ["g4", "g5"]
    assert again.skipped_duplicates == 4
    assert again.info().length == 0  # the skipped ones were acknowledged, not lost in limbo


def test_bad_entries_are_rejected_counted_acked_and_skipped(redis_client, run_id, caplog):
    stream = SampleStream(redis_client, run_id, StreamConfig(max_entry_bytes=100_000))
    stream.append(make_games(1, 0, t=2))
    good = msgpack.unpackb(encode(make_games(1, 9, t=2)[0]), raw=False)
    bad = {
        "not_msgpack": {b"d": b"\xc1garbage"},
        "unknown_schema": {b"d": msgpack.packb({**good, "schema": 99}, use_bin_type=True)},
        "oversized": {b"d": b"\0" * 100_001},
        "no_data": {b"x": b"1"},
        "bad_outcome": {b"d": msgpack.packb({**good, "outcome": 5}, use_bin_type=True)},
    }
    bad_ids = {reason: redis_client.xadd(stream.key, fields).decode()
               for reason, fields in bad.items()}
    stream.append(make_games(1, 1, t=2))
    with caplog.at_level(logging.WARNING, logger="zeroforge.shared.transport.stream"):
        got = stream.read(10)
    assert [g.game_id for _, g in got] == ["g0", "g1"]
    assert stream.rejected == {reason: 1 for reason in bad}
    for reason, entry_id in bad_ids.items():
        line = next(r.getMessage() for r in caplog.records if entry_id in r.getMessage())
        assert reason in line and "\n" not in line
    assert stream.info().pending == 2  # only the good ones wait for an ack
    stream.ack([i for i, _ in got])
    assert stream.info().length == 0


def test_an_entry_above_the_read_limit_never_leaves_redis(redis_client, run_id):
    """A capped read: 64 entries of 8 MB each (half a gigabyte) against a reader whose
    limit is its 15x15 gomoku run's (0.6 MB): each rejected as oversized with its size, none
    of their bytes sent (Redis' own count of bytes it wrote to clients), the games around
    them read."""
    limits = EntryLimits.for_games([make_game(GOMOKU).spec])
    stream = SampleStream(redis_client, run_id, StreamConfig(entry_limits=limits))
    stream.append(make_games(1, 0, t=2))
    hostile = b"\x92" + b"\0" * (8 * 1024 * 1024)
    pipe = redis_client.pipeline(transaction=False)
    for _ in range(64):
        pipe.xadd(stream.key, {b"d": hostile})
    pipe.execute()
    stream.append(make_games(1, 1, t=2))
    sent = int(redis_client.info("stats")["total_net_output_bytes"])
    got = [g.game_id for _, g in stream.read(64)] + [g.game_id for _, g in stream.read(64)]
    sent = int(redis_client.info("stats")["total_net_output_bytes"]) - sent
    assert got == ["g0", "g1"]
    assert stream.rejected == {"oversized": 64}
    assert sent < 1024 * 1024, f"{sent} bytes sent for the read"


def test_a_batch_of_only_bad_entries_does_not_look_like_an_empty_stream(redis_client, run_id):
    stream = SampleStream(redis_client, run_id)
    for _ in range(5):
        redis_client.xadd(stream.key, {b"d": b"junk"})
    stream.append(make_games(1, t=2))
    assert [g.game_id for _, g in stream.read(2)] == ["g0"]
    assert stream.rejected["not_msgpack"] == 5


def test_append_refuses_an_oversized_game_and_writes_nothing(redis_client, run_id):
    stream = SampleStream(redis_client, run_id, StreamConfig(max_entry_bytes=5_000))
    with pytest.raises(ValueError, match="g1 encodes to .* over the 5000-byte entry limit"):
        stream.append([make_games(1, t=1)[0], make_games(1, 1, t=40)[0]])
    assert stream.info().length == 0


def test_backpressure_waits_instead_of_dropping(redis_client, run_id):
    config = StreamConfig(max_backlog=10)
    stream = SampleStream(redis_client, run_id, config)
    stream.append(make_games(10, t=2))
    with pytest.raises(BackpressureTimeout, match="holds 10 unacknowledged games"):
        stream.append(make_games(1, 10, t=2), timeout_s=0.2)
    assert stream.info().length == 10  # the refused game was not written, nothing dropped

    def learner() -> None:
        time.sleep(0.2)
        reader = SampleStream(redis_client, run_id, config)
        reader.ack([i for i, _ in reader.read(4)])

    thread = threading.Thread(target=learner)
    thread.start()
    stream.append(make_games(1, 10, t=2), timeout_s=5)
    thread.join()
    assert stream.backpressure_wait_s >= 0.15
    rest = drain(SampleStream(redis_client, run_id, config))
    assert [g.game_id for _, g in rest] == [f"g{i}" for i in range(4, 11)]


def test_a_room_blocker_goes_with_its_connection_pool(redis_server, run_id):
    """A process that makes clients over and over (a host reconnecting) keeps no blocker of
    a pool it dropped."""
    gc.collect()
    before = room_blockers()
    client = connect(redis_server.url)
    stream = SampleStream(client, run_id, StreamConfig(max_backlog=2))
    stream.append(make_games(2, t=2))
    for _ in range(2):  # the second wait reuses the pool's blocker
        with pytest.raises(BackpressureTimeout):
            stream.append(make_games(1, 2, t=2), timeout_s=0.2)
        assert room_blockers() == before + 1
    client.close()
    del stream, client
    gc.collect()
    assert room_blockers() == before


def test_trimming_never_removes_unacknowledged_entries(redis_client, run_id):
    stream = SampleStream(redis_client, run_id)
    ids = stream.append(make_games(8, t=2))
    got = stream.read(4)
    assert stream.trim() == 8  # delivered but pending: kept
    stream.ack([got[0][0], got[1][0], got[3][0]])  # out of order: #2 is still pending
    assert stream.info().length == 6  # only the two acked below the oldest pending went
    assert redis_client.xrange(stream.key, ids[2], ids[2])  # the pending one is still there
    restarted = SampleStream(redis_client, run_id)
    assert [g.game_id for _, g in drain(restarted)] == ["g2", "g4", "g5", "g6", "g7"]
    assert restarted.info().length == 0


# --- the weight store ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def net_weights() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    net = build_net("tiny", make_game(GOMOKU).spec)
    return {k: v.clone() for k, v in net.state_dict().items()}


def test_publish_fetch_round_trip_is_exact(redis_client, run_id, net_weights):
    store = WeightStore(redis_client, run_id)
    assert store.latest_version() is None and store.fetch() is None
    sha = store.publish(net_weights, 1)
    assert store.latest_version() == 1
    version, back = store.fetch(newer_than=0)
    assert version == 1 and back.keys() == net_weights.keys()
    for name, tensor in net_weights.items():
        assert back[name].dtype == tensor.dtype and torch.equal(back[name], tensor), name
    info = store.info(1)
    assert info.sha256 == sha and info.size == len(weights_to_bytes(net_weights))
    assert store.fetch(newer_than=1) is None


def test_new_versions_are_announced(redis_client, run_id, net_weights):
    store = WeightStore(redis_client, run_id)
    with store.subscribe() as sub:
        assert sub.poll(0.05) is None
        store.publish(net_weights, 4)
        store.publish(net_weights, 5)
        # let both announcements reach the subscriber's socket: poll then returns the newest
        # of everything queued (without the pause, 5 can still be in flight: a flaky test)
        time.sleep(0.2)
        assert sub.poll(2.0) == 5
    waiter: list[int | None] = []
    thread = threading.Thread(target=lambda: waiter.append(store.wait_for_version(6, 5.0)))
    thread.start()
    time.sleep(0.1)
    store.publish(weights_to_bytes(net_weights), 6)
    thread.join()
    assert waiter == [6]
    assert store.wait_for_version(7, 0.1) is None


def test_a_corrupt_blob_is_detected_and_not_applied(redis_client, run_id, net_weights):
    store = WeightStore(redis_client, run_id)
    store.publish(net_weights, 1)
    blob = redis_client.get(store.key(1))
    redis_client.setrange(store.key(1), len(blob) - 3, b"\xff")
    with pytest.raises(WeightsIntegrityError, match="version 1 .* fail their sha256 check"):
        store.fetch()


def test_versions_only_go_up(redis_client, run_id, net_weights):
    store = WeightStore(redis_client, run_id)
    store.publish(net_weights, 3)
    for old in (3, 2):
        with pytest.raises(StaleVersionError, match=f"version {old} .* latest is already 3"):
            store.publish(net_weights, old)
    assert store.latest_version() == 3 and store.versions() == [3]
    assert not redis_client.keys(f"{store.prefix}staging:*")
    with pytest.raises(ValueError, match="not a weights blob"):
        store.publish(b"not weights", 4)


def test_old_versions_are_pruned(redis_client, run_id, net_weights):
    store = WeightStore(redis_client, run_id, keep=2)
    for version in range(1, 6):
        store.publish(net_weights, version)
    assert store.versions() == [4, 5]
    for version in (1, 2, 3):
        assert not redis_client.exists(store.key(version), f"{store.key(version)}:meta")
    assert store.fetch()[0] == 5


def test_a_redis_that_cannot_write_its_disk_is_a_transport_error_also_in_a_pipeline():
    """MISCONF (the AOF on a full or read-only disk) reads as a passing outage, a
    ``TransportError`` the callers retry, whether a lone command, a pipeline's (whose
    error redis-py prefixes with the failing command) or a script's command met it."""
    from zeroforge.shared.transport import redis_errors

    with RedisServer() as server:
        client = connect(server.url)
        misconf = "MISCONF Errors writing to the AOF file: No space left on device"
        for raised in (redis.ResponseError(misconf), redis.ResponseError(
                f"Command # 1 (XADD zf:{{r}}:samples * d x) of pipeline caused error: "
                f"{misconf}"), redis.ResponseError(  # in a script (the fenced XACK)
                f"Error running script (call to f_7552e3fe): @user_script:10: "
                f"@user_script: 10: -{misconf}")):
            with pytest.raises(TransportError, match="cannot write to its disk"), \
                    redis_errors(client):
                raise raised
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"), redis_errors(client):
            raise redis.ResponseError("WRONGTYPE Operation against a key")  # not an outage
