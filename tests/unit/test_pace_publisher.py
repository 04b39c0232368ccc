"""The learner's pace publisher: a publish when the pause decision changes, a renewal every
PACE_PUBLISH_S, nothing in between, and a failing store counted, never raised."""

import pytest

from zeroforge.learner import pace_publisher
from zeroforge.learner.pace_publisher import PacePublisher
from zeroforge.shared.pace import PACE_PUBLISH_S, Pace
from zeroforge.shared.transport import TransportError


class RecordingSignal:
    """A PaceSignal that keeps what it was given (or fails when told to)."""

    ttl_s = 5.0
    malformed = 0

    def __init__(self):
        self.published: list[Pace] = []
        self.cleared = 0
        self.fail = False

    def publish(self, pace):
        if self.fail:
            raise TransportError("redis down")
        self.published.append(pace)

    def read(self):
        return self.published[-1] if self.published else None

    def clear(self):
        if self.fail:
            raise TransportError("redis down")
        self.cleared += 1


BEHIND = Pace(samples_per_insert=2.0, target=16.0, tolerance=0.25, trainable=True)
BEHIND_LESS = Pace(samples_per_insert=5.0, target=16.0, tolerance=0.25, trainable=True)
CAUGHT_UP = Pace(samples_per_insert=15.0, target=16.0, tolerance=0.25, trainable=True)


@pytest.fixture
def clock(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(pace_publisher.time, "monotonic", lambda: now[0])
    return now


def test_only_a_changed_decision_or_an_old_record_is_published(clock):
    signal = RecordingSignal()
    pacer = PacePublisher(signal)
    assert pacer.offer(BEHIND) and pacer.pauses is True
    assert not pacer.offer(BEHIND_LESS)  # same decision, fresh record
    assert pacer.offer(CAUGHT_UP) and pacer.pauses is False  # the decision changed
    clock[0] += PACE_PUBLISH_S / 2
    assert not pacer.offer(CAUGHT_UP)
    clock[0] += PACE_PUBLISH_S
    assert pacer.offer(CAUGHT_UP)  # renewed before it could expire
    assert pacer.offer(CAUGHT_UP, force=True)
    assert signal.published == [BEHIND, CAUGHT_UP, CAUGHT_UP, CAUGHT_UP]


def test_a_failing_store_is_counted_and_the_next_offer_tries_again(clock, caplog):
    signal = RecordingSignal()
    errors = []
    pacer = PacePublisher(signal, on_error=errors.append)
    signal.fail = True
    assert not pacer.offer(BEHIND)
    pacer.clear()
    assert len(errors) == 2 and pacer.pauses is None
    assert sum("cannot publish its pace" in r.getMessage() for r in caplog.records) == 1
    signal.fail = False
    assert pacer.offer(BEHIND)  # nothing was published, so nothing holds it back
    pacer.clear()
    assert signal.published == [BEHIND] and signal.cleared == 1
