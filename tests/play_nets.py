"""Tiny untrained learner checkpoints for the play tests (built in a fixture, never
committed: a checkpoint is a binary file)."""

from __future__ import annotations

from pathlib import Path

from zeroforge.learner.learner import Learner, LearnerConfig
from zeroforge.shared.nets import NetConfig


def tiny_checkpoint(folder: Path, game_spec: str, name: str = "checkpoint.pt") -> Path:
    """A learner checkpoint of the ``tiny`` net for ``game_spec`` in ``folder``."""
    learner = Learner(LearnerConfig(replay_capacity=64, device="cpu"), game_spec,
                      NetConfig.preset("tiny"))
    return Path(learner.save(folder / name))
