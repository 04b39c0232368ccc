"""The learner's pace: what self-play needs to know to stay within samples-per-insert.

Rate limiting works on both sides of the sample stream, as Reverb's samples-per-insert
limiter with an error buffer does. With a target ratio T (``learner.samples_per_insert``)
and a tolerance f (``learner.samples_per_insert_tolerance``):

- above T the learner waits for data (``Learner.can_train``), as it always did;
- below T × (1 − f) the self-play workers wait for the learner: they append the games they
  hold, then play no further move until the learner's ratio is back at or above that floor.

So the ratio stays between T × (1 − f) and T whichever side is the slower, instead of
sinking for good when self-play outruns the learner (a backlog at its limit, a growing
policy lag). The learner publishes a ``Pace`` through the transport
(``Transport.pace()``, ``PaceSignal``); workers read it in their ``run`` loop and decide
with ``selfplay_should_pause``. A missing or expired pace (no learner yet, a dead one, an
unreadable record) means "do not pause": the stream's backpressure still bounds the
backlog.

The wire form is a msgpack map (plain data, never pickle), versioned by ``"format"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import msgpack

PACE_FORMAT = 1
"""Version of the wire form written by ``encode_pace``."""
PACE_TTL_S = 30.0
"""Seconds a published pace holds unless published again. The learner republishes at
least every ``PACE_PUBLISH_S`` while it runs, so only a dead or wedged learner lets it
expire, and then no worker stays paused for longer than this."""
PACE_PUBLISH_S = 0.5
"""Least seconds between two publishes of an unchanged pause decision (a change of the
decision is published at once)."""
PACE_READ_S = 0.5
"""Seconds a worker reuses the pace it last read before reading it again."""


class PaceFormatError(ValueError):
    """Bytes in the pace slot that are not a pace this code writes."""


@dataclass(frozen=True)
class Pace:
    """The learner's samples-per-insert state, as it publishes it."""

    samples_per_insert: float
    """Positions trained per position inserted so far (``LearnerService.samples_per_insert``)."""
    target: float
    """``learner.samples_per_insert``: the ratio the learner trains up to; 0 = no limit."""
    tolerance: float
    """``learner.samples_per_insert_tolerance``: the fraction of ``target`` the ratio may fall
    below it before self-play waits."""
    trainable: bool
    """The learner may train a batch now: its replay window holds ``learner.min_replay``
    positions, a batch fits the samples-per-insert budget and no step limit is reached. A
    learner that cannot train must never make workers wait (nothing would end the wait)."""

    def __post_init__(self) -> None:
        for name in ("samples_per_insert", "target"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not (
                    math.isfinite(value) and value >= 0):
                raise ValueError(f"Pace.{name} must be a finite number >= 0, got {value!r}")
        if not isinstance(self.tolerance, int | float) or isinstance(self.tolerance, bool) or \
                not 0 <= self.tolerance < 1:
            raise ValueError(f"Pace.tolerance must be in [0, 1), got {self.tolerance!r}")
        if not isinstance(self.trainable, bool):
            raise ValueError(f"Pace.trainable must be true or false, got {self.trainable!r}")

    @property
    def floor(self) -> float:
        """The ratio below which self-play pauses (``pause_floor``)."""
        return pause_floor(self.target, self.tolerance)


def pause_floor(target: float, tolerance: float) -> float:
    """T × (1 − f): self-play pauses while the learner's ratio is below it (0: never)."""
    return target * (1.0 - tolerance) if target > 0 else 0.0


def selfplay_should_pause(pace: Pace | None) -> bool:
    """Whether a self-play worker should wait before playing on, given the learner's
    ``pace`` (None: none published, expired or unreadable).

    Pauses only when all hold: a pace is there, it sets a limit (target > 0), the learner
    can train now (which also means its window reached ``min_replay``), and its ratio is
    below ``pause_floor``. Everything else plays on: a missing learner must never stop
    self-play."""
    if pace is None or pace.target <= 0 or not pace.trainable:
        return False
    return pace.samples_per_insert < pace.floor


def encode_pace(pace: Pace) -> bytes:
    """The wire form of ``pace`` (a small msgpack map)."""
    return msgpack.packb({"format": PACE_FORMAT,
                          "samples_per_insert": float(pace.samples_per_insert),
                          "target": float(pace.target), "tolerance": float(pace.tolerance),
                          "trainable": pace.trainable}, use_bin_type=True)


def decode_pace(blob: bytes) -> Pace:
    """The ``Pace`` in ``blob``; PaceFormatError (one line) if it is not one."""
    try:
        data: Any = msgpack.unpackb(blob, raw=False)
    except Exception as err:  # msgpack raises several unrelated types for garbage
        raise PaceFormatError(f"not msgpack ({type(err).__name__})") from None
    if not isinstance(data, dict):
        raise PaceFormatError(f"holds a {type(data).__name__}, not a map")
    if data.get("format") != PACE_FORMAT:
        raise PaceFormatError(f"unknown pace format {data.get('format')!r} "
                              f"(this code reads {PACE_FORMAT})")
    try:
        return Pace(samples_per_insert=data["samples_per_insert"], target=data["target"],
                    tolerance=data["tolerance"], trainable=data["trainable"])
    except KeyError as err:
        raise PaceFormatError(f"missing field {err.args[0]!r}") from None
    except ValueError as err:
        raise PaceFormatError(str(err)) from None
