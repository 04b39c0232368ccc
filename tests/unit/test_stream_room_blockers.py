"""The room wait's per-process blockers (``stream_room._Blocker``): one per room list of a
connection pool, and gone with the pool. No server is needed: a client connects only when
it sends a command, and these never do."""

from __future__ import annotations

import gc
import weakref

import redis

from zeroforge.shared.transport.stream_room import _Blocker


def _client() -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=1, password="unused")


def test_one_blocker_per_room_list_of_a_pool():
    a, b = _client(), _client()
    first = _Blocker.of(a, "zf:r:samples:room")
    assert _Blocker.of(a, "zf:r:samples:room") is first
    assert _Blocker.of(a, "zf:r:samples:1:room") is not first
    assert _Blocker.of(b, "zf:r:samples:room") is not first  # another pool, its own read
    # clients sharing one pool (a host's workers) share its blockers
    assert _Blocker.of(redis.Redis(connection_pool=a.connection_pool),
                       "zf:r:samples:room") is first


def test_a_pool_dropped_takes_its_blockers_with_it():
    clients = [_client() for _ in range(50)]
    pools = [weakref.ref(c.connection_pool) for c in clients]
    for c in clients:
        _Blocker.of(c, "zf:r:samples:room")
    assert all(c.connection_pool in _Blocker._all for c in clients)
    held = len(_Blocker._all)
    del clients, c
    gc.collect()
    assert all(p() is None for p in pools)  # the registry kept none of them alive
    assert len(_Blocker._all) <= held - 50
