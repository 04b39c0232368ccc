"""A process-hosted worker's data plane through its host (``actors.worker_relay``): the
child's proxies over a real multiprocessing pipe, answered by a host whose endpoints are
the in-memory transport's (the Redis one: tests/integration/test_worker_relay.py). Games
arrive decoded as sent, weights as the learner published them (verified by the host, one
fetch per version for all its workers), the host's errors come back as the same errors
with the same line, and a host that is gone is one ``TransportError`` line."""

from __future__ import annotations

import multiprocessing
import threading
import uuid
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from tests.contract.test_transport_contract import make_games
from zeroforge.actors.process_worker import ProcessWorker
from zeroforge.actors.selfplay_service import append_held
from zeroforge.actors.worker_relay import GONE, HostEndpoints, RelayTransport, serve
from zeroforge.shared.formats import weights_to_bytes
from zeroforge.shared.metrics import snapshot_total
from zeroforge.shared.pace import Pace
from zeroforge.shared.samples import GameSamples, decode, encode
from zeroforge.shared.transport import (
    MemoryTransport,
    SampleSink,
    StreamConfig,
    TransportError,
    WeightSigner,
    WeightsIntegrityError,
    WeightVerifier,
    WriterCounts,
    publish_age_s,
)


class Host:
    """A host's endpoints served on real pipes, one per ``worker()``, each by a thread of
    its own as ``ProcessWorker`` serves them."""

    def __init__(self, endpoints: HostEndpoints, run_id: str) -> None:
        self.endpoints, self.run_id = endpoints, run_id
        self.done = threading.Event()
        self.threads: list[threading.Thread] = []

    def worker(self) -> RelayTransport:
        host_end, child_end = multiprocessing.Pipe(duplex=True)
        thread = threading.Thread(target=serve, args=(host_end, self.endpoints, self.done),
                                  daemon=True)
        thread.start()
        self.threads.append(thread)
        return RelayTransport(child_end, self.run_id)

    def stop(self) -> None:
        self.done.set()
        for thread in self.threads:
            thread.join(5)
            assert not thread.is_alive()


