"""The learner's pace in Redis: one small key per run that expires unless republished.

Key of a run (braces: the run id is a Redis Cluster hash tag, as for the other keys):

- ``zf:{RUN}:pace``: ``shared.pace.encode_pace`` bytes (a msgpack map), set with a TTL of
  ``ttl_s`` (``PACE_TTL_S``) on every publish

The learner publishes (``SET ... PX``) a few times a second at most; workers read (``GET``)
at most every ``PACE_READ_S``. A missing key (never published, expired after a learner
died, cleared at its stop) reads as None: workers play on. Content this code did not write
(garbage, another format, a key of another type) also reads as None, counted in
``malformed`` and logged in one line per run of bad reads, never raised: a worker's pace
check must not stop self-play.
"""

from __future__ import annotations

import logging
from typing import cast

import redis

from zeroforge.shared.pace import PACE_TTL_S, Pace, PaceFormatError, decode_pace, encode_pace
from zeroforge.shared.transport.connection import redis_errors
from zeroforge.shared.transport.fencing import epoch_key, fence_check, fenced_reply
from zeroforge.shared.transport.stream import check_run_id

log = logging.getLogger(__name__)


# KEYS: the run's learner epoch, the pace. ARGV: the writer's epoch, TTL in ms, the pace
# (empty: delete it).
_FENCED_WRITE_SCRIPT = fence_check() + """
if ARGV[3] == '' then return redis.call('DEL', KEYS[2]) end
return redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2])
"""


def check_ttl(ttl_s: float) -> float:
    if not ttl_s > 0:
        raise ValueError(f"pace signal: ttl_s must be > 0, got {ttl_s!r}")
    return float(ttl_s)


class PaceDecoder:
    """Decoding a stored pace for both transports: bad content is counted in ``malformed``
    and read as None, with one log line for each run of bad reads (readers look every
    half second; a line each time would flood the log)."""

    key: str

    def __init__(self) -> None:
        self.malformed = 0
        self._bad_streak = False

    def _decoded(self, blob: bytes | None) -> Pace | None:
        if blob is None:
            self._bad_streak = False
            return None
        try:
            pace = decode_pace(blob)
        except PaceFormatError as err:
            self._malformed(str(err))
            return None
        self._bad_streak = False
        return pace

    def _malformed(self, why: str) -> None:
        self.malformed += 1
        if not self._bad_streak:
            self._bad_streak = True
            log.warning("pace signal %s: %s; read as absent (self-play is not throttled)",
                        self.key, why)


class RedisPaceSignal(PaceDecoder):
    """``PaceSignal`` of one run in Redis (see the module docstring for the key)."""

    def __init__(self, client: redis.Redis, run_id: str, ttl_s: float = PACE_TTL_S,
                 epoch: int | None = None) -> None:
        """``epoch``: the publishing learner's; a publish or clear then fails with
        ``FencedError`` once a newer learner has taken a higher one."""
        super().__init__()
        self.epoch = epoch
        self._fenced_write = client.register_script(_FENCED_WRITE_SCRIPT)
        self.redis = client
        self.run_id = check_run_id(run_id)
        self.ttl_s = check_ttl(ttl_s)
        self.key = f"zf:{{{run_id}}}:pace"

    def publish(self, pace: Pace) -> None:
        self._write(encode_pace(pace))

    def _write(self, blob: bytes | None) -> None:
        """SET the pace for ``ttl_s`` (DEL with None), fenced by ``epoch``."""
        ttl_ms = max(int(self.ttl_s * 1000), 1)
        epoch = "" if self.epoch is None else self.epoch  # '': a writer without one
        with redis_errors(self.redis):
            try:
                self._fenced_write(keys=[epoch_key(self.run_id), self.key],
                                   args=[epoch, ttl_ms, b"" if blob is None else blob])
            except redis.ResponseError as err:
                fenced = fenced_reply(err, f"pace write to {self.key}", self.epoch)
                if fenced is None:
                    raise
                raise fenced from None

    def read(self) -> Pace | None:
        try:
            with redis_errors(self.redis):
                # Clients are made with decode_responses=False: replies are bytes, never str.
                blob = cast("bytes | None", self.redis.get(self.key))
        except redis.ResponseError as err:
            # WRONGTYPE: the key holds a hash, list... that someone else put there.
            self._malformed(f"unreadable ({str(err).splitlines()[0]})")
            return None
        return self._decoded(blob)

    def clear(self) -> None:
        self._write(None)
