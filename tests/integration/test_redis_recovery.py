"""Fail loudly, lose nothing: a Redis that crashes and comes back, workers that resend,
a learner that drops resent games by id (docs/reliability.md, data plane).

Real redis-servers (the bundled binary), killed with SIGKILL like a crash would.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable

import pytest
import torch

import zeroforge.actors.selfplay_service as selfplay_service
from tests.fault_report import report
from tests.integration.conftest import learner_service
from tests.integration.test_learner_service import GAME, train_config
from tests.integration.test_transport import make_games
from zeroforge.actors.config import SelfPlayConfig
from zeroforge.actors.selfplay import SelfPlayWorker
from zeroforge.actors.selfplay_service import SelfPlayService
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import NetConfig, build_net
from zeroforge.shared.samples import GameSamples
from zeroforge.shared.search import SearchConfig, UniformEvaluator
from zeroforge.shared.transport import (
    EvalResultsStore,
    RedisServer,
    RedisServerConfig,
    SampleStream,
    TransportError,
    WeightStore,
    connect,
    free_port,
    open_transport,
)


def wait_until(check: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def crash(server: RedisServer) -> None:
    """SIGKILL the redis-server process: no shutdown, no final fsync."""
    assert server.pid is not None
    os.kill(server.pid, signal.SIGKILL)


# --- item 7: the bundled Redis persists and is restarted ------------------------------------

def test_a_crashed_redis_comes_back_with_stream_groups_pending_entries_and_weights(tmp_path):
    config = RedisServerConfig(data_dir=str(tmp_path / "redis"), password="pw-crash")
    weights = build_net(NetConfig.preset("tiny"), make_game(GAME).spec).state_dict()
    with RedisServer(config) as server:
        client = connect(server.url)
        # AOF with fsync every second, by default.
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("appendfsync") == {"appendfsync": "everysec"}
        stream = SampleStream(client, "crash")
        stream.append(make_games(6))
        delivered = stream.read(4)  # pending in the learner's group
        stream.ack([delivered[0][0]])
        store = WeightStore(client, "crash")
        store.publish(weights, 1)
        EvalResultsStore(client, "crash").put({"version": 1, "score": 0.5})
        port, pid = server.port, server.pid

        crash(server)
        killed = time.monotonic()
        wait_until(lambda: server.restarts == 1 and server.running)
        back_s = time.monotonic() - killed
        assert server.port == port and server.pid != pid

        # The same clients reconnect and find everything the server had acknowledged.
        info = stream.info()
        assert (info.length, info.pending) == (5, 3)
        assert info.last_delivered_id == delivered[-1][0]
        restarted = SampleStream(client, "crash")  # a restarted learner: same consumer
        again = restarted.read(10)
        assert [i for i, _ in again] == [i for i, _ in delivered[1:]]
        assert [g.game_id for _, g in restarted.read(10)] == ["g4", "g5"]
        version, fetched = store.fetch()
        assert version == 1
        for name, tensor in weights.items():
            torch.testing.assert_close(fetched[name], tensor, rtol=0, atol=0)
        assert EvalResultsStore(client, "crash").latest() == {"version": 1, "score": 0.5}
        client.close()
    report(recovery_s=back_s, entries_back=info.length, pending_back=info.pending)
    # stop() keeps a data dir it was given.
    assert any((tmp_path / "redis").iterdir())


def test_a_crash_loop_is_given_up_in_one_logged_line(caplog):
    config = RedisServerConfig(max_restarts=1, restart_window_s=60)
    with caplog.at_level(logging.WARNING, logger="zeroforge.shared.transport.server"), \
            RedisServer(config) as server:
        crash(server)
        wait_until(lambda: server.restarts == 1 and server.running)
        crash(server)
        wait_until(lambda: server.gave_up)
        assert not server.running and server.restarts == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "\n" not in errors[0]
    assert f"127.0.0.1:{server.port} died 2 times within 60 s" in errors[0]
    assert "not restarting it again" in errors[0]


# --- item 7: a worker keeps the games it holds until an append succeeds ---------------------

def selfplay(url: str, run_id: str) -> SelfPlayService:
    ctx = train_config().context(run_id, url)
    return SelfPlayService(ctx, NetConfig.preset("tiny"), SearchConfig(num_simulations=2),
                           SelfPlayConfig(games_in_parallel=4), open_transport(url, run_id)
                           .samples(), None, worker_id="w-resend", seed=1,
                           evaluator=UniformEvaluator())


def test_a_stopped_worker_still_appends_its_games_when_redis_comes_back(tmp_path, run_id):
    config = RedisServerConfig(data_dir=str(tmp_path / "redis"), password="pw-worker",
                               port=free_port(), supervise=False)
    server = RedisServer(config).start()
    worker = selfplay(server.url, run_id)
    games = make_games(3)
    server.stop()  # Redis is away: down for 1.5 s, then back on its port and data
    restart = threading.Timer(1.5, server.start)
    restart.start()
    worker.stop()  # ... and the worker is told to stop meanwhile
    try:
        worker._append(games)
    finally:
        restart.join()
    try:
        assert worker.errors >= 1
        reader = SampleStream(connect(server.url), run_id)
        assert [g.game_id for _, g in reader.read(10)] == ["g0", "g1", "g2"]
    finally:
        server.stop()


def test_a_worker_that_cannot_append_after_its_stop_says_what_it_lost(
        tmp_path, run_id, monkeypatch):
    server = RedisServer(RedisServerConfig(supervise=False)).start()
    worker = selfplay(server.url, run_id)
    port = server.port
    server.stop()
    worker.stop()
    monkeypatch.setattr(selfplay_service, "STOP_APPEND_GRACE_S", 0.3)
    with pytest.raises(TransportError) as info:
        worker._append(make_games(2))
    assert str(info.value) == (
        f"worker w-resend: 2 finished games lost: no append succeeded within 0.3 s of the "
        f"stop (cannot reach Redis at 127.0.0.1:{port}: Connection refused)")


# --- item 8: delivery is idempotent by game id ----------------------------------------------

@pytest.fixture(scope="module")
def played() -> list[GameSamples]:
    """Real tic-tac-toe self-play games (uniform evaluator, 2 simulations)."""
    worker = SelfPlayWorker(make_game(GAME), UniformEvaluator(), SearchConfig(num_simulations=2),
                            SelfPlayConfig(games_in_parallel=8), seed=3, worker_id="w0")
    games = worker.play_games(16)[:16]
    return [dataclasses.replace(g, game_id=f"dup-{i}") for i, g in enumerate(games)]


@pytest.fixture(params=["memory", "redis"])
def url(request) -> str:
    if request.param == "memory":
        return f"memory://dedupe-{uuid.uuid4().hex[:8]}"
    return request.getfixturevalue("redis_server").url


def drain(service) -> None:
    for _ in range(200):
        turn = service.run_once(max_read=5, block_ms=0)
        if turn["read"] == 0 and turn["steps"] == 0:
            return
    raise AssertionError("learner still busy")


def test_a_resent_game_is_dropped_by_id_even_after_a_learner_restart(
        url, run_id, tmp_path, played):
    producer = open_transport(url, run_id).samples()
    config = train_config()
    a = learner_service(config, url, run_id, str(tmp_path))
    producer.append(played[:8])
    producer.append(played[4:8])  # a batch resent after a failed append: 4 copies
    drain(a)
    assert a.games_received == 8 and a.rejected["duplicate"] == 4
    assert a.learner.replay.inserted == sum(g.num_positions for g in played[:8])
    a.stop()  # checkpoint (with the ids), acks

    producer.append(played[6:16])  # copies of 6 and 7, then 8 new games
    b = learner_service(config, url, run_id, str(tmp_path), resume=True)
    drain(b)
    assert b.games_received == 16 and b.rejected["duplicate"] == 6
    assert sorted(b.recent_game_ids) == sorted(g.game_id for g in played)
    assert b.learner.replay.inserted == sum(g.num_positions for g in played)
    rejected = {tuple(tuple(p) for p in labels): v
                for labels, v in b.stats()["values"]["rejected_entries_total"]}
    assert rejected[(("reason", "duplicate"),)] == 6
    b.stop()
    info = producer.info()
    assert (info.pending, info.length) == (0, 0)  # copies were acked, never left pending


def test_the_recent_ids_are_bounded_and_a_copy_is_dropped_in_or_out_of_them(
        url, run_id, tmp_path, played):
    """The window of recent ids (what ``game_ids`` reports) keeps its size and its set in
    step; duplicates are caught by the run's whole record (``ReceivedGames``), so a copy
    of a game that left the window long ago is dropped as well."""
    a = learner_service(train_config(), url, run_id, str(tmp_path), recent_game_ids=6,
                        stream_config=dataclasses.replace(
                            open_transport(url, run_id).samples().config, max_backlog=3))
    assert a.recent_game_ids.maxlen == 6
    producer = open_transport(url, run_id).samples()
    for start in range(0, 16, 2):
        producer.append(played[start:start + 2])
        drain(a)
    assert list(a.recent_game_ids) == [g.game_id for g in played[-6:]]
    assert a.recent_game_ids.members == set(a.recent_game_ids)
    producer.append(played[-1:] + played[:1])  # a copy in the window, one long out of it
    drain(a)
    assert a.rejected["duplicate"] == 2 and a.games_received == 16
    assert a.recent_game_ids.members == set(a.recent_game_ids) and len(a.recent_game_ids) == 6
    a.close()


class CutAfterFirstAppend:
    """A loopback TCP relay to a real Redis that, on the first connection to send the
    append (an EVALSHA of the bounded-append script, ``stream_room``), passes the commands
    on but drops the connection before any reply comes back: the "connection lost after
    Redis ran the append" failure."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cut = threading.Event()
        self.cut_from: socket.socket | None = None
        """The Redis side of the cut connection: its replies are dropped."""
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False),
                             daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, to_redis: bool) -> None:
        try:
            while data := src.recv(65536):
                if src is self.cut_from:
                    continue  # replies of the cut connection never arrive
                if to_redis and b"EVALSHA" in data and not self.cut.is_set():
                    self.cut_from = dst
                    self.cut.set()
                    dst.sendall(data)
                    # Pass on the rest of the pipeline and let Redis run it; its replies
                    # are never relayed.
                    src.settimeout(0.05)
                    end = time.monotonic() + 0.3
                    while time.monotonic() < end:
                        with contextlib.suppress(TimeoutError):
                            dst.sendall(src.recv(65536))
                    for s in (src, dst):
                        s.shutdown(socket.SHUT_RDWR)
                    return
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                s.close()

    def close(self) -> None:
        self.listener.close()


def test_a_pipeline_cut_after_redis_ran_it_appends_twice_and_the_learner_keeps_one(
        redis_server, run_id, tmp_path, played):
    # an append of another run loads the append script, so that the worker's first
    # EVALSHA runs it (rather than being answered NOSCRIPT)
    open_transport(redis_server.url, f"{run_id}-warm").samples().append(make_games(1))
    relay = CutAfterFirstAppend(redis_server.port)
    try:
        through = redis_server.url.replace(f":{redis_server.port}/", f":{relay.port}/")
        worker = selfplay(through, run_id)
        worker._append(played[:5])  # redis-py sends the append again after the cut
    finally:
        relay.close()
    assert relay.cut.is_set()
    producer = open_transport(redis_server.url, run_id).samples()
    entries = producer.info().length
    assert entries == 10  # every game twice, none lost
    learner = learner_service(train_config(), redis_server.url, run_id, str(tmp_path))
    drain(learner)
    assert learner.games_received == 5 and learner.rejected["duplicate"] == 5
    learner.stop()
    report(appended=len(played[:5]), stream_entries=entries, trained=learner.games_received,
           copies_dropped=learner.rejected["duplicate"])