@pytest.fixture
def memory() -> MemoryTransport:
    return MemoryTransport(f"relay-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def key() -> WeightSigner:
    return WeightSigner.generate()


@pytest.fixture
def host(memory: MemoryTransport, key: WeightSigner) -> Iterator[Host]:
    endpoints = HostEndpoints(memory.samples(),
                              memory.weights(verifier=WeightVerifier(key.public_key)),
                              memory.pace())
    served = Host(endpoints, memory.run_id)
    yield served
    served.stop()


def same_game(got: GameSamples, sent: GameSamples) -> None:
    expect = decode(encode(sent))  # the wire format's precision (float16 policies)
    for field in ("obs", "policy", "to_play"):
        assert np.array_equal(getattr(got, field), getattr(expect, field)), field
    assert (got.game_id, got.outcome, got.weights_version, got.game) == (
        sent.game_id, sent.outcome, sent.weights_version, sent.game)


def test_appended_games_arrive_decoded_as_sent(host, memory):
    sink = host.worker().samples()
    assert isinstance(sink, SampleSink)
    games = make_games(5)
    ids = sink.append(games[:2]) + sink.append(games[2:])
    assert sink.append([]) == []
    got = memory.samples().read(max_count=10)
    assert [i for i, _ in got] == ids
    for (_, received), sent in zip(got, games, strict=True):
        same_game(received, sent)


class FlakySink:
    """A sink that raises ``errors`` in turn, then appends to ``sink``."""

    def __init__(self, sink: SampleSink, errors: list[Exception]) -> None:
        self.sink, self.errors = sink, errors
        self.room_checks = 0

    def append(self, games: list[GameSamples], timeout_s: float | None = None) -> list[str]:
        if self.errors:
            raise self.errors.pop(0)
        return self.sink.append(games, timeout_s)

    def wait_for_room(self, timeout_s: float | None = None, count: int = 1) -> None:
        pass

    def writer_counts(self) -> WriterCounts:
        return self.sink.writer_counts()


def test_each_relayed_worker_reports_its_own_appends_counts(memory, key):
    """A host's workers share its one sink: the worker whose append waited for room in
    the full stream reports the wait (brought back with its append), the worker that
    filled the stream without waiting reports none."""
    config = StreamConfig(max_backlog=2, append_timeout_s=30, room_check_interval_s=0.1)
    served = Host(HostEndpoints(memory.samples(config),
                                memory.weights(verifier=WeightVerifier(key.public_key)),
                                memory.pace()), memory.run_id)
    try:
        filler, blocked = served.worker().samples(), served.worker().samples()
        filler.append(make_games(2))
        waiter = threading.Thread(target=blocked.append, args=(make_games(1, start=10),))
        waiter.start()
        waiter.join(0.8)
        assert waiter.is_alive(), "appended past max_backlog"
        reader = memory.samples(config)
        reader.ack([i for i, _ in reader.read(2)])
        waiter.join(10)
        assert 0.7 <= blocked.writer_counts().backpressure_wait_s < 10
        assert filler.writer_counts() == WriterCounts()
    finally:
        served.stop()


def test_the_hosts_errors_come_back_as_the_same_errors_with_the_same_line(memory):
    flaky = FlakySink(memory.samples(), [
        TransportError("Redis at 127.0.0.1:1 is unreachable:\n  connection refused"),
        ValueError("a game of 20000000 bytes is over the entry limit"),
        KeyError("bug"),
        TransportError("Redis restarting")])
    host = Host(HostEndpoints(flaky, memory.weights(), memory.pace()), memory.run_id)
    try:
        sink = host.worker().samples()
        games = make_games(1)
        with pytest.raises(TransportError) as err:
            sink.append(games)
        assert str(err.value) == "Redis at 127.0.0.1:1 is unreachable: connection refused"
        with pytest.raises(ValueError, match="^a game of 20000000 bytes is over"):
            sink.append(games)
        with pytest.raises(RuntimeError, match="^worker relay: the host failed: KeyError"):
            sink.append(games)
        # a transport error is retried as over a transport of the worker's own
        failures: list[int] = []
        append_held(sink, games, threading.Event(), "w0", lambda: failures.append(1))
        assert failures == [1]
        assert [g.game_id for _, g in memory.samples().read(max_count=10)] == ["g0"]
    finally:
        host.stop()


@pytest.fixture
def weights() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return {"a.weight": torch.randn(4, 3), "a.bias": torch.randn(4),
            "bn.num_batches_tracked": torch.tensor(7)}


def test_weights_arrive_as_published_once_a_version_for_the_host(host, memory, key, weights):
    first, second = host.worker().weights(), host.worker().weights()
    assert first.latest_version() is None and first.fetch() is None
    learner = memory.weights(signer=key)
    learner.publish(weights, 1)
    assert first.latest_version() == 1
    version, got = first.fetch()
    assert version == 1 and got.keys() == weights.keys()
    assert all(torch.equal(got[k], weights[k]) for k in weights)
    assert first.fetch(newer_than=1) is None
    # the second worker gets the host's copy: one fetch from the store per version
    assert second.fetch_bytes() == (1, weights_to_bytes(weights))
    assert first.fetch_counts() == {"memory": 1} and second.fetch_counts() == {"host": 1}
    info = first.info(1)
    assert info is not None and info.version == 1 and info.signature
    assert publish_age_s(first, 1) is not None and first.info(9) is None
    # a worker's close leaves the host's source to the host
    first.close()
    learner.publish(weights, 2)
    assert second.fetch(newer_than=1)[0] == 2 and second.fetch_counts() == {"host": 1,
                                                                              "memory": 1}


def test_a_version_the_host_refuses_comes_back_refused_with_its_version(host, memory,
                                                                        weights):
    memory.weights(signer=WeightSigner.generate()).publish(weights, 3)  # another key
    with pytest.raises(WeightsIntegrityError) as err:
        host.worker().weights().fetch()
    assert (err.value.version, err.value.reason) == (3, "bad_signature")
    assert "version 3 of run" in str(err.value) and "another key" in str(err.value)


def test_the_pace_reads_through(host, memory):
    pace = host.worker().pace()
    assert pace.read() is None
    published = Pace(samples_per_insert=2.5, target=4.0, tolerance=0.5, trainable=True)
    memory.pace().publish(published)
    assert pace.read() == published
    with pytest.raises(TypeError, match="read-only"):
        pace.publish(published)


def test_a_host_that_is_gone_is_one_transport_error_line(host):
    relay = host.worker()
    sink, weights = relay.samples(), relay.weights()
    host.stop()  # the serving thread closes the host's end
    for call in (lambda: sink.append(make_games(1)), weights.latest_version,
                 lambda: weights.fetch(-1)):
        with pytest.raises(TransportError) as err:
            call()
        assert str(err.value) == GONE and "\n" not in GONE


def test_a_served_worker_process_appends_through_its_host(memory):
    """``ProcessWorker(serve=)``: the child builds its worker with the relay's end and
    appends through the host's sink; the host's one pace answers it."""
    memory.pace().publish(Pace(samples_per_insert=1.0, target=4.0, tolerance=0.5,
                               trainable=True))
    endpoints = HostEndpoints(memory.samples(), memory.weights(), memory.pace())
    worker = ProcessWorker("tests.unit.process_services:relaying", {"games": 3}, 4,
                           serve=endpoints, report_s=0.1)
    assert worker.run(threading.Event()) == 3
    assert snapshot_total(worker.stats(), "selfplay_games_total") == 3
    got = [g.game_id for _, g in memory.samples().read(max_count=10)]
    assert got == worker.game_ids() == ["w4-g0", "w4-g1", "w4-g2"]
