"""A learner whose Redis fails (reads and publishes raise ``TransportError``) still trains
on what it holds and checkpoints it; the failure is raised at the end of the turn, the
publish is tried again when Redis answers, and nothing is acked until it does."""

from __future__ import annotations

import pytest

from tests.unit.memory_learner import memory_learner
from tests.unit.test_sample_fuzz import real_games
from zeroforge.shared.samples import encode
from zeroforge.shared.transport import MemoryTransport, TransportError


def test_a_turn_with_redis_down_trains_checkpoints_and_then_raises(tmp_path):
    transport = MemoryTransport("outage")
    service = memory_learner(tmp_path, transport, checkpoint_every_s=0.0,
                             publish_every_steps=1, samples_per_insert=0.0)
    transport.samples().append_raw([encode(g) for g in real_games(4)])
    service.run_once(max_read=64, block_ms=0)
    assert service.games_received == 4 and service.learner.steps > 0
    version = transport.weights().latest_version()
    checkpoint = (tmp_path / "checkpoint.pt").stat().st_mtime_ns

    down = TransportError("cannot reach Redis at 127.0.0.1:6379: Connection refused")

    def fail(*args, **kwargs):
        raise down

    read, ack, publish = service.stream.read, service.stream.ack, service.weights.publish
    service.stream.read = fail  # type: ignore[method-assign]
    service.stream.ack = fail  # type: ignore[method-assign]
    service.weights.publish = fail  # type: ignore[method-assign]
    steps = service.learner.steps
    with pytest.raises(TransportError, match="Connection refused"):
        service.run_once(max_read=64, block_ms=0)
    assert service.learner.steps > steps  # it trained on what it held
    assert (tmp_path / "checkpoint.pt").stat().st_mtime_ns > checkpoint  # and saved it
    assert transport.weights().latest_version() == version  # nothing published

    service.stream.read, service.stream.ack, service.weights.publish = read, ack, publish
    turn = service.run_once(max_read=64, block_ms=0)  # Redis is back
    assert turn["published"] is not None
    assert transport.weights().latest_version() > version
    assert transport.samples().info().pending == 0
    service.close()
