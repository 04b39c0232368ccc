"""Policy-value networks built from a ``NetConfig`` and a game's ``GameSpec``.

Every network maps float observations ``[B, C, H, W]`` to ``(policy_logits [B, A],
value [B])`` with the value squashed by tanh into [-1, 1], from the mover's side. Two
families cover the presets:

- ``"convnet"``: a plain stack of 3x3 convolutions (the trunk most small public gomoku
  AlphaZero implementations use), optionally with batch norm.
- ``"resnet"``: the AlphaZero tower: a 3x3 conv stem, residual blocks of two 3x3
  conv + batch norm layers, and the two 1x1-conv heads; optionally with KataGo's global
  pooling blocks (``NetConfig.global_pool_every``, ``shared/nets/pooling.py``).

Heads (``NetConfig.heads``): ``"fc"``, AlphaZero's flattened FC heads, sized by the board;
or ``"pooled"``, KataGo's fully convolutional ones, which run on any board size. Optional
auxiliary heads (KataGo's ownership and score) come out of ``forward_all`` only; ``forward``
gives policy and value and is what search and inference call.

``fuse_for_inference`` folds batch norm into the preceding convolutions for a faster
inference-only copy. Weights as bytes and files live in ``zeroforge.shared.formats.weight_blob``.
"""

from __future__ import annotations

import copy
from typing import NamedTuple

import torch
from torch import nn

from zeroforge.shared.games import GameSpec
from zeroforge.shared.nets.net_config import PRESETS, NetConfig
from zeroforge.shared.nets.pooling import GlobalPoolBias, board_width, value_pool

__all__ = [
    "NetConfig", "NetOutputs", "PolicyValueNet", "build_net", "masked_log_softmax",
    "fuse_for_inference", "score_scale", "PRESETS",
]


# --------------------------------------------------------------------------------------
# Modules
# --------------------------------------------------------------------------------------


class ConvBNAct(nn.Module):
    """conv -> (batch norm) -> (ReLU), the unit that ``fuse_for_inference`` folds.

    Kept as one module with named parts so the fuser finds each conv/BN pair without
    guessing from module order.
    """

    def __init__(self, c_in: int, c_out: int, kernel: int, bn: bool, act: bool = True):
        super().__init__()
        # The BN's shift makes a conv bias redundant.
        self.conv = nn.Conv2d(c_in, c_out, kernel, padding=kernel // 2, bias=not bn)
        self.bn: nn.Module = nn.BatchNorm2d(c_out) if bn else nn.Identity()
        self.act: nn.Module = nn.ReLU(inplace=True) if act else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x)))


class ResBlock(nn.Module):
    """x -> relu(x + bn(conv(relu(bn(conv(x))))))."""

    def __init__(self, channels: int):
        super().__init__()
        self.a = ConvBNAct(channels, channels, 3, bn=True)
        self.b = ConvBNAct(channels, channels, 3, bn=True, act=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.b(self.a(x)))


class PoolResBlock(nn.Module):
    """A residual block with global pooling (KataGo): x [B, C, H, W] -> [B, C, H, W].

    The first conv's C outputs (batch-normed, before ReLU) split into ``pool_channels``
    that are pooled and C - pool_channels that they bias (``GlobalPoolBias``); the second
    conv maps the biased ones back to C: relu(x + bn(conv(pool_bias(bn(conv(x)))))).
    """

    def __init__(self, channels: int, pool_channels: int):
        super().__init__()
        self.a = ConvBNAct(channels, channels, 3, bn=True, act=False)
        self.pool = GlobalPoolBias(pool_channels, channels - pool_channels)
        self.b = ConvBNAct(channels - pool_channels, channels, 3, bn=True, act=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        biased, _ = self.pool(self.a(x))
        return torch.relu(x + self.b(biased))


def _mlp(sizes: list[int]) -> nn.Sequential:
    """Linear layers through ``sizes`` with ReLU between them (none after the last)."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


def score_scale(h: int, w: int) -> float:
    """The score head's unit on an H x W board, sqrt(H W) points (9 on 9x9, 19 on 19x19).

    The head's last linear layer outputs the score in this unit (O(1) at initialisation,
    like its targets once scaled) and ``forward_all`` multiplies it back into points. A
    learner should compare scores in this unit too: a loss on
    ``(score - target) / score_scale(h, w)`` (e.g. Huber with delta 1) is O(1) on any
    board, where a squared error in points would outweigh the policy and value losses.
    """
    return board_width(h, w)


class NetOutputs(NamedTuple):
    """Every head's output for a batch, as ``PolicyValueNet.forward_all`` returns it."""

    policy: torch.Tensor
    """[B, A] float policy logits (A = H W + the game's extra actions), unmasked."""
    value: torch.Tensor
    """[B] float in [-1, 1]: the expected outcome for the mover (tanh)."""
    ownership: torch.Tensor | None
    """[B, H, W] float in [-1, 1] (tanh): each point's predicted final owner from the
    mover's view, +1 the mover's, -1 the opponent's; None without ``ownership_head``.
    KataGo's loss: the cross-entropy of (1 + o) / 2 against (1 + target) / 2, summed over
    the points and weighted 1.5 / (H W) (Wu 2019)."""
    score: torch.Tensor | None
    """[B] float: the predicted final score margin in points from the mover's view
    (unsquashed; see ``score_scale`` for the unit a loss should use); None without
    ``score_head``."""


