"""A distributed run's own redis-servers follow the workers it is scaled to.

The driver starts the run's Redis and its stream servers sized for ``selfplay.workers``
(``deploy.plan.sizing_for_run``, docs/scaling.md "Redis sized by the plan"). Two of the
figures grow with the workers: ``maxclients`` (connections: hosts and nodes) and
``maxmemory`` (on the run's Redis, the replies in flight: every node, or every worker
without the node cache, reads each new weights version at once, and those replies count
against maxmemory; with ``noeviction`` a full Redis refuses the learner's next publish).
``zeroforge scale`` changes only what the controller wants; so at every progress line the
driver hands the workers wanted now to ``SizingFollower.follow``, which sizes the servers
for the most workers wanted so far and, where maxclients or maxmemory grew, sets them on
each server at once (``RedisServer.resize``: CONFIG SET, no restart, kept for a
supervised restart). Never smaller: after a scale-down the larger figures stay (memory
in use may be above a smaller maxmemory, and a later scale-up needs them again).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from zeroforge.deploy.plan import SERVER_NAMES
from zeroforge.shared.transport import RedisSizing, TransportError, conf_bytes


class Resizable(Protocol):
    """A redis-server the driver started (``shared.transport.RedisServer``)."""

    @property
    def config(self) -> object:
        """Its config; ``config.sizing`` (a ``RedisSizing`` or None) is what it runs with."""
        ...

    def resize(self, sizing: RedisSizing) -> None:
        """Run with ``sizing`` from now on (``TransportError`` if it cannot)."""
        ...


class SizingFollower:
    """Keeps the servers of ``servers`` (by kind, ``run`` and ``stream``, as
    ``sizing_for`` names them) sized for the most self-play workers the run has wanted.
    ``sizing_for(workers)``: the sizing of each kind for that many workers
    (``deploy.plan.run_sizer``); ``workers``: what the servers were started for."""

    def __init__(self, sizing_for: Callable[[int], Mapping[str, RedisSizing]],
                 servers: Mapping[str, Sequence[Resizable]], workers: int) -> None:
        self._sizing_for = sizing_for
        self._servers = {kind: list(found) for kind, found in servers.items() if found}
        self.sized_for = workers
        """The most workers wanted so far: the servers are sized for these."""

    def follow(self, workers: int) -> list[str]:
        """Size the servers for ``workers`` wanted now if that is more than ever before;
        returns a line for each kind of server resized, and one for each that refused
        (the run goes on with the figures it had; the next scale-up tries again)."""
        if workers <= self.sized_for or not self._servers:
            return []
        self.sized_for = workers
        wanted = self._sizing_for(workers)
        lines = []
        for kind, servers in self._servers.items():
            if kind not in wanted:
                continue
            changes: list[str] = []
            for server in servers:
                old: RedisSizing | None = getattr(server.config, "sizing", None)
                new = grown(old, wanted[kind])
                if new == old:
                    continue
                try:
                    server.resize(new)
                except TransportError as err:
                    lines.append(f"could not size {SERVER_NAMES.get(kind, kind)} for {workers} "
                                 f"workers (it keeps its figures): {err}")
                    break
                changes = changes or describe(old, new)
            else:
                if changes:
                    lines.append(f"{SERVER_NAMES.get(kind, kind)} sized for {workers} workers "
                                 f"(zeroforge scale): {', '.join(changes)}")
        return lines


def grown(old: RedisSizing | None, new: RedisSizing) -> RedisSizing:
    """``old`` with maxclients and maxmemory raised to ``new``'s where larger (the figures
    that grow with workers; the output-buffer limits stay as started), and ``new``'s
    reasons; ``new`` itself when the server had no sizing."""
    if old is None:
        return new
    clients = max(old.maxclients, new.maxclients)
    memory = max(old.maxmemory_bytes, new.maxmemory_bytes)
    if (clients, memory) == (old.maxclients, old.maxmemory_bytes):
        return old
    return dataclasses.replace(old, maxclients=clients, maxmemory_bytes=memory,
                               reasons=new.reasons)


def describe(old: RedisSizing | None, new: RedisSizing) -> list[str]:
    """What changed, as ``maxmemory 70mb -> 81mb`` (``old`` None: Redis's defaults)."""
    if old is None:
        return [f"maxclients {new.maxclients:,}", f"maxmemory {conf_bytes(new.maxmemory_bytes)}"]
    out = []
    if new.maxclients != old.maxclients:
        out.append(f"maxclients {old.maxclients:,} -> {new.maxclients:,}")
    if new.maxmemory_bytes != old.maxmemory_bytes:
        out.append(f"maxmemory {conf_bytes(old.maxmemory_bytes)} -> "
                   f"{conf_bytes(new.maxmemory_bytes)}")
    return out
