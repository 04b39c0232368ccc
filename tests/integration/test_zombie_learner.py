"""A learner that outlives its replacement (a SIGSTOP or GC pause, a kill not delivered to a
partitioned node) is fenced off: once a newer learner of the run has started, the old one
acks nothing, publishes nothing, writes no pace and commits no checkpoint; it stops in one
line, and every game is in the newer learner's checkpoint exactly once."""

from __future__ import annotations

import threading

import pytest

from tests.integration.conftest import learner_service
from tests.integration.test_learner_service import played, train_config  # noqa: F401
from tests.integration.test_redis_recovery import drain
from tests.integration.test_transport import make_games
from zeroforge.learner.learner import load_checkpoint
from zeroforge.shared.transport import (
    FencedError,
    RedisServer,
    RedisTransport,
    open_transport,
    split_id,
)


def test_a_paused_learner_replaced_meanwhile_writes_nothing_when_it_wakes(
        redis_server, run_id, tmp_path, played, caplog):  # noqa: F811
    url, run_dir = redis_server.url, str(tmp_path)
    games = played[:30]
    producer = open_transport(url, run_id)
    stream = producer.samples()
    # checkpoints every turn: the old learner will try to commit one the moment it wakes
    config = train_config({"checkpoint_every_s": 0.0, "publish_every_steps": 1})
    old = learner_service(config, url, run_id, run_dir)
    stream.append(games[:12])
    drain(old)
    assert old.games_received == 12 and old.learner.steps > 0
    stream.append(games[12:18])
    old.stream.read(64)  # delivered to it, not yet in a checkpoint: then it pauses here

    new = learner_service(config, url, run_id, run_dir)  # its replacement
    assert new.epoch > old.epoch and new.run_dir_fence.epoch > old.run_dir_fence.epoch
    assert new.games_received == 12  # restored the old one's last checkpoint
    new.stream.recover_pending()  # the six the old one held come back to the same name
    stream.append(games[18:30])
    drain(new)
    assert new.games_received == 30
    checkpoint = (tmp_path / "checkpoint.pt").read_bytes()
    weights = producer.weights().latest_version()

    stop = threading.Event()
    stopper = threading.Timer(60, stop.set)  # a safety net: the fence must end it first
    stopper.start()
    try:
        status = old.run(stop)  # it wakes up and tries to go on
    finally:
        stopper.cancel()
    assert not stop.is_set(), "the old learner ran on until the safety stop"
    assert status["fenced_by"] == new.epoch or status["fenced_by"] == new.run_dir_fence.epoch
    assert "stops without writing anything more" in caplog.text
    assert (tmp_path / "checkpoint.pt").read_bytes() == checkpoint
    assert producer.weights().latest_version() == weights
    assert not list(tmp_path.glob("*.tmp"))

    new.stop()  # the final checkpoint: every game once, nothing left pending
    # the checkpoint names its one writer: the newer learner's run-directory epoch
    assert load_checkpoint(tmp_path / "checkpoint.pt")["extra"]["learner_epoch"] == (
        new.run_dir_fence.epoch)
    final = learner_service(config, url, run_id, run_dir)
    assert final.games_received == 30
    assert all(g.game_id in final.received for g in games) and len(final.received) == 30
    assert stream.info().pending == 0
    final.close()
    producer.close()


def test_the_fence_reaches_stream_shards_on_other_servers(redis_server, run_id):
    """The epoch is raised on every stream shard's server before the new learner reads:
    the old learner's acks are refused on each of them."""
    with RedisServer() as shard_server:
        urls = (redis_server.url, shard_server.url)
        old = RedisTransport(redis_server.url, run_id, stream_shards=3, stream_urls=urls)
        old_epoch = old.take_epoch()
        stream = old.samples()
        stream.append(make_games(12))
        got = drain_unacked(stream)
        by_shard = {k: [i for i, _ in got if split_id(i)[0] == k] for k in range(3)}
        assert all(by_shard.values()), by_shard  # a game on every shard, both servers
        new = RedisTransport(redis_server.url, run_id, stream_shards=3, stream_urls=urls)
        newer = new.take_epoch()
        for k, ids in by_shard.items():
            with pytest.raises(FencedError, match=f"epoch {old_epoch}.*epoch {newer}"):
                stream.shards[k].ack([split_id(i)[1] for i in ids])
        assert sum(s.info().pending for s in new.samples().shards) == 12  # none acked
        old.close()
        new.close()


def drain_unacked(stream) -> list:
    out = []
    while got := stream.read(64):
        out.extend(got)
    return out
