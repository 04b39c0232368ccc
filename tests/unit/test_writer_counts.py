"""What appends cost their writer: per-thread tallies (a host's workers share one sink),
their wire form, and a self-play worker turning them into its metrics."""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.contract.test_transport_contract import make_games
from zeroforge.actors.config import SelfPlayConfig
from zeroforge.actors.selfplay_service import SelfPlayService
from zeroforge.deploy.config import RunConfig, TrainConfig
from zeroforge.shared.metrics import snapshot_total
from zeroforge.shared.nets import NetConfig
from zeroforge.shared.search import SearchConfig
from zeroforge.shared.transport import (
    MemoryTransport,
    StreamConfig,
    ThreadTallies,
    WriterCounts,
)


def test_each_thread_reads_only_what_it_added():
    tallies = ThreadTallies()
    tallies.add(backpressure_wait_s=0.5, resent=2)
    seen: dict[str, WriterCounts] = {}

    def other() -> None:
        seen["fresh"] = tallies.mine()
        tallies.add(rerouted=3)
        tallies.add(backpressure_wait_s=1.0, rerouted=1)
        seen["after"] = tallies.mine()

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert seen == {"fresh": WriterCounts(), "after": WriterCounts(1.0, 0, 4)}
    assert tallies.mine() == WriterCounts(0.5, 2, 0)


def test_the_wire_form_goes_back_and_forth_and_refuses_a_wrong_shape():
    counts = WriterCounts(1.25, 3, 7)
    assert WriterCounts.from_wire(counts.to_wire()) == counts
    assert counts + WriterCounts(0.75, 1, 0) == WriterCounts(2.0, 4, 7)
    for bad in ([1.0, 2], None, "1,2,3"):
        with pytest.raises(ValueError, match="writer counts: expected 3 numbers"):
            WriterCounts.from_wire(bad)


def worker_on(transport: MemoryTransport, config: StreamConfig) -> SelfPlayService:
    train = TrainConfig(game="tictactoe", net=NetConfig.preset("tiny"),
                        search=SearchConfig(num_simulations=2),
                        selfplay=SelfPlayConfig(games_in_parallel=1),
                        run=RunConfig(torch_threads=1))
    ctx = train.context(transport.run_id, "memory://writer-counts")
    return SelfPlayService(ctx, train.net, train.search, train.selfplay,
                           transport.samples(config), transport.weights(), worker_id="w3",
                           seed=1)


@pytest.mark.timeout(60)
def test_a_workers_wait_on_a_full_stream_is_its_backpressure_metric():
    """The series are there at 0 from the start; an append that waited ~1 s for the
    learner's ack shows as ~1 s of ``selfplay_backpressure_seconds_total``, labelled with
    the worker, and nothing resent or rerouted."""
    transport = MemoryTransport("writer-counts")
    config = StreamConfig(max_backlog=2, append_timeout_s=30, room_check_interval_s=0.1)
    worker = worker_on(transport, config)
    names = ("selfplay_backpressure_seconds_total", "selfplay_games_resent_total",
             "selfplay_games_rerouted_total")
    start = worker.stats()
    for name in names:
        assert start["values"][name] == [[[["worker", "3"], ["worker_kind", "selfplay"]], 0.0]]
    transport.samples(config).append(make_games(2, start=100))  # the stream is full
    reader = transport.samples(config)

    def ack_later() -> None:
        time.sleep(1.0)
        reader.ack([i for i, _ in reader.read(2)])

    acker = threading.Thread(target=ack_later)
    acker.start()
    worker._append(make_games(1))
    acker.join()
    waited = snapshot_total(worker.stats(), names[0])
    assert 0.8 <= waited < 10, waited
    assert [snapshot_total(worker.stats(), n) for n in names[1:]] == [0, 0]
    worker._append(make_games(1, start=1))  # room: no more wait counted
    assert snapshot_total(worker.stats(), names[0]) == waited


def test_run_status_sums_the_workers_stream_writes():
    from zeroforge.deploy.runtime.status import RunStatus
    from zeroforge.shared.metrics import Recorder, merge

    workers = [Recorder(), Recorder()]
    for i, (r, (waited, resent, rerouted)) in enumerate(
            zip(workers, ((1.5, 0, 4), (2.25, 3, 0)), strict=True)):
        kind = {"worker_kind": "selfplay", "worker": str(i)}
        r.inc("selfplay_backpressure_seconds_total", waited, **kind)
        r.inc("selfplay_games_resent_total", resent, **kind)
        r.inc("selfplay_games_rerouted_total", rerouted, **kind)
    status = RunStatus.from_metrics(merge([r.snapshot() for r in workers]), run_id="r",
                                    state="running", elapsed_s=10.0)
    assert status.stream_writes == {"backpressure_s": 3.75, "resent": 3, "rerouted": 4}
    assert ("self-play waited 3.8 s for room (stream full), games resent 3, rerouted 4; "
            in status.text())
    assert RunStatus.from_json(json.loads(status.json_text())) == status
    old = status.to_json()
    del old["stream_writes"]  # JSON from before the key
    assert RunStatus.from_json(old).stream_writes == {}
    assert "stream full" not in RunStatus.from_json(old).text()
