"""The training loss: its parts, their sums over a batch, and the scales that turn one
learner's (or one replica's) sums into the global batch's means.

Parts (``learner_loss{part=...}`` in the metrics):

- ``policy``: cross-entropy of the net's policy against the search's, over positions with
  a policy target (playout-cap fast moves have none);
- ``value``: squared error of the value against the outcome z, over every position;
- ``ownership`` (KataGo): binary cross-entropy, per board point, of the predicted final
  ownership ((1 + o) / 2 with o in [-1, 1] from the mover's view) against the game's
  final ownership ((1 + t) / 2, t in {-1, 0, 1}: a neutral point is a target of 1/2),
  averaged over the points, over positions whose game carried the target;
- ``score`` (KataGo): Huber loss (``SCORE_HUBER_DELTA`` points) of the predicted final
  score margin against the game's, from the mover's view, in points.

The total is ``policy + value_loss_weight * value + ownership_loss_weight * ownership +
score_loss_weight * score`` (``LearnerConfig``); a net without an auxiliary head trains
those parts with weight 0 and reports them as 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

from zeroforge.learner.config import LearnerConfig

SCORE_HUBER_DELTA = 10.0
"""Points of score error beyond which the score loss grows linearly, not quadratically:
a lost big group swings the margin by tens of points, which should not swamp the rest."""

SUMS = ("policy", "value", "entropy", "ownership", "score", "aux_positions")
"""What ``loss_sums`` returns, in order."""


class LossScales(NamedTuple):
    """Factors of each part's sum in the loss minimised by one learner or replica."""

    policy: float
    value: float
    ownership: float = 0.0
    score: float = 0.0


def step_scales(replicas: int, batch_size: int, policy_targets: float,
                aux_positions: float = 0.0, points: int = 1) -> LossScales:
    """Scales for one replica's shard of a global batch.

    The global step's losses are the means: the policy sum over ``policy_targets``, the
    value sum over ``batch_size``, the ownership sum over ``aux_positions x points`` and
    the score sum over ``aux_positions``. A replica's loss is its shard's sums times these
    scales, so that the mean over R replicas (DDP averages the gradients) is exactly the
    global loss's gradient. With R = 1 they are the plain means."""
    aux = max(aux_positions, 1.0)
    return LossScales(replicas / max(policy_targets, 1.0), replicas / batch_size,
                      replicas / (aux * points), replicas / aux)


@dataclass
class AuxTargets:
    """The auxiliary targets of a batch of n positions (on the learner's device)."""

    ownership: torch.Tensor
    """[n, H, W] final ownership from the mover's view, in {-1, 0, 1}."""
    score: torch.Tensor
    """[n] final score margin from the mover's view."""
    mask: torch.Tensor
    """[n] bool: positions whose game carried the targets."""


def loss_sums(log_p: torch.Tensor, value: torch.Tensor, pi: torch.Tensor, z: torch.Tensor,
              ownership: torch.Tensor | None = None, score: torch.Tensor | None = None,
              aux: AuxTargets | None = None) -> torch.Tensor:
    """The summed parts of a batch, ``[len(SUMS)]`` (entropy and aux_positions carry no
    gradient): log_p [n, A] log-probabilities, value [n], pi [n, A] targets, z [n];
    ``ownership`` [n, H, W] in [-1, 1] and ``score`` [n] the net's auxiliary outputs (None
    without the head)."""
    zero = value.new_zeros(())
    policy_sum = -(pi * log_p).sum()
    value_sum = ((value - z) ** 2).sum()
    own_sum, score_sum, aux_n = zero, zero, zero
    if aux is not None:
        m = aux.mask
        aux_n = m.sum().to(value.dtype)
        if ownership is not None:
            p = ((1.0 + ownership[m].float()) / 2).clamp(1e-6, 1 - 1e-6)
            t = (1.0 + aux.ownership[m].float()) / 2
            own_sum = F.binary_cross_entropy(p, t, reduction="sum")
        if score is not None:
            score_sum = F.huber_loss(score[m].float(), aux.score[m].float(), reduction="sum",
                                     delta=SCORE_HUBER_DELTA)
    with torch.no_grad():
        # entropy of the targets: the floor of the policy loss, to read progress against
        entropy_sum = -(pi * torch.log(pi.clamp_min(1e-12))).sum()
    return torch.stack([policy_sum, value_sum, entropy_sum, own_sum, score_sum, aux_n])


def total_loss(sums: torch.Tensor, scales: LossScales, config: LearnerConfig) -> torch.Tensor:
    """The scalar minimised: each part's sum times its scale and its weight."""
    return (sums[0] * scales.policy + config.value_loss_weight * sums[1] * scales.value
            + config.ownership_loss_weight * sums[3] * scales.ownership
            + config.score_loss_weight * sums[4] * scales.score)


def losses_from_sums(sums: list[float], policy_targets: float, batch_size: int,
                     points: int, lr: float, config: LearnerConfig) -> dict[str, float]:
    """The global batch's mean losses from its summed parts (``SUMS`` order), as the
    learner reports them (``loss``, ``policy_loss``, ``value_loss``, ``ownership_loss``,
    ``score_loss``, ``target_entropy``, ``lr``)."""
    policy_sum, value_sum, entropy_sum, own_sum, score_sum, aux_n = sums
    aux = max(aux_n, 1.0)
    out = {"policy_loss": policy_sum / max(policy_targets, 1.0),
           "value_loss": value_sum / batch_size,
           "ownership_loss": own_sum / (aux * points),
           "score_loss": score_sum / aux}
    out["loss"] = (out["policy_loss"] + config.value_loss_weight * out["value_loss"]
                   + config.ownership_loss_weight * out["ownership_loss"]
                   + config.score_loss_weight * out["score_loss"])
    out["target_entropy"] = entropy_sum / max(policy_targets, 1.0)
    out["lr"] = lr
    return out
