"""The Evaluator seam: observations in, (policy logits, value) out.

The same search code runs with an in-process network, a remote inference server, or
the toy evaluators below (tests, the pure-MCTS baseline), chosen by config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class Evaluation:
    """What an evaluator returns for a batch of B positions."""

    policy_logits: np.ndarray
    """[B, A] float32: unnormalised log-probabilities (illegal entries are ignored)."""
    value: np.ndarray
    """[B] float32 in [-1, 1]: expected outcome for the player to move."""
    weights_version: int = 0
    """Version of the weights that produced it (0 for fixed evaluators)."""


class Evaluator(Protocol):
    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        """Evaluate observations [B, C, H, W] with legal masks [B, A] bool."""
        ...


class VersionedEvaluator(Evaluator, Protocol):
    """An evaluator that says which weights it holds (or answered with last): a network's,
    in this process or behind inference servers, as self-play workers use."""

    @property
    def weights_version(self) -> int: ...


class EvaluationError(ValueError):
    """An evaluator returned output of the wrong shape or with non-finite numbers."""


def check_evaluation(ev: Evaluation, batch: int, num_actions: int) -> Evaluation:
    """Validate an evaluator's output; raise EvaluationError saying what is wrong."""
    logits = np.asarray(ev.policy_logits)
    value = np.asarray(ev.value)
    if logits.shape != (batch, num_actions):
        raise EvaluationError(
            f"evaluator returned policy_logits of shape {logits.shape}, "
            f"expected {(batch, num_actions)}")
    if value.shape != (batch,):
        raise EvaluationError(
            f"evaluator returned value of shape {value.shape}, expected {(batch,)}")
    if not np.isfinite(logits).all():
        raise EvaluationError("evaluator returned non-finite policy logits (NaN or inf)")
    if not np.isfinite(value).all():
        raise EvaluationError("evaluator returned a non-finite value (NaN or inf)")
    return ev


class UniformEvaluator:
    """Uniform policy and value 0: search then only sees the rules (tests, baselines)."""

    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        b, a = legal.shape
        return Evaluation(np.zeros((b, a), np.float32), np.zeros(b, np.float32))
