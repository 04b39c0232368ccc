"""Evaluation results of a run in Redis: the newest results, their history, the best weights.

Keys of a run (braces: the run id is a Redis Cluster hash tag, as for the other keys):

- ``zf:{RUN}:eval``: msgpack map, the newest evaluation (``RatingService.results()``)
- ``zf:{RUN}:eval:history``: list of the same maps, newest first, the last ``history``
- ``zf:{RUN}:eval:best``: msgpack map ``{version, sha256, weights}``: the weights that the
  evaluator gates new versions against, kept here because the weight store prunes old
  versions and a restarted evaluator must not forget its best

Results are plain data (str, int, float, bool, None, lists, maps): msgpack, never pickle.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, cast

import msgpack
import redis

from zeroforge.shared.transport.connection import TransportError, redis_errors
from zeroforge.shared.transport.stream import check_run_id


class ResultsFormatError(TransportError):
    """A results key holds something this code did not write (or a damaged blob)."""


class EvalResultsStore:
    """The evaluation results of one run (see the module docstring for the keys)."""

    def __init__(self, client: redis.Redis, run_id: str, history: int = 200) -> None:
        if history < 1:
            raise ValueError(f"EvalResultsStore: history must be >= 1, got {history}")
        self.redis = client
        self.run_id = check_run_id(run_id)
        self.history_len = history
        self.key = f"zf:{{{run_id}}}:eval"
        self.history_key = f"{self.key}:history"
        self.best_key = f"{self.key}:best"

    def put(self, results: Mapping[str, Any]) -> None:
        """Store ``results`` as the newest and append them to the history, atomically."""
        blob = msgpack.packb(dict(results), use_bin_type=True)
        with redis_errors(self.redis):
            pipe = self.redis.pipeline(transaction=True)
            pipe.set(self.key, blob)
            pipe.lpush(self.history_key, blob)
            pipe.ltrim(self.history_key, 0, self.history_len - 1)
            pipe.execute()

    def latest(self) -> dict | None:
        """The newest results, or None before the first evaluation."""
        with redis_errors(self.redis):
            # Clients are made with decode_responses=False: replies are bytes, never str.
            blob = cast("bytes | None", self.redis.get(self.key))
        return None if blob is None else self._decode(blob, self.key)

    def history(self, limit: int | None = None) -> list[dict]:
        """Up to ``limit`` (default: all kept) results, newest first."""
        end = -1 if limit is None else max(limit, 1) - 1
        with redis_errors(self.redis):
            blobs = cast("list[bytes]", self.redis.lrange(self.history_key, 0, end))  # as above
        return [self._decode(b, self.history_key) for b in blobs]

    def put_best(self, version: int, weights: bytes) -> None:
        """Record ``weights`` (a ``weights_to_bytes`` blob) as the best, version ``version``."""
        blob = msgpack.packb({"version": int(version), "weights": bytes(weights),
                              "sha256": hashlib.sha256(weights).hexdigest()},
                             use_bin_type=True)
        with redis_errors(self.redis):
            self.redis.set(self.best_key, blob)

    def best(self) -> tuple[int, bytes] | None:
        """``(version, weights blob)`` of the best weights, or None if none is recorded.
        Raises ResultsFormatError if the record is malformed or fails its sha256."""
        with redis_errors(self.redis):
            blob = cast("bytes | None", self.redis.get(self.best_key))  # as in latest()
        if blob is None:
            return None
        entry = self._decode(blob, self.best_key)
        version, weights, sha = entry.get("version"), entry.get("weights"), entry.get("sha256")
        if not isinstance(version, int) or not isinstance(weights, bytes) or not isinstance(
                sha, str):
            raise ResultsFormatError(f"{self.best_key}: not a best-weights record")
        if hashlib.sha256(weights).hexdigest() != sha:
            raise ResultsFormatError(f"{self.best_key}: weights fail their sha256 check")
        return version, weights

    @staticmethod
    def _decode(blob: bytes, key: str) -> dict:
        try:
            value = msgpack.unpackb(blob, raw=False)
        except Exception as err:  # msgpack raises several unrelated types for garbage
            raise ResultsFormatError(f"{key}: not msgpack ({type(err).__name__})") from None
        if not isinstance(value, dict):
            raise ResultsFormatError(f"{key}: holds a {type(value).__name__}, not a map")
        return value
