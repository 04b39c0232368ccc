"""Fencing: only the newest learner of a run writes.

A learner that outlives its replacement (a kill not delivered to a partitioned node, a long
SIGSTOP or GC pause, the lease-expiry path that writes a final checkpoint) must not
interleave its acks, publishes and pace with its successor's. So each learner incarnation
takes an *epoch* when it starts: ``INCR`` of the run's epoch key in the run's Redis,
copied to every stream shard's server (raised, never lowered) before it reads anything.
Every write a learner makes through a transport that has taken an epoch checks it in the
same Lua script that writes: a stored epoch above the writer's refuses the write with
``FENCED <newer>``, raised here as ``FencedError``. The checkpoint file has its own fence
(``learner.run_dir_fence``).

Key of a run (braces: the run id is a Redis Cluster hash tag, as for the other keys):
- ``zf:{RUN}:learner:epoch``: the newest learner's epoch (an integer), on the run's Redis
  and on each stream shard's server.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis

from zeroforge.shared.transport.connection import patiently, redis_errors

log = logging.getLogger(__name__)


class FencedError(RuntimeError):
    """A write refused because a newer learner (or controller: ``holder``) of the run has
    taken a higher epoch: the writer must stop (retrying cannot help; it is not a
    ``TransportError``)."""

    def __init__(self, what: str, epoch: int, newer: int, holder: str = "learner") -> None:
        super().__init__(f"{what} refused: this {holder} holds epoch {epoch}, a newer "
                         f"{holder} of the run took epoch {newer}")
        self.epoch = epoch
        self.newer = newer


def epoch_key(run_id: str) -> str:
    return f"zf:{{{run_id}}}:learner:epoch"


def fence_check(key: int = 1, arg: int = 1) -> str:
    """The Lua that opens a fenced script: ``KEYS[key]`` the epoch key, ``ARGV[arg]`` the
    writer's epoch (an empty string: a writer without one, not checked)."""
    return f"""
if ARGV[{arg}] ~= '' then
  local fence_epoch = tonumber(redis.call('GET', KEYS[{key}]) or '0')
  if fence_epoch > tonumber(ARGV[{arg}]) then
    return redis.error_reply('FENCED ' .. fence_epoch)
  end
end
"""


_RAISE_SCRIPT = """
local stored = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > stored then redis.call('SET', KEYS[1], ARGV[1]) end
return stored
"""


def take_epoch(run_redis: redis.Redis, shard_servers: Sequence[redis.Redis],
               run_id: str) -> int:
    """A new epoch for a learner of ``run_id``: one above any taken before, stored on the
    run's Redis and raised to it on each of ``shard_servers`` (which may include it)."""
    key = epoch_key(run_id)
    with redis_errors(run_redis):
        epoch = int(run_redis.incr(key))
    for server in shard_servers:
        if server is not run_redis:
            with redis_errors(server):
                server.eval(_RAISE_SCRIPT, 1, key, epoch)
    return epoch


def take_epoch_patiently(transport: Any, patience_s: float | None = None, *,
                         sleep: Callable[[float], None] = time.sleep,
                         clock: Callable[[], float] = time.monotonic) -> int:
    """``transport.take_epoch()``, waiting out an unreachable Redis (``patiently``): a
    learner restarted while its Redis is down waits for it rather than crash (three crashes
    within minutes would fail the run over an outage it could have waited out)."""
    return int(patiently(transport.take_epoch, "take a learner epoch", patience_s,
                         sleep=sleep, clock=clock))


def fenced_reply(err: Exception, what: str, epoch: int | None,
                 holder: str = "learner") -> FencedError | None:
    """The ``FencedError`` a script's ``FENCED <newer>`` error reply stands for (None for
    any other error)."""
    text = str(err)
    if epoch is None or not isinstance(err, redis.ResponseError) or not text.startswith(
            "FENCED "):
        return None
    return FencedError(what, epoch, int(text.split()[1]), holder)


class MemoryFence:
    """A run's epoch in memory (``MemoryTransport``'s twin of the epoch key)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.epoch = 0

    def take(self) -> int:
        with self._lock:
            self.epoch += 1
            return self.epoch

    def check(self, what: str, epoch: int | None, holder: str = "learner") -> None:
        """``FencedError`` if a writer of ``epoch`` (None: unfenced) has been fenced off."""
        if epoch is not None and self.epoch > epoch:
            raise FencedError(what, epoch, self.epoch, holder)
