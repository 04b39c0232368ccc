"""The run controller's state, saved in the run's store so that a new driver can take over.

The controller of a distributed run lives and dies with its driver. A driver killed on a
cluster it joined leaves the run's detached actors running; a new driver for the same run
re-attaches to them (``deploy/ray/handle.py``) and its controller starts from the state
its predecessor saved here (desired counts, restarts, counter floors, each actor's last
report). In Redis, one key per run (braces: the run id is a Redis Cluster hash tag):

- ``zf:{RUN}:control``: a msgpack map ``{"v": 1, "saved": epoch seconds, "state": {...}}``
- ``zf:{RUN}:control:epoch``: the newest controller's epoch (an integer; kept after the run)

The controller replaces it every couple of seconds and deletes it when the run ends. Each
controller *claims* the store first (``INCR`` of the epoch key) and every save and clear
checks its epoch in the script that writes (``shared.transport.fencing``): a controller that
outlives its successor (its driver cut off from the cluster but not from Redis) cannot
overwrite the state the successor saves, nor delete it.
Something this code did not write there loads as None (counted in ``malformed``, one line
logged): a new driver then adopts the live actors without the old floors, never fails.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, cast

import msgpack
import redis

from zeroforge.shared.transport.connection import redis_errors
from zeroforge.shared.transport.fencing import fence_check, fenced_reply
from zeroforge.shared.transport.stream import check_run_id

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
_TUPLE = 1
"""msgpack extension code of a tuple: the controller's counter floors are keyed by
``(name, ((label, value), ...))`` tuples, which a plain msgpack array would turn into
lists (unhashable: the map would not load)."""


def _pack_tuple(obj: Any) -> msgpack.ExtType:
    if isinstance(obj, tuple):
        return msgpack.ExtType(_TUPLE, _packb(list(obj)))
    raise TypeError(f"cannot save a {type(obj).__name__} in a control state")


def _packb(obj: Any) -> bytes:
    # strict_types: tuples reach ``default`` instead of being packed as arrays
    return cast(bytes, msgpack.packb(obj, strict_types=True, default=_pack_tuple))


def _unpack_ext(code: int, data: bytes) -> Any:
    if code != _TUPLE:
        raise ValueError(f"unknown extension {code}")
    return tuple(_unpackb(data))


def _unpackb(blob: bytes) -> Any:
    return msgpack.unpackb(blob, strict_map_key=False, ext_hook=_unpack_ext)


@dataclass(frozen=True)
class SavedControlState:
    """What a controller saved: its ``controller_state()`` and when."""

    state: dict[str, Any]
    """The controller's plain-data state (``Controller.controller_state``)."""
    saved: float
    """Epoch seconds of the save (wall clock: the reader may be on another machine)."""

    @property
    def age_s(self) -> float:
        """Seconds since the save (never negative, whatever the clocks say)."""
        return max(0.0, time.time() - self.saved)


def encode_control_state(state: dict[str, Any], saved: float | None = None) -> bytes:
    """``state`` (plain data: maps, lists, tuples, numbers, strings) as the stored bytes;
    tuples come back as tuples. ``TypeError`` for anything else."""
    return _packb({"v": FORMAT_VERSION, "saved": time.time() if saved is None else saved,
                   "state": state})


def decode_control_state(blob: bytes) -> SavedControlState:
    """The stored bytes back; ``ValueError`` saying what is wrong with anything else."""
    try:
        doc = _unpackb(blob)
    except Exception as err:  # msgpack raises several types for garbage
        raise ValueError(f"not msgpack ({type(err).__name__})") from None
    if not isinstance(doc, dict) or doc.get("v") != FORMAT_VERSION:
        raise ValueError("not a control state of this version")
    state, saved = doc.get("state"), doc.get("saved")
    if not isinstance(state, dict) or not isinstance(saved, int | float):
        raise ValueError("control state without its state map or save time")
    return SavedControlState(state, float(saved))


class ControlStateMalformed:
    """Counts and logs loads that found something this code did not write."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.malformed = 0

    def decoded(self, blob: bytes | None) -> SavedControlState | None:
        if blob is None:
            return None
        try:
            return decode_control_state(blob)
        except ValueError as err:
            self.malformed += 1
            log.warning("control state %s: %s; read as absent (live actors are adopted "
                        "without their predecessor's counters)", self.key, err)
            return None


_FENCED_WRITE_SCRIPT = fence_check() + """
if ARGV[2] == '' then redis.call('DEL', KEYS[2]) else redis.call('SET', KEYS[2], ARGV[2]) end
return 1
"""
"""KEYS: the epoch key, the state key; ARGV: the writer's epoch ('' : none), the state's
bytes ('' : delete it)."""


class RedisControlStateStore(ControlStateMalformed):
    """``ControlStateStore`` of one run in Redis (see the module docstring for the keys)."""

    def __init__(self, client: redis.Redis, run_id: str) -> None:
        super().__init__(f"zf:{{{check_run_id(run_id)}}}:control")
        self.epoch_key = f"{self.key}:epoch"
        self.redis = client
        self.run_id = run_id
        self.epoch: int | None = None
        """This controller's epoch once it has claimed the store (None: unfenced)."""
        self._fenced_write = client.register_script(_FENCED_WRITE_SCRIPT)

    def claim(self) -> int:
        with redis_errors(self.redis):
            self.epoch = int(self.redis.incr(self.epoch_key))
        return self.epoch

    def save(self, state: dict[str, Any]) -> None:
        self._write(encode_control_state(state), "save")

    def _write(self, blob: bytes, what: str) -> None:
        epoch = "" if self.epoch is None else self.epoch
        with redis_errors(self.redis):
            try:
                self._fenced_write(keys=[self.epoch_key, self.key], args=[epoch, blob])
            except redis.ResponseError as err:
                fenced = fenced_reply(err, f"controller state {what} of {self.key}",
                                      self.epoch, "controller")
                if fenced is None:
                    raise
                raise fenced from None

    def load(self) -> SavedControlState | None:
        try:
            with redis_errors(self.redis):
                blob = cast("bytes | None", self.redis.get(self.key))
        except redis.ResponseError as err:  # WRONGTYPE: someone else's key of another type
            self.malformed += 1
            log.warning("control state %s: unreadable (%s)", self.key,
                        str(err).splitlines()[0])
            return None
        return self.decoded(blob)

    def clear(self) -> None:
        self._write(b"", "clear")
