"""``Transport`` over Redis: one connection per process and server, the run's endpoints.

Weights, results and the pace live in the run's Redis (``url``). The sample stream is
one stream there, or ``stream_shards`` streams (``shared.transport.shards``) spread over
``stream_urls`` (shard K on ``stream_urls[K % len]``; none given: all in the run's Redis).
With ``weights_cache_dir``, weights are read through the node's cache there
(``shared.transport.node_cache``): one fetch from Redis per node and version.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis

from zeroforge.shared.pace import PACE_TTL_S
from zeroforge.shared.transport.base import SampleStreamEndpoint
from zeroforge.shared.transport.connection import connect
from zeroforge.shared.transport.control_state import RedisControlStateStore
from zeroforge.shared.transport.fencing import take_epoch
from zeroforge.shared.transport.pace_signal import RedisPaceSignal
from zeroforge.shared.transport.results import EvalResultsStore
from zeroforge.shared.transport.shards import ShardedSampleStream
from zeroforge.shared.transport.stream import SampleStream, StreamConfig, check_run_id

HOST_CONNECTIONS = 3
"""Connections a host's shared transport opens to a server besides its shards' blocked
reads: calls of its threads at once (appends, weight and pace reads take milliseconds)."""


def host_connection_bounds(url: str, stream_shards: int, stream_urls: Sequence[str] = ()
                           ) -> dict[str, int]:
    """The most connections a host's shared transport opens to each server (by URL):
    ``HOST_CONNECTIONS`` plus one a stream shard the server holds (its blocked read)."""
    urls = list(stream_urls) or [url]
    return {u: HOST_CONNECTIONS + sum(1 for k in range(stream_shards)
                                      if urls[k % len(urls)] == u)
            for u in dict.fromkeys([url, *urls])}


class RedisTransport:
    """The data plane of run ``run_id`` in the Redis at ``url`` (connects at once; a
    wrong password or an unreachable server raises ``TransportError``)."""

    def __init__(self, url: str, run_id: str, stream_shards: int = 1,
                 stream_urls: Sequence[str] = (), weights_cache_dir: str | None = None,
                 role: str | None = None, auth_dir: str | None = None,
                 shared_by_threads: bool = False) -> None:
        """``role`` / ``auth_dir``: the Redis user this process connects as, where a URL
        carries no password (``connection.connect``, ``acl.py``). ``shared_by_threads``:
        a host's transport, whose workers' threads share it: each server gets at most
        ``HOST_CONNECTIONS`` connections plus one per stream shard on it (the shard's one
        blocked read for room, ``stream_room``), whatever the threads."""
        self.run_id = check_run_id(run_id)
        self.role = role
        self.auth_dir = auth_dir
        self.weights_cache_dir = weights_cache_dir
        self._caches: list = []
        if stream_shards < 1:
            raise ValueError(f"stream_shards must be >= 1, got {stream_shards}")
        self.url = url
        self.stream_shards = stream_shards
        urls = list(stream_urls) or [url]
        self._bounds = (host_connection_bounds(url, stream_shards, urls)
                        if shared_by_threads else {})
        self.redis = connect(url, role, auth_dir, self._bounds.get(url))
        self._closed = False
        self.epoch: int | None = None
        """The learner epoch this transport took (``take_epoch``): its sample streams,
        weight store and pace then write only while no newer learner has taken one."""
        self._clients = {url: self.redis}
        try:
            self.stream_clients = [self._client(u) for u in urls]
            """The servers the stream shards are spread over, in order."""
        except Exception:
            self.close()
            raise

    def _client(self, url: str) -> redis.Redis:
        if url not in self._clients:
            self._clients[url] = connect(url, self.role, self.auth_dir,
                                         self._bounds.get(url))
        return self._clients[url]

    def take_epoch(self) -> int:
        """Fence off every earlier learner of the run (``shared.transport.fencing``): the
        endpoints this transport hands out from now on write under the new epoch."""
        self.epoch = take_epoch(self.redis, self.stream_clients, self.run_id)
        return self.epoch

    def samples(self, config: StreamConfig | None = None) -> SampleStreamEndpoint:
        clients = self.stream_clients
        streams = [SampleStream(clients[k % len(clients)], self.run_id, config, shard=k,
                                epoch=self.epoch)
                   for k in range(self.stream_shards)]
        return streams[0] if len(streams) == 1 else ShardedSampleStream(streams)

    def weights(self, keep: int = 3, signer=None, verifier=None,
                channel: str = ""):  # -> WeightSink
        """The weight store (imported lazily: it imports torch); ``signer`` signs each
        publish, ``verifier`` refuses versions it does not (``signing.py``); ``channel``:
        "" or the averaged weights' (``weight_store.AVERAGE_CHANNEL``), which only the
        evaluator reads, so never through the node cache."""
        from zeroforge.shared.transport.weight_store import WeightStore

        store = WeightStore(self.redis, self.run_id, keep=keep, epoch=self.epoch,
                            signer=signer, verifier=verifier, channel=channel)
        if not self.weights_cache_dir or channel:
            return store
        from zeroforge.shared.transport.node_cache import NodeCachedWeights

        cached = NodeCachedWeights(store, self.weights_cache_dir)
        self._caches.append(cached)
        return cached

    def results(self) -> EvalResultsStore:
        return EvalResultsStore(self.redis, self.run_id)

    def pace(self, ttl_s: float = PACE_TTL_S) -> RedisPaceSignal:
        return RedisPaceSignal(self.redis, self.run_id, ttl_s, epoch=self.epoch)

    def control_state(self) -> RedisControlStateStore:
        return RedisControlStateStore(self.redis, self.run_id)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for cache in self._caches:
                cache.close()
            for client in self._clients.values():
                client.close()
