"""``deploy/redis_follow.py``: a scaled-up run's servers get the larger maxclients and
maxmemory of the most workers wanted so far, in one line a kind of server; a scale-down
keeps them; a server that refuses is said in one line and the run goes on. (The servers
here are stand-ins of our own seam; a real redis-server resized in place:
tests/integration/test_redis_sizing.py.)"""

from __future__ import annotations

import dataclasses

from zeroforge.deploy.redis_follow import SizingFollower, grown
from zeroforge.shared.transport import RedisServerConfig, RedisSizing, TransportError

MB = 1 << 20


def sized(clients: int, memory_mb: int) -> RedisSizing:
    return RedisSizing(maxclients=clients, maxmemory_bytes=memory_mb * MB,
                       normal_limit_bytes=64 * MB, reasons=(f"for {clients}/{memory_mb}",))


class Server:
    """A started server as the follower sees it: its config's sizing, and resize."""

    def __init__(self, sizing: RedisSizing | None, refuse: str = "") -> None:
        self.config = RedisServerConfig(sizing=sizing)
        self.refuse = refuse
        self.resized: list[RedisSizing] = []

    def resize(self, sizing: RedisSizing) -> None:
        if self.refuse:
            raise TransportError(self.refuse)
        self.resized.append(sizing)
        self.config = dataclasses.replace(self.config, sizing=sizing)


def by_workers(workers: int) -> dict[str, RedisSizing]:
    """More workers, more memory (replies in flight) and, past 1,000, more clients."""
    return {"run": sized(max(10_000, workers * 10), 64 + workers // 8),
            "stream": sized(max(10_000, workers * 5), 32)}


def test_a_scale_up_grows_each_server_once_and_a_scale_down_keeps_the_figures():
    run, streams = Server(sized(10_000, 65)), [Server(sized(10_000, 32)) for _ in range(2)]
    follower = SizingFollower(by_workers, {"run": [run], "stream": streams}, workers=8)
    assert follower.follow(8) == [] and follower.follow(4) == []
    assert follower.follow(80) == [
        "run's Redis sized for 80 workers (zeroforge scale): maxmemory 65mb -> 74mb"]
    assert run.config.sizing == dataclasses.replace(
        sized(10_000, 74), reasons=("for 10000/74",))
    assert all(s.resized == [] for s in streams)  # nothing of theirs grew
    lines = follower.follow(4000)
    assert lines == [
        "run's Redis sized for 4000 workers (zeroforge scale): maxclients 10,000 -> 40,000, "
        "maxmemory 74mb -> 564mb",
        "each stream server sized for 4000 workers (zeroforge scale): maxclients 10,000 -> "
        "20,000"]
    assert [len(s.resized) for s in streams] == [1, 1]
    assert follower.follow(100) == [] and follower.follow(4000) == []  # never smaller
    assert run.config.sizing.maxclients == 40_000 and len(run.resized) == 2


def test_only_maxclients_and_maxmemory_grow_and_never_shrink():
    old = dataclasses.replace(sized(20_000, 100), normal_limit_bytes=0)  # 0: no limit
    new = sized(15_000, 120)
    got = grown(old, new)
    assert (got.maxclients, got.maxmemory_bytes) == (20_000, 120 * MB)
    assert got.normal_limit_bytes == 0 and got.reasons == new.reasons
    assert grown(old, sized(10_000, 50)) is old
    assert grown(None, new) is new


def test_a_server_that_refuses_is_one_line_and_the_next_scale_up_tries_again():
    run = Server(sized(10_000, 65), refuse="cannot resize redis-server on 127.0.0.1:1: "
                                           "Connection refused")
    follower = SizingFollower(by_workers, {"run": [run]}, workers=8)
    assert follower.follow(80) == [
        "could not size run's Redis for 80 workers (it keeps its figures): cannot resize "
        "redis-server on 127.0.0.1:1: Connection refused"]
    assert follower.follow(80) == []  # said once, not every progress line
    run.refuse = ""
    assert len(follower.follow(160)) == 1 and run.config.sizing.maxmemory_bytes == 84 * MB

