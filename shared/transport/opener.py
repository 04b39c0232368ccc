"""``open_transport``: a run's ``Transport`` from a URL, Redis or in memory.

Its own module, above both implementations: they import the seams (``base.py``), this
imports them (each only when its URL comes).
"""

from __future__ import annotations

from collections.abc import Sequence

from zeroforge.shared.transport.base import Transport


def open_transport(url: str, run_id: str, stream_shards: int = 1,
                   stream_urls: Sequence[str] = (), weights_cache_dir: str | None = None,
                   role: str | None = None, auth_dir: str | None = None,
                   shared_by_threads: bool = False) -> Transport:
    """The transport of run ``run_id`` at ``url``: ``redis://``/``rediss://`` (connects),
    or ``memory://NAME`` (the process-wide in-memory transport of that name). Its sample
    stream is ``stream_shards`` streams (on ``stream_urls``, Redis only; see
    ``shared.transport.shards``); with ``weights_cache_dir`` (Redis only) weights are read
    through the node's cache there (``shared.transport.node_cache``); ``shared_by_threads``
    (Redis only): a host's transport, its connections bounded (``RedisTransport``)."""
    if url.startswith("memory://"):
        from zeroforge.shared.transport.memory import MemoryTransport

        return MemoryTransport.named(url, run_id, stream_shards)
    if url.startswith(("redis://", "rediss://", "unix://")):
        from zeroforge.shared.transport.redis_transport import RedisTransport

        return RedisTransport(url, run_id, stream_shards, stream_urls, weights_cache_dir,
                              role, auth_dir, shared_by_threads)
    scheme = url.split("://", 1)[0] if "://" in url else url
    raise ValueError(f"transport URL {scheme!r}: expected redis://, rediss:// or memory://")
