"""Training samples of finished games and their versioned msgpack wire format.

One entry per finished game (not per position). Observations travel as bit-packed binary
planes, visit policies as float16, movers as int8; a decoder checks every field before it
trusts it, so a malformed entry is rejected with a reason instead of poisoning training.

Schema 1 carries a policy target for every position. Schema 2 (written only for a game
with positions without one: the fast moves of playout-cap randomisation) adds
``policy_recorded``, one 0/1 byte per position, and carries policy rows only for the
recorded positions. Readers take both; a game with every position recorded is still
written as schema 1, byte for byte as before, so older readers keep reading it.

Schema 3 (written only for a game with auxiliary targets: Go's final ownership and score,
KataGo's dense targets) adds ``ownership``, one int8 per board point (+1 the first
player's area at the end, -1 the second's, 0 neither), and ``score``, the first player's
final margin as a float (komi included); ``policy_recorded`` is optional in it. Games
without those (gomoku and the others) keep schemas 1 and 2.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgpack
import numpy as np

SCHEMA_VERSION = 3
"""Newest schema this module writes and reads."""
SCHEMA_VERSIONS = (1, 2, 3)
"""Schemas ``decode`` accepts: 1 (every position has a policy target), 2 (adds
``policy_recorded``) and 3 (adds ``ownership`` and ``score``; ``policy_recorded``
optional)."""
MAX_ABS_SCORE = 10_000.0
"""A final score margin beyond this is rejected (a 19x19 board holds 361 points)."""
MAX_ENTRY_BYTES = 16 * 1024 * 1024
"""Entries above this are rejected: no legitimate game comes near it."""
MAX_TEXT_CHARS = 1024
"""Longest string field (ids, the game's spec string) a decoder accepts."""
_ENTRY_SLACK_BYTES = 16 * 1024
"""What an entry holds besides its arrays: the keys, ids, spec string and numbers."""
ENTRY_LIMITS_MARGIN = 4
"""``EntryLimits.for_games`` allows this many times what the run's longest legal game
needs: a game of another board size, or longer than the rules allow, still decodes and is
rejected for what it is (``wrong_size``, ``too_long``); only far beyond, by its size."""
_MAX_FIELDS = 32
"""More map keys than any schema has (schema 3 has 17)."""
_MAX_ARRAY = 8
"""The one array in an entry is ``obs_shape`` (3 long)."""

if TYPE_CHECKING:
    from zeroforge.shared.games import GameSpec


class SampleFormatError(ValueError):
    """A stream entry that cannot be decoded; ``reason`` is a short label for metrics."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True)
class EntryLimits:
    """The most an entry of a run's games can hold, checked while msgpack reads it.

    An entry is a map of a dozen fields whose arrays are byte strings; nothing legitimate
    nests. So the decoder refuses, at the header that announces it and before allocating
    anything, a map or array longer than the schema has, a string longer than an id and a
    byte string longer than the longest legal game needs: a hostile entry (16 MiB of nested
    empty arrays becomes ~1 GiB of Python lists) costs no more memory than its own bytes.
    """

    max_bytes: int = MAX_ENTRY_BYTES
    """Largest entry, in bytes, accepted at all."""
    max_bin_bytes: int = MAX_ENTRY_BYTES
    """Largest byte-string field (the observations or the policies of a whole game)."""

    @classmethod
    def for_games(cls, specs: Iterable[GameSpec]) -> EntryLimits:
        """The limits for a run of ``specs`` (several for a run of several board sizes):
        ``ENTRY_LIMITS_MARGIN`` times what the longest game each can have
        (``GameSpec.max_moves`` positions) needs."""
        biggest_bin = biggest_entry = 0
        for spec in specs:
            t = spec.max_moves
            channels, height, width = spec.obs_shape
            obs = t * ((channels * height * width + 7) // 8)
            policy = t * spec.num_actions * 2  # float16
            biggest_bin = max(biggest_bin, obs, policy)
            entry = obs + policy + 2 * t + height * width + _ENTRY_SLACK_BYTES
            biggest_entry = max(biggest_entry, entry)
        if not biggest_entry:
            raise ValueError("EntryLimits.for_games: no game given")
        return cls(max_bytes=min(ENTRY_LIMITS_MARGIN * biggest_entry, MAX_ENTRY_BYTES),
                   max_bin_bytes=min(ENTRY_LIMITS_MARGIN * biggest_bin, MAX_ENTRY_BYTES))



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
    policy_recorded: np.ndarray | None = None
    """[T] bool: which positions carry a policy target (full searches under playout-cap
    randomisation); the others train the value only and their ``policy`` rows are zeros.
    None: every position does."""
    ownership: np.ndarray | None = None
    """[H, W] int8: the final ownership of each point from the first player's view (+1
    theirs, -1 the opponent's, 0 neither), for games with territory (Go); None
    otherwise."""
    score: float | None = None
    """The first player's final score margin (komi included), with ``ownership``."""

    @property
    def num_positions(self) -> int:
        return int(self.obs.shape[0])

    @property
    def policy_mask(self) -> np.ndarray:
        """[T] bool: positions with a policy target (all of them if ``policy_recorded``
        is None)."""
        if self.policy_recorded is None:
            return np.ones(self.num_positions, bool)
        return np.asarray(self.policy_recorded, bool)

    def value_targets(self) -> np.ndarray:
        """[T] float32 z: the outcome from the view of the player to move at each position."""
        return self._mover_sign() * np.float32(self.outcome)

    def _mover_sign(self) -> np.ndarray:
        """[T] float32: +1 where the first player moves, -1 where the second does."""
        return np.where(self.to_play == 0, 1.0, -1.0).astype(np.float32)

    @property
    def has_aux(self) -> bool:
        """Whether the game carries the ownership and score targets."""
        return self.ownership is not None and self.score is not None

    def ownership_targets(self) -> np.ndarray:
        """[T, H, W] int8: the final ownership from the view of the player to move at each
        position (+1 the mover's). Only for a game with ``has_aux``."""
        if self.ownership is None:
            raise ValueError("this game carries no ownership target")
        sign = self._mover_sign().astype(np.int8)
        return sign[:, None, None] * self.ownership[None].astype(np.int8)

    def score_targets(self) -> np.ndarray:
        """[T] float32: the final score margin from the view of the player to move."""
        if self.score is None:
            raise ValueError("this game carries no score target")
        return self._mover_sign() * np.float32(self.score)


def encode(samples: GameSamples) -> bytes:
    """msgpack bytes of one game: schema 1 if every position has a policy target, else 2."""
    t = samples.num_positions
    mask = samples.policy_mask
    if mask.shape != (t,):
        raise ValueError(f"encode: policy_recorded has shape {mask.shape}, expected ({t},)")
    extra: dict = {}
    policy = samples.policy
    if not mask.all():
        extra = {"policy_recorded": mask.astype(np.uint8).tobytes()}
        policy = policy[mask]
    schema = 1 if not extra else 2
    ownership, score = samples.ownership, samples.score
    if ownership is not None or score is not None:
        if ownership is None or score is None:
            raise ValueError("encode: ownership and score come together")
        hw = tuple(samples.obs.shape[2:])
        if ownership.shape != hw:
            raise ValueError(f"encode: ownership has shape {ownership.shape}, expected {hw}")
        extra["ownership"] = ownership.astype(np.int8).tobytes()
        extra["score"] = float(score)
        schema = 3
    entry = {
        "schema": schema,
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
        "policy": policy.astype(np.float16).tobytes(),
        "to_play": samples.to_play.astype(np.int8).tobytes(),
        **extra,
    }
    return msgpack.packb(entry, use_bin_type=True)


def _field(entry: dict, name: str, kind: type | tuple[type, ...]):
    if name not in entry:
        raise SampleFormatError("missing_field", f"entry has no {name!r}")
    value = entry[name]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise SampleFormatError("bad_field", f"{name!r} has type {type(value).__name__}")
    return value


def decode(data: bytes, limits: EntryLimits | None = None) -> GameSamples:
    """Decode and validate one entry; raises SampleFormatError with a reason label.

    ``limits``: the run's (``EntryLimits.for_games``); without them, the loosest any game
    may need. Either way no container or string beyond them is built (``over_limits``) and
    nesting stops at msgpack's own depth limit (``too_deep``)."""
    limits = limits or EntryLimits()
    if len(data) > limits.max_bytes:
        raise SampleFormatError("oversized", f"{len(data)} bytes > {limits.max_bytes}")
    try:
        entry = msgpack.unpackb(data, raw=False, strict_map_key=True,
                                max_map_len=_MAX_FIELDS, max_array_len=_MAX_ARRAY,
                                max_str_len=MAX_TEXT_CHARS, max_bin_len=limits.max_bin_bytes,
                                max_ext_len=0)
    except msgpack.StackError:
        raise SampleFormatError("too_deep", "nesting beyond msgpack's depth limit") from None
    except ValueError as err:
        if "exceeds max_" in str(err):  # a header announcing more than the limits allow
            raise SampleFormatError("over_limits", str(err)) from None
        raise SampleFormatError("not_msgpack", str(err)) from None
    except Exception as err:  # msgpack raises several unrelated types for garbage
        raise SampleFormatError("not_msgpack", str(err)) from None
    if not isinstance(entry, dict):
        raise SampleFormatError("not_a_map", f"entry is a {type(entry).__name__}")
    schema = entry.get("schema")
    if type(schema) is not int or schema not in SCHEMA_VERSIONS:  # True and 1.0 equal 1, too
        raise SampleFormatError("unknown_schema",
                                f"schema {schema!r}, expected one of {SCHEMA_VERSIONS}")
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
    recorded = None
    if schema == 2 or (schema == 3 and "policy_recorded" in entry):
        flags = np.frombuffer(_field(entry, "policy_recorded", bytes), np.uint8)
        if flags.size != t:
            raise SampleFormatError("bad_length", f"policy_recorded has {flags.size} bytes for "
                                    f"{t} positions")
        if (flags > 1).any():
            raise SampleFormatError("bad_field", "policy_recorded entries must be 0 or 1")
        recorded = flags.astype(bool)
    rows = t if recorded is None else int(recorded.sum())
    if len(policy_bytes) != rows * a * 2 or len(to_play_bytes) != t:
        raise SampleFormatError("bad_length", "policy or to_play length does not match positions")
    packed = np.frombuffer(obs_bytes, np.uint8).reshape(t, -1)
    obs = np.unpackbits(packed, axis=1, count=plane_bits).reshape(t, *shape)
    policy = np.frombuffer(policy_bytes, np.float16).reshape(rows, a).astype(np.float32)
    if recorded is not None:
        full = np.zeros((t, a), np.float32)
        full[recorded] = policy
        policy = full
    to_play = np.frombuffer(to_play_bytes, np.int8).copy()
    if not np.isfinite(policy).all() or (policy < 0).any():
        raise SampleFormatError("bad_policy", "policy has negative or non-finite entries")
    if not np.isin(to_play, (0, 1)).all():
        raise SampleFormatError("bad_to_play", "to_play entries must be 0 or 1")
    ownership, score = _aux_fields(entry, shape) if schema == 3 else (None, None)
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
        policy_recorded=recorded,
        ownership=ownership,
        score=score,
    )


def _aux_fields(entry: dict, obs_shape: list[int]) -> tuple[np.ndarray, float]:
    """Schema 3's ``ownership`` ([H, W] int8 in {-1, 0, 1}) and ``score`` (finite)."""
    h, w = obs_shape[1], obs_shape[2]
    raw = _field(entry, "ownership", bytes)
    if len(raw) != h * w:
        raise SampleFormatError("bad_length", f"ownership has {len(raw)} bytes for a "
                                f"{h}x{w} board")
    ownership = np.frombuffer(raw, np.int8).reshape(h, w).copy()
    if not np.isin(ownership, (-1, 0, 1)).all():
        raise SampleFormatError("bad_field", "ownership entries must be -1, 0 or 1")
    score = _field(entry, "score", (float, int))
    if isinstance(score, bool) or not np.isfinite(score) or abs(score) > MAX_ABS_SCORE:
        raise SampleFormatError("bad_field", f"score {score!r} is not a finite margin "
                                f"within {MAX_ABS_SCORE:g}")
    return ownership, float(score)
