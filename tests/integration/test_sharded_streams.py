"""Sharded sample streams against real redis-servers: the learner over three shards on
two servers keeps every game exactly once across a crash, a shard's server killed and
restarted mid-run loses nothing and stops nothing, and a run's shards cannot shrink."""

from __future__ import annotations

import collections
import dataclasses
import gc
import os
import signal
import time
from collections.abc import Iterator

import pytest

from tests.integration.conftest import renamed, tiny_net_games
from tests.integration.test_learner_service import (
    assert_each_once,
    drain,
    train_config,
)
from zeroforge.deploy.runtime.builder import build_learner
from zeroforge.learner.learner import CheckpointError
from zeroforge.learner.service import LearnerService
from zeroforge.shared.transport import (
    RedisServer,
    RedisServerConfig,
    ShardedSampleStream,
    TransportError,
    WeightStore,
    open_transport,
    shard_of,
)

SHARDS = 3
GAME = "tictactoe"


@pytest.fixture(scope="module")
def played():
    """Real self-play games (tiny random net, 4 simulations), played once per module."""
    return tiny_net_games(GAME, 40, simulations=4, parallel=16, worker_id="w0")


@pytest.fixture
def shard_server(tmp_path) -> Iterator[RedisServer]:
    """A second Redis for the stream shards, unsupervised (a test kills and restarts it),
    with its append-only file in ``tmp_path``."""
    config = RedisServerConfig(data_dir=str(tmp_path / "shard-redis"), supervise=False,
                               password="pw-shard")
    server = RedisServer(config).start()
    yield server
    server.stop()


def sharded_learner(url: str, shard_url: str, run_id: str, run_dir: str, *,
                    shards: int = SHARDS, resume: bool = True) -> LearnerService:
    """The run's learner as the Ray runtime builds it, its stream in ``shards`` shards:
    even shards in the run's Redis, odd ones on the shard server."""
    config = train_config()
    ctx = dataclasses.replace(config.context(run_id, url), run_dir=run_dir,
                              stream_shards=shards, stream_urls=(url, shard_url))
    transport = open_transport(url, run_id, shards, (url, shard_url))
    return build_learner(config, ctx, transport, resume)


def producer(url: str, shard_url: str, run_id: str) -> ShardedSampleStream:
    stream = open_transport(url, run_id, SHARDS, (url, shard_url)).samples()
    assert isinstance(stream, ShardedSampleStream)
    return stream


def test_a_killed_learner_over_three_shards_resumes_with_every_game_exactly_once(
        redis_server, shard_server, run_id, tmp_path, played, monkeypatch):
    games = renamed(played[:30], "shards")
    assert {shard_of(g.game_id, SHARDS) for g in games} == set(range(SHARDS))
    sink = producer(redis_server.url, shard_server.url, run_id)
    a = sharded_learner(redis_server.url, shard_server.url, run_id, str(tmp_path))
    sink.append(games[:12])
    drain(a, max_read=4)
    a.checkpoint()  # its 12 entries are acked
    assert sink.info().pending == 0

    sink.append(games[12:24])
    for _ in range(2):
        a.run_once(max_read=4, block_ms=0)
    in_checkpoint = a.games_received
    assert in_checkpoint > 12 and "," in a.cursor  # one cursor part per shard read

    def lost_ack(ids: list[str]) -> int:
        raise TransportError("injected: Redis unreachable right after the checkpoint")

    # A crash between checkpoint and ack: the checkpoint's newest entries stay pending.
    monkeypatch.setattr(a.stream, "ack", lost_ack)
    a.checkpoint()
    drain(a, max_read=4)  # the rest of 13..24, read after the last checkpoint
    assert a.games_received == 24
    del a  # killed: no stop(), no final checkpoint, nothing more acked
    gc.collect()

    sink.append(games[24:])
    b = sharded_learner(redis_server.url, shard_server.url, run_id, str(tmp_path))
    assert b.games_received == in_checkpoint
    drain(b, max_read=5)
    assert_each_once(b, games)
    # the checkpoint's unacked entries came back from every shard and were dropped
    assert b.stream.skipped_duplicates == in_checkpoint - 12
    b.stop()
    assert sink.info().pending == 0 and sink.info().length == 0
    assert b.status()["stream_shards"] == SHARDS


def test_a_shard_server_killed_mid_run_loses_nothing_and_stops_nothing(
        redis_server, shard_server, run_id, tmp_path, played, caplog):
    """Shard 1 (the only one on the second server) dies: its games go to the next shard,
    the learner reads the others, and after the restart the entries it held come back."""
    games = renamed(played[:36], "down")
    sink = producer(redis_server.url, shard_server.url, run_id)
    learner = sharded_learner(redis_server.url, shard_server.url, run_id, str(tmp_path))
    sink.append(games[:12])
    drain(learner, max_read=4)
    before = sink.shard_infos()[1].pending
    assert before > 0  # shard 1 holds unacked entries when its server dies

    os.kill(shard_server.pid, signal.SIGKILL)
    time.sleep(1.2)  # past appendfsync everysec: the AOF held the entries written before
    sink.append(games[12:24])  # shard 1's games re-routed
    assert sink.rerouted == sum(shard_of(g.game_id, SHARDS) == 1 for g in games[12:24]) > 0
    drain(learner, max_read=4)
    assert learner.games_received == 24
    assert learner.stream.shard_errors[1] > 0
    assert any("shard 1" in r.getMessage() and "\n" not in r.getMessage()
               for r in caplog.records)

    restarted = RedisServer(dataclasses.replace(shard_server.config,
                                                port=shard_server.port)).start()
    try:
        sink.append(games[24:])
        drain(learner, max_read=4)
        assert_each_once(learner, games)
        learner.stop()
        assert sink.info().pending == 0 and sink.info().length == 0
    finally:
        restarted.stop()


