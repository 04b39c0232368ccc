"""The actor lease (``deploy/ray/lease.py``) on a clock the test moves."""

from __future__ import annotations

import threading
import time

import pytest

from zeroforge.deploy.config import DistributedConfig
from zeroforge.deploy.ray.lease import Lease


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_lease_expires_once_after_lease_s_without_a_renewal():
    clock, expired = Clock(), []
    lease = Lease(30.0, expired.append, clock)
    clock.now += 29.0
    assert not lease.check() and expired == []
    lease.renew()  # a controller called: 30 s from now
    clock.now += 29.0
    assert not lease.check()
    clock.now += 2.0
    assert lease.check() and expired == [31.0]
    clock.now += 100.0
    assert lease.check() and expired == [31.0]  # once only
    lease.renew()  # too late: an expired lease stays expired
    assert lease.expired and len(expired) == 1


def test_no_lease_never_expires():
    clock, expired = Clock(), []
    lease = Lease(0.0, expired.append, clock).start()
    clock.now += 1e9
    assert not lease.check() and expired == [] and lease._thread is None


def test_the_watch_thread_expires_a_lease_nobody_renews_and_not_one_that_is_renewed():
    fired = threading.Event()
    kept = Lease(0.6, lambda idle: fired.set()).start()
    renewed_expired = threading.Event()
    renewed = Lease(0.6, lambda idle: renewed_expired.set()).start()
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        renewed.renew()
        time.sleep(0.05)
    assert fired.is_set() and not renewed_expired.is_set()
    renewed.close()
    kept.close()


def test_a_lease_shorter_than_five_monitor_ticks_is_refused():
    with pytest.raises(ValueError, match="lease_s must be 0 .* at least 5 monitor"):
        DistributedConfig(lease_s=3.0, monitor_interval_s=1.0)
    with pytest.raises(ValueError, match="got -1"):
        DistributedConfig(lease_s=-1.0)
    assert DistributedConfig(lease_s=0.0).lease_s == 0.0
    assert DistributedConfig(lease_s=2.5, monitor_interval_s=0.5).lease_s == 2.5


def test_a_hang_timeout_shorter_than_five_monitor_ticks_is_refused():
    with pytest.raises(ValueError, match="hang_s must be 0 .* at least 5 monitor"):
        DistributedConfig(hang_s=3.0, monitor_interval_s=1.0)
    with pytest.raises(ValueError, match="hang_s must be 0"):
        DistributedConfig(hang_s=-1.0)
    assert DistributedConfig(hang_s=0.0).hang_s == 0.0
