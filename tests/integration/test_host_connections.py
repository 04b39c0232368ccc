"""A host's workers share its transport: its connections to Redis are a handful, however
many workers it runs, also while every one of them is blocked waiting for room."""

from __future__ import annotations

import threading
import time

from tests.integration.test_transport import make_games
from zeroforge.shared.transport import RedisTransport, StreamConfig

WORKERS = 12


def connections(client, name: str) -> int:
    """Clients connected to the server under ``name`` (``CLIENT SETNAME``: tagged here)."""
    return sum(1 for c in client.client_list() if c.get("name") == name)


def tag_pool(transport: RedisTransport, name: str) -> None:
    """Name every connection the transport's pool opens, so the test counts only its own."""
    transport.redis.connection_pool.connection_kwargs["client_name"] = name


def test_blocked_workers_of_one_host_hold_one_blocked_read_not_one_each(
        redis_server, redis_client, run_id):
    """Twelve worker threads over one transport, each with its own sink, all blocked on a
    full stream: the host holds at most three connections (the blocked read, an append in
    flight, one spare), not twelve; each ack's room reaches them in turn, and every game
    lands once (compared as sets of game ids)."""
    config = StreamConfig(max_backlog=2, append_timeout_s=60, room_check_interval_s=2.0)
    host = RedisTransport(redis_server.url, run_id, shared_by_threads=True)
    tag_pool(host, "host-under-test")
    host.redis.connection_pool.disconnect()  # reopen the first connection with its name
    try:
        host.samples(config).append(make_games(2, start=900, t=2))  # full
        sinks = [host.samples(config) for _ in range(WORKERS)]
        appended: list[str] = []
        lock = threading.Lock()

        def worker(k: int) -> None:
            ids = sinks[k].append(make_games(1, start=k, t=2))
            with lock:
                appended.extend(ids)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(WORKERS)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        assert not appended, "appended past max_backlog"
        held_while_blocked = connections(redis_client, "host-under-test")
        reader = RedisTransport(redis_server.url, run_id).samples(config)
        seen: set[str] = set()
        deadline = time.monotonic() + 30
        while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
            got = reader.read(2, block_ms=200)
            seen |= {g.game_id for _, g in got}
            reader.ack([i for i, _ in got])
        for t in threads:
            t.join(5)
        while got := reader.read(10, block_ms=100):
            seen |= {g.game_id for _, g in got}
            reader.ack([i for i, _ in got])
        held_after = connections(redis_client, "host-under-test")
    finally:
        host.close()
    assert len(appended) == WORKERS
    assert seen == {f"g{k}" for k in range(WORKERS)} | {"g900", "g901"}
    assert 1 <= held_while_blocked <= 3, held_while_blocked
    assert held_after <= 3, held_after
    assert sum(s.room_checks for s in sinks) <= 6 * WORKERS  # woken, not polling
