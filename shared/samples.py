"""Training samples of finished games and their versioned msgpack wire format.

One entry per finished game (not per position). Observations travel as bit-packed binary
planes, visit policies as float16, movers as int8; a decoder checks every field before it
trusts it, so a malformed entry is rejected with a reason instead of poisoning training.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgpack
import numpy as np

SCHEMA_VERSION = 1
MAX_ENTRY_BYTES = 16 * 1024 * 1024
"""Entries above this are rejected: no legitimate game comes near it."""


class SampleFormatError(ValueError):
    """A stream entry that cannot be decoded; ``reason`` is a short label for metrics."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass
class GameSamples:
    """The (s, pi, z) samples of one finished game, with where they came from."""

    game: str
    """Spec string of the game (``GameSpec.spec_string``)."""
    game_version: int
    """``GameSpec.version``: observations are only comparable within one version."""
    obs: np.ndarray
    """[T, C, H, W] uint8 binary planes, from the mover's view, one per position."""
    policy: np.ndarray
    """[T, A] float32 search policy (visit distribution or Gumbel target)."""
    to_play: np.ndarray
    """[T] int8: who was to move (0 = first player) at each position."""
    outcome: int
    """Final result from the first player's side: +1, -1 or 0."""
    weights_version: int = 0
    """Version of the weights the game was played with."""
    run_id: str = ""
    worker_id: str = ""
    game_id: str = ""
    """Unique per game within a run; the learner counts games by it."""

    @property
    def num_positions(self) -> int:
        return int(self.obs.shape[0])

    def value_targets(self) -> np.ndarray:
        """[T] float32 z: the outcome from the view of the player to move at each position."""
        sign = np.where(self.to_play == 0, 1.0, -1.0).astype(np.float32)
        return sign * np.float32(self.outcome)


def encode(samples: GameSamples) -> bytes:
    """msgpack bytes of one game (schema ``SCHEMA_VERSION``)."""
    t = samples.num_positions
    return msgpack.packb({
        "schema": SCHEMA_VERSION,
        "run_id": samples.run_id,
        "worker_id": samples.worker_id,
        "game_id": samples.game_id,
        "game": samples.game,
        "game_version": samples.game_version,
        "weights_version": int(samples.weights_version),
        "outcome": int(samples.outcome),
        "positions": t,
        "obs_shape": list(samples.obs.shape[1:]),
        "obs": np.packbits(samples.obs.astype(bool).reshape(t, -1), axis=1).tobytes(),
        "num_actions": int(samples.policy.shape[1]),
        "policy": samples.policy.astype(np.float16).tobytes(),
        "to_play": samples.to_play.astype(np.int8).tobytes(),
    }, use_bin_type=True)


def _field(entry: dict, name: str, kind: type | tuple[type, ...]):
    if name not in entry:
        raise SampleFormatError("missing_field", f"entry has no {name!r}")
    value = entry[name]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise SampleFormatError("bad_field", f"{name!r} has type {type(value).__name__}")
    return value


def decode(data: bytes) -> GameSamples:
    """Decode and validate one entry; raises SampleFormatError with a reason label."""
    if len(data) > MAX_ENTRY_BYTES:
        raise SampleFormatError("oversized", f"{len(data)} bytes > {MAX_ENTRY_BYTES}")
    try:
        entry = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except Exception as err:  # msgpack raises several unrelated types for garbage
        raise SampleFormatError("not_msgpack", str(err)) from None
    if not isinstance(entry, dict):
        raise SampleFormatError("not_a_map", f"entry is a {type(entry).__name__}")
    schema = entry.get("schema")
    if type(schema) is not int or schema != SCHEMA_VERSION:  # True and 1.0 equal 1, too
        raise SampleFormatError("unknown_schema", f"schema {schema!r}, expected {SCHEMA_VERSION}")
    t = _field(entry, "positions", int)
    shape = _field(entry, "obs_shape", list)
    a = _field(entry, "num_actions", int)
    outcome = _field(entry, "outcome", int)
    if t <= 0 or a <= 0 or len(shape) != 3 or not all(isinstance(d, int) and d > 0 for d in shape):
        raise SampleFormatError("bad_shape", f"positions={t} obs_shape={shape} actions={a}")
    if outcome not in (-1, 0, 1):
        raise SampleFormatError("bad_outcome", f"outcome {outcome}")
    plane_bits = shape[0] * shape[1] * shape[2]
    obs_bytes = _field(entry, "obs", bytes)
    policy_bytes = _field(entry, "policy", bytes)
    to_play_bytes = _field(entry, "to_play", bytes)
    if len(obs_bytes) != t * ((plane_bits + 7) // 8):
        raise SampleFormatError("bad_length", f"obs has {len(obs_bytes)} bytes for {t} positions")
    if len(policy_bytes) != t * a * 2 or len(to_play_bytes) != t:
        raise SampleFormatError("bad_length", "policy or to_play length does not match positions")
    packed = np.frombuffer(obs_bytes, np.uint8).reshape(t, -1)
    obs = np.unpackbits(packed, axis=1, count=plane_bits).reshape(t, *shape)
    policy = np.frombuffer(policy_bytes, np.float16).reshape(t, a).astype(np.float32)
    to_play = np.frombuffer(to_play_bytes, np.int8).copy()
    if not np.isfinite(policy).all() or (policy < 0).any():
        raise SampleFormatError("bad_policy", "policy has negative or non-finite entries")
    if not np.isin(to_play, (0, 1)).all():
        raise SampleFormatError("bad_to_play", "to_play entries must be 0 or 1")
    return GameSamples(
        game=_field(entry, "game", str),
        game_version=_field(entry, "game_version", int),
        obs=obs,
        policy=policy,
        to_play=to_play,
        outcome=outcome,
        weights_version=_field(entry, "weights_version", int),
        run_id=_field(entry, "run_id", str),
        worker_id=_field(entry, "worker_id", str),
        game_id=_field(entry, "game_id", str),
    )
