"""A real ``LearnerService`` over an in-memory stream, as the runtime builds it, for unit
tests of the learner's intake, checkpoints and acks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from zeroforge.deploy.config import RunConfig, TrainConfig
from zeroforge.deploy.runtime.builder import build_learner
from zeroforge.learner.config import LearnerConfig
from zeroforge.learner.service import RECENT_GAME_IDS, LearnerService
from zeroforge.shared.nets import NetConfig
from zeroforge.shared.search import SearchConfig
from zeroforge.shared.transport import MemoryTransport, StreamConfig


def memory_learner(run_dir: Path, transport: MemoryTransport, *, resume: bool = False,
                   max_backlog: int = 100, recent_game_ids: int = RECENT_GAME_IDS,
                   **learner: object) -> LearnerService:
    """A tic-tac-toe learner (tiny net, one thread) of ``transport``'s run in ``run_dir``;
    ``learner`` keywords override its section (batch 4, trains from 1 position, checkpoints
    hourly)."""
    options: dict = dict(batch_size=4, min_replay=1, device="cpu", checkpoint_every_s=3600.0)
    options.update(learner)
    config = TrainConfig(game="tictactoe", net=NetConfig.preset("tiny"),
                         search=SearchConfig(num_simulations=4),
                         learner=LearnerConfig(**options), run=RunConfig(torch_threads=1))
    ctx = dataclasses.replace(config.context(transport.run_id), run_dir=str(run_dir))
    return build_learner(config, ctx, transport, resume=resume,
                         stream_config=StreamConfig(max_backlog=max_backlog),
                         recent_game_ids=recent_game_ids)
