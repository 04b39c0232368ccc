"""A learner started while its Redis is down waits for it to take its epoch: with no
patience set it waits as long as the outage lasts (one log line, then one every 30 s),
with a patience it gives up with the Redis error."""

from __future__ import annotations

import logging

import pytest

from zeroforge.shared.transport import TransportError, take_epoch_patiently


class DownFor:
    """A transport whose Redis answers ``take_epoch`` after ``down_s`` of a fake clock."""

    def __init__(self, down_s: float) -> None:
        self.down_s, self.now, self.calls = down_s, 0.0, 0

    def take_epoch(self) -> int:
        self.calls += 1
        if self.now < self.down_s:
            raise TransportError("Error 111 connecting to redis:6379. Connection refused.")
        return 7

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_without_patience_it_waits_out_a_three_minute_outage(caplog):
    t = DownFor(180.0)
    with caplog.at_level(logging.WARNING):
        epoch = take_epoch_patiently(t, sleep=t.sleep, clock=lambda: t.now)
    assert epoch == 7 and t.now >= 180.0
    # backoff grows to 5 s: not a retry storm (36 tries at 5 s, plus the ramp)
    assert t.calls < 50, t.calls
    lines = [r for r in caplog.records if "cannot take a learner epoch" in r.getMessage()]
    # it says so again while it waits, but not at every try (one line every 30 s)
    assert 2 <= len(lines) <= t.calls // 4, (len(lines), t.calls)


def test_with_a_patience_it_gives_up_with_the_redis_error():
    t = DownFor(1e9)
    with pytest.raises(TransportError, match="Connection refused"):
        take_epoch_patiently(t, 30.0, sleep=t.sleep, clock=lambda: t.now)
    assert 25.0 <= t.now <= 30.0


def test_a_redis_that_answers_at_once_costs_no_wait():
    t = DownFor(0.0)
    assert take_epoch_patiently(t, sleep=t.sleep, clock=lambda: t.now) == 7
    assert t.now == 0.0 and t.calls == 1
