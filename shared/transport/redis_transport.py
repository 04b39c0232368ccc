"""``Transport`` over Redis: one connection per process, the run's endpoints on it."""

from __future__ import annotations

from zeroforge.shared.pace import PACE_TTL_S
from zeroforge.shared.transport.connection import connect
from zeroforge.shared.transport.pace_signal import RedisPaceSignal
from zeroforge.shared.transport.results import EvalResultsStore
from zeroforge.shared.transport.stream import SampleStream, StreamConfig, check_run_id


class RedisTransport:
    """The data plane of run ``run_id`` in the Redis at ``url`` (connects at once; a
    wrong password or an unreachable server raises ``TransportError``)."""

    def __init__(self, url: str, run_id: str) -> None:
        self.run_id = check_run_id(run_id)
        self.url = url
        self.redis = connect(url)
        self._closed = False

    def samples(self, config: StreamConfig | None = None) -> SampleStream:
        return SampleStream(self.redis, self.run_id, config)

    def weights(self, keep: int = 3):  # -> WeightStore (imports torch, so lazily)
        from zeroforge.shared.transport.weight_store import WeightStore

        return WeightStore(self.redis, self.run_id, keep=keep)

    def results(self) -> EvalResultsStore:
        return EvalResultsStore(self.redis, self.run_id)

    def pace(self, ttl_s: float = PACE_TTL_S) -> RedisPaceSignal:
        return RedisPaceSignal(self.redis, self.run_id, ttl_s)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.redis.close()