class PolicyValueNet(nn.Module):
    """Trunk + policy head + value head (+ optional auxiliary heads) for one game spec.

    ``forward(x [B, C, H, W] float) -> (policy_logits [B, A], value [B] in [-1, 1])``;
    ``forward_all(x) -> NetOutputs`` adds the ownership and score heads. With
    ``heads="pooled"`` H and W may differ from the spec's board: the logits are then
    [B, H W + extra_actions] (the actions beyond the board, e.g. Go's pass, last).
    """

    def __init__(self, config: NetConfig, spec: GameSpec):
        super().__init__()
        self.config = config
        self.obs_shape: tuple[int, int, int] = tuple(spec.obs_shape)  # type: ignore[assignment]
        self.num_actions = int(spec.num_actions)
        c_in, h, w = self.obs_shape
        # Pooled heads read actions 0..HW-1 as the board's points in row-major order and
        # give the rest (Go's pass: 1; gomoku: 0) from pooled features.
        self.extra_actions = self.num_actions - h * w
        if config.heads == "pooled" and self.extra_actions < 0:
            raise ValueError(f"pooled heads need an action per board point: game "
                             f"{spec.name!r} has {self.num_actions} for {h}x{w} points")
        if config.kind == "resnet":
            layers: list[nn.Module] = [ConvBNAct(c_in, config.channels, 3, bn=True)]
            layers += [PoolResBlock(config.channels, config.pool_channels)
                       if config.pools_in_block(i) else ResBlock(config.channels)
                       for i in range(config.blocks)]
            width, bn = config.channels, True
        else:
            layers, prev = [], c_in
            for c in config.trunk:
                layers.append(ConvBNAct(prev, c, 3, bn=config.batch_norm))
                prev = c
            width, bn = prev, config.batch_norm
        self.trunk = nn.Sequential(*layers)
        pc, vc = config.policy_channels, config.value_channels
        if config.heads == "fc":
            # Attribute names and creation order as before pooled heads existed: saved
            # state dicts of the fc presets load as they are.
            self.policy_conv = ConvBNAct(width, pc, 1, bn=bn)
            self.policy_fc = _mlp([pc * h * w, *config.policy_hidden, self.num_actions])
            self.value_conv = ConvBNAct(width, vc, 1, bn=bn)
            value_features = vc * h * w
        else:
            # pc channels pooled, pc biased by them, then one logit per point.
            self.policy_conv = ConvBNAct(width, 2 * pc, 1, bn=bn, act=False)
            self.policy_pool = GlobalPoolBias(pc, pc)
            self.policy_point = nn.Conv2d(pc, 1, 1)
            self.policy_extra = nn.Linear(3 * pc, self.extra_actions) \
                if self.extra_actions else None
            self.value_conv = ConvBNAct(width, vc, 1, bn=bn)
            value_features = 3 * vc
        self.value_fc = _mlp([value_features, *config.value_hidden, 1])
        self.ownership_conv = nn.Conv2d(width, 1, 1) if config.ownership_head else None
        self.score_fc = _mlp([value_features, *config.value_hidden, 1]) \
            if config.score_head else None

    def _policy(self, z: torch.Tensor) -> torch.Tensor:
        """Trunk output z [B, width, H, W] -> policy logits [B, A]."""
        if self.config.heads == "fc":
            # flatten(1) also works for channels_last inputs (it copies to contiguous order).
            return self.policy_fc(self.policy_conv(z).flatten(1))
        biased, pooled = self.policy_pool(self.policy_conv(z))
        points = self.policy_point(biased).flatten(1)  # [B, H W], row-major like actions
        if self.policy_extra is None:
            return points
        return torch.cat([points, self.policy_extra(pooled)], dim=1)

    def _value_features(self, z: torch.Tensor) -> torch.Tensor:
        """Trunk output z [B, width, H, W] -> value features [B, F] (value and score)."""
        v = self.value_conv(z)
        return v.flatten(1) if self.config.heads == "fc" else value_pool(v)

    def forward(self, x: torch.Tensor, all_heads: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor] | NetOutputs:
        """x [B, C, H, W] float -> (policy_logits [B, A], value [B]); with ``all_heads``
        ``forward_all``'s NetOutputs (the learner asks through ``forward`` so that a
        DistributedDataParallel wrapper, which only wraps ``forward``, syncs the aux heads'
        gradients too)."""
        if all_heads:
            return self.forward_all(x)
        z = self.trunk(x)
        v = torch.tanh(self.value_fc(self._value_features(z))).squeeze(1)
        return self._policy(z), v

    def forward_all(self, x: torch.Tensor) -> NetOutputs:
        """x [B, C, H, W] float -> NetOutputs(policy [B, A], value [B], ownership
        [B, H, W] or None, score [B] or None): every head, for the learner's losses."""
        z = self.trunk(x)
        f = self._value_features(z)
        value = torch.tanh(self.value_fc(f)).squeeze(1)
        ownership = score = None
        if self.ownership_conv is not None:
            ownership = torch.tanh(self.ownership_conv(z)).squeeze(1)
        if self.score_fc is not None:
            score = self.score_fc(f).squeeze(1) * score_scale(x.shape[2], x.shape[3])
        return NetOutputs(self._policy(z), value, ownership, score)


