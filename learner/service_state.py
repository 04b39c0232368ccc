"""The learner service's part of the checkpoint: the stream cursor and the run's counters.

``Learner.save`` writes it as the checkpoint's ``extra`` (a plain dict of str, int, float
and lists: what ``torch.load(weights_only=True)`` reads back), next to the learner's own
state. ``ServiceState.from_extra`` checks it field by field, so a malformed or foreign
state is one ``CheckpointError`` naming the file, never a half-restored service.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from zeroforge.learner.learner import CheckpointError
from zeroforge.learner.received_games import ReceivedGames

SERVICE_STATE_FORMAT = "zeroforge-learner-service-v1"
"""Tag of the service's part (``extra``) of the learner checkpoint."""


@dataclasses.dataclass(frozen=True)
class ServiceState:
    """What a restarted learner service needs beyond the learner to keep its promises."""

    stream_cursor: str | None
    """Id of the last stream entry added to the replay window (None: none yet)."""
    games_received: int
    """Games taken into the replay window over the run."""
    positions_received: int
    """Their positions."""
    steps_at_publish: int
    """The learner's step count at its last publish (-1: unknown, publish at once)."""
    rejected: dict[str, int]
    """Entries rejected over the run, by reason."""
    recent_game_ids: list[str]
    """The last received game ids, oldest first (``GameIdWindow``)."""
    throttled_s: float
    """Seconds the learner waited at its target ratio over the run."""
    run_id: str = ""
    """The run the checkpoint belongs to (informational)."""
    trained_s: float = 0.0
    """Seconds the run's learners had lived when this checkpoint was written (a resumed
    or replaced learner goes on from it: its snapshots are named by the run's learner
    time, never again from 0 over an earlier learner's)."""
    received: ReceivedGames = dataclasses.field(default_factory=ReceivedGames)
    """Every game id received over the run (a checkpoint older than 2026-12-02 has none:
    only ``recent_game_ids``)."""
    learner_epoch: int = 0
    """The run-directory epoch of the learner that wrote it (``RunDirFence``): a commit
    by any other epoch is refused, so this names the checkpoint's one writer (0: before
    fencing, 2026-12-02)."""

    def to_extra(self) -> dict:
        """The ``extra`` dict ``Learner.save`` stores."""
        return {"format": SERVICE_STATE_FORMAT, "run_id": self.run_id,
                "stream_cursor": self.stream_cursor, "games_received": self.games_received,
                "positions_received": self.positions_received,
                "steps_at_publish": self.steps_at_publish, "rejected": dict(self.rejected),
                "recent_game_ids": list(self.recent_game_ids),
                "throttled_s": self.throttled_s, "trained_s": self.trained_s,
                "received_games": self.received.to_state(),
                "learner_epoch": self.learner_epoch}

    @classmethod
    def from_extra(cls, extra: dict | None, where: Path, *, games_seen: int,
                   positions_inserted: int) -> ServiceState:
        """The state in a checkpoint's ``extra``. A checkpoint of the local loop has none:
        its counters are then the learner's own (``games_seen``, ``positions_inserted``).
        Raises ``CheckpointError`` naming ``where`` for a foreign or malformed state."""
        extra = extra or {}
        if extra and extra.get("format") != SERVICE_STATE_FORMAT:
            raise CheckpointError(f"{where}: unknown learner-service state "
                                  f"{extra.get('format')!r}")
        try:
            cursor = extra.get("stream_cursor")
            if cursor is not None and not isinstance(cursor, str):
                raise TypeError("stream_cursor")
            return cls(
                stream_cursor=cursor,
                games_received=int(extra.get("games_received", games_seen)),
                positions_received=int(extra.get("positions_received", positions_inserted)),
                steps_at_publish=int(extra.get("steps_at_publish", -1)),
                rejected={str(k): int(v) for k, v in extra.get("rejected", {}).items()},
                recent_game_ids=[str(g) for g in extra.get("recent_game_ids", [])],
                throttled_s=float(extra.get("throttled_s", 0.0)),
                run_id=str(extra.get("run_id", "")),
                trained_s=float(extra.get("trained_s", 0.0)),
                received=ReceivedGames.from_state(dict(extra.get("received_games", {}))),
                learner_epoch=int(extra.get("learner_epoch", 0)))
        except (TypeError, ValueError, AttributeError) as err:
            raise CheckpointError(f"{where}: malformed learner-service state "
                                  f"({type(err).__name__}: {err})") from None
