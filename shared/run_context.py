"""``RunContext``: the few facts of a run every service needs besides its own section.

Each side's config section lives beside the side that reads it (``learner.config``,
``actors.config``; the run-wide sections and ``TrainConfig`` in ``deploy.config``); the
driver builds a ``RunContext`` from the whole config (``TrainConfig.context``) and hands
it to each service with its section.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zeroforge.shared import config as cfg
from zeroforge.shared.board_sizes import SizeMix, size_mix


@dataclass(frozen=True)
class RunContext:
    """What every service of a run needs besides its own section."""

    run_id: str
    """The run's name: every transport key of the run is under it."""
    run_dir: str
    """The run record's directory (checkpoints, snapshots, eval.jsonl)."""
    transport: str
    """``redis://`` / ``rediss://`` URL of the run's Redis, or ``memory://`` (one process)."""
    game: str
    """Game spec string."""
    seed: int = 0
    """The run's seed; services derive their own from it."""
    torch_threads: int = 1
    """torch intra-op threads per process (0: torch's default)."""
    minutes: float = 0.0
    """Wall-clock limit of the run (0: none); the learner ends its loop there."""
    max_learner_steps: int = 0
    """Learner step limit (0: none)."""
    max_games: int = 0
    """Limit on games received by the learner (0: none)."""
    redis_auth_dir: str = ""
    """Directory of the Redis role password files (``shared.transport.acl``): each actor
    connects as its role's user with the file of that role; "" uses the URL's password or
    ``$ZEROFORGE_REDIS_AUTH_DIR``. A path, not a secret: the files stay on the machine."""
    stream_shards: int = 1
    """Streams the sample stream is spread over (``distributed.stream_shards``)."""
    stream_urls: tuple[str, ...] = ()
    """Redis servers of the stream shards (shard K on the K mod N-th); empty: the run's."""
    weights_cache: str = ""
    """Root of the per-node weight caches (``auto``: ``/dev/shm`` where there is one); ""
    reads weights straight from Redis."""
    board_sizes: tuple[int, ...] = ()
    """``selfplay.board_sizes``: the sizes self-play plays and the learner trains."""
    board_size_weights: tuple[float, ...] = ()
    """``selfplay.board_size_weights``: their shares (empty: equal)."""
    weights_public_key: str = ""
    """Hex Ed25519 public key of the run's learner (``shared.transport.signing``): readers
    refuse weights not signed by it; "" is an unsigned run (a local run in one process).
    Not a secret: the private key stays in the run directory."""

    def size_mix(self) -> SizeMix | None:
        """The run's sizes and their games (None: the game's own size only)."""
        return size_mix(self.game, self.board_sizes, self.board_size_weights)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, to cross a process boundary without pickling our classes."""
        return cfg.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunContext:
        return cfg.from_dict(cls, data, "context")