def test_the_stop_drain_does_not_take_an_unreadable_shard_for_an_empty_one(
        redis_server, shard_server, run_id, tmp_path, played, monkeypatch):
    """Games wait on shard 1 when its server dies just before the learner's final drain:
    the drain must not end at the first empty read of the others (the stop would then
    report nothing lost); it waits its grace, then says the stream was left undrained."""
    from zeroforge.learner import service

    games = renamed(played[:24], "drain")
    sink = producer(redis_server.url, shard_server.url, run_id)
    learner = sharded_learner(redis_server.url, shard_server.url, run_id, str(tmp_path))
    sink.append(games)
    on_shard_1 = sum(shard_of(g.game_id, SHARDS) == 1 for g in games)
    assert on_shard_1 > 0
    os.kill(shard_server.pid, signal.SIGKILL)
    time.sleep(1.2)
    monkeypatch.setattr(service, "DRAIN_GRACE_S", 2.0)
    learner.drain()
    assert learner.games_received == len(games) - on_shard_1
    assert learner.undrained  # what the stop reports as games left for a --resume

    restarted = RedisServer(dataclasses.replace(shard_server.config,
                                                port=shard_server.port)).start()
    try:
        learner.undrained = False
        learner.drain()
        assert not learner.undrained
        assert_each_once(learner, games)
        learner.stop()
    finally:
        restarted.stop()


def test_a_run_cannot_resume_with_fewer_stream_shards(redis_server, shard_server, run_id,
                                                       tmp_path, played):
    sink = producer(redis_server.url, shard_server.url, run_id)
    learner = sharded_learner(redis_server.url, shard_server.url, run_id, str(tmp_path))
    sink.append(renamed(played[:12], "shrink"))
    drain(learner)
    assert "2=" in learner.cursor
    learner.stop()
    with pytest.raises(CheckpointError, match=r"names shard 2, but the run has 2 stream "
                                              r"shards") as caught:
        sharded_learner(redis_server.url, shard_server.url, run_id, str(tmp_path), shards=2)
    assert "\n" not in str(caught.value)
    # growing is fine: the old shards' cursors still hold
    grown = sharded_learner(redis_server.url, shard_server.url, run_id, str(tmp_path),
                            shards=4)
    assert grown.games_received == 12 and drain(grown)[-1]["read"] == 0
    assert WeightStore(grown.transport.redis, run_id).latest_version() is not None
    grown.close()


def test_a_run_over_three_shards_on_two_servers_survives_a_killed_learner(
        local_ray, redis_server, shard_server, run_id, tmp_path):
    """The distributed runtime with its stream in three shards on two servers: two workers
    play, the learner is killed mid-run and its successor resumes from the checkpoint, and
    every game a worker appended is received exactly once."""
    import ray

    from tests.integration.test_distributed import SETTINGS, all_ids, status, wait_for
    from zeroforge.deploy.config import load_train_config
    from zeroforge.deploy.ray.handle import start_run

    config = load_train_config(None, [*SETTINGS, "selfplay.workers=2",
                                      f"distributed.stream_shards={SHARDS}"])
    ctx = dataclasses.replace(config.context(run_id, redis_server.url), run_dir=str(tmp_path),
                              stream_urls=(redis_server.url, shard_server.url))
    controller = start_run(config, ctx).actor
    try:
        wait_for(lambda: status(controller)["learner_steps"] >= 10)
        wait_for(lambda: (tmp_path / "checkpoint.pt").exists())
        [learner] = ray.get(controller.actor_handles.remote("learner"))
        ray.kill(learner)
        wait_for(lambda: status(controller)["restarts"]["learner"] == 1
                 and status(controller)["alive"]["learner"] == 1)
        before = status(controller)["games_received"]
        wait_for(lambda: status(controller)["games_received"] > before + 10)
        [successor] = ray.get(controller.actor_handles.remote("learner"))
        workers = ray.get(controller.actor_handles.remote("selfplay"))
        final = ray.get(controller.stop.remote())
        received = collections.Counter(ray.get(successor.game_ids.remote()))
        produced = all_ids(workers)
        assert max(received.values()) == 1
        assert collections.Counter(produced) == received
        assert final["games_received"] == len(produced) == final["games"]
        assert {shard_of(g, SHARDS) for g in produced} == set(range(SHARDS))
    finally:
        ray.get(controller.shutdown.remote())
        ray.kill(controller)
