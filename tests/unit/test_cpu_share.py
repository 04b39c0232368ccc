"""``selfplay.cpu_share``: a worker's thread held to a share of one core."""

from __future__ import annotations

import threading
import time

import pytest

from zeroforge.actors import cpu_share
from zeroforge.actors.config import SelfPlayConfig
from zeroforge.actors.cpu_share import WINDOW_S, CpuShare


class _Clock:
    """Thread CPU time and wall time that only move when told; a wait moves the wall."""

    def __init__(self) -> None:
        self.cpu = self.wall = 0.0

    def work(self, seconds: float) -> None:
        self.cpu += seconds
        self.wall += seconds


class _Stop:
    def __init__(self, clock: _Clock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.clock.wall += seconds
        return False


@pytest.fixture
def clock(monkeypatch) -> _Clock:
    c = _Clock()
    monkeypatch.setattr(cpu_share.time, "thread_time", lambda: c.cpu)
    monkeypatch.setattr(cpu_share.time, "monotonic", lambda: c.wall)
    return c


def test_a_quarter_share_sleeps_three_times_the_work(clock):
    share, stop = CpuShare(0.25), _Stop(clock)
    clock.work(0.1)
    assert share.hold(stop) == pytest.approx(0.3)
    clock.work(0.2)  # 0.3 s of CPU in 0.6 s of wall: 0.6 more to reach 1.2
    assert share.hold(stop) == pytest.approx(0.6)
    assert clock.cpu / clock.wall == pytest.approx(0.25)


def test_time_not_working_is_credit_only_within_a_window(clock):
    share, stop = CpuShare(0.5), _Stop(clock)
    clock.wall += 1.0  # a pause (the learner's pace): 1 s of wall, no CPU
    clock.work(0.4)  # within the credit: no sleep
    assert share.hold(stop) == 0.0 and stop.waits == []
    clock.wall += 2 * WINDOW_S  # a long pause ends the window: no burst banked past it
    share.hold(stop)
    clock.work(0.5)
    assert share.hold(stop) == pytest.approx(0.5)


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5])
def test_a_share_outside_0_1_is_refused(bad):
    with pytest.raises(ValueError, match="CPU share"):
        CpuShare(bad)
    if bad != 0.0:  # 0 in the config means no share at all
        with pytest.raises(ValueError, match="selfplay.cpu_share"):
            SelfPlayConfig(cpu_share=bad)


def test_a_busy_thread_keeps_to_its_share():
    """For real: a thread that computes flat out between holds uses at most about half
    a core (a loaded machine gives it less, never more; without the holds it takes the
    whole core an idle machine has)."""
    share, stop = CpuShare(0.5), threading.Event()
    cpu0, wall0 = time.thread_time(), time.monotonic()
    while time.monotonic() - wall0 < 1.5:
        end = time.thread_time() + 0.02
        while time.thread_time() < end:
            pass
        share.hold(stop)
    used = (time.thread_time() - cpu0) / (time.monotonic() - wall0)
    assert used <= 0.5 + 0.05, used


@pytest.mark.timeout(120)
def test_a_distributed_worker_keeps_its_configured_share():
    """``selfplay.cpu_share`` reaches the worker's ``run`` loop: its thread plays, and
    within a quarter core (it takes a whole one on an idle machine without the share)."""
    from tests.unit.test_pace import _worker
    from zeroforge.shared.transport import MemoryTransport

    transport = MemoryTransport("cpu-share")
    worker = _worker(transport, cpu_share=0.25)
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    clock = time.pthread_getcpuclockid(thread.ident)
    time.sleep(0.5)  # past the worker's first weights poll and first move
    cpu0, wall0 = time.clock_gettime(clock), time.monotonic()
    positions = worker.worker.stats.positions
    time.sleep(3.0)
    used = (time.clock_gettime(clock) - cpu0) / (time.monotonic() - wall0)
    stop.set()
    thread.join(timeout=30)
    assert worker.worker.stats.positions > positions  # it played
    assert used <= 0.25 + 0.08, used
    [(labels, slept)] = worker.stats()["values"]["selfplay_cpu_share_seconds_total"]
    assert dict(map(tuple, labels)) == {"worker_kind": "selfplay", "worker": "0"}
    # it slept to keep its share (a loaded machine may give it less than its share: then
    # it had no cause to)
    assert slept > 0 or used < 0.2, (slept, used)