def build_net(config: NetConfig | str, spec: GameSpec) -> PolicyValueNet:
    """A freshly initialised network for ``spec``; ``config`` may be a preset name."""
    if isinstance(config, str):
        config = NetConfig.preset(config)
    return PolicyValueNet(config, spec)


def num_parameters(net: nn.Module) -> int:
    """Trainable parameter count."""
    return sum(p.numel() for p in net.parameters() if p.requires_grad)


# --------------------------------------------------------------------------------------
# Masked policy
# --------------------------------------------------------------------------------------


def masked_log_softmax(logits: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    """Log-probabilities over the legal actions only.

    logits [B, A] float, legal [B, A] bool -> [B, A] float of the same dtype.

    Illegal entries get a large negative finite number rather than -inf, so a loss like
    ``-(target * logp).sum()`` stays finite where ``target`` is 0 (0 * -inf is NaN), and
    their probability ``exp`` is exactly 0. A row with no legal action comes out uniform
    (all entries equal), never NaN.
    """
    # Half of the dtype's lowest value: low enough that exp() underflows to 0, far enough
    # from the limit that subtracting the row max cannot overflow to -inf.
    fill = torch.finfo(logits.dtype).min / 2
    masked = logits.masked_fill(~legal.bool(), fill)
    return torch.log_softmax(masked, dim=-1)


# --------------------------------------------------------------------------------------
# Inference copy with batch norm folded into the convolutions
# --------------------------------------------------------------------------------------


@torch.no_grad()
def _fold_bn(conv: nn.Conv2d, bn: nn.BatchNorm2d) -> None:
    """Rewrite ``conv`` in place so conv'(x) == bn(conv(x)) with bn's running statistics.

    bn(y) = (y - mean) * g / sqrt(var + eps) + beta, so scaling each output filter by
    s = g / sqrt(var + eps) and setting bias' = (bias - mean) * s + beta is exact.
    """
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError("cannot fold a BatchNorm without running statistics")
    scale = torch.rsqrt(bn.running_var + bn.eps)
    if bn.weight is not None:
        scale = scale * bn.weight
    shift = -bn.running_mean * scale
    if bn.bias is not None:
        shift = shift + bn.bias
    if conv.bias is not None:
        shift = shift + conv.bias * scale
    conv.weight.copy_(conv.weight * scale.reshape(-1, 1, 1, 1))
    conv.bias = nn.Parameter(shift.detach().clone(), requires_grad=False)


def fuse_for_inference(net: nn.Module) -> nn.Module:
    """An eval-mode deep copy of ``net`` with every ConvBNAct's batch norm folded away.

    The original is left untouched (it keeps training); the copy computes the same
    function as ``net.eval()`` up to float rounding, with one op fewer per conv.
    """
    fused = copy.deepcopy(net).eval()
    for module in fused.modules():
        if isinstance(module, ConvBNAct) and isinstance(module.bn, nn.BatchNorm2d):
            _fold_bn(module.conv, module.bn)
            module.bn = nn.Identity()
    for p in fused.parameters():
        p.requires_grad_(False)
    return fused
