"""Policy-value networks built from a ``NetConfig`` and a game's ``GameSpec``.

Every network maps float observations ``[B, C, H, W]`` to ``(policy_logits [B, A],
value [B])`` with the value squashed by tanh into [-1, 1], from the mover's side. Two
families cover the presets:

- ``"convnet"``: a plain stack of 3x3 convolutions (the trunk most small public gomoku
  AlphaZero implementations use), optionally with batch norm.
- ``"resnet"``: the AlphaZero tower: a 3x3 conv stem, residual blocks of two 3x3
  conv + batch norm layers, and the two 1x1-conv heads.

``fuse_for_inference`` folds batch norm into the preceding convolutions for a faster
inference-only copy. Weights as bytes and files live in ``zeroforge.shared.formats.weight_blob``.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from zeroforge.shared.games.base import GameSpec
from zeroforge.shared.nets.net_config import PRESETS, NetConfig

__all__ = [
    "NetConfig", "PolicyValueNet", "build_net", "masked_log_softmax", "fuse_for_inference",
    "PRESETS",
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


def _mlp(sizes: list[int]) -> nn.Sequential:
    """Linear layers through ``sizes`` with ReLU between them (none after the last)."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


class PolicyValueNet(nn.Module):
    """Trunk + policy head + value head for one game spec.

    ``forward(x [B, C, H, W] float) -> (policy_logits [B, A], value [B] in [-1, 1])``.
    """

    def __init__(self, config: NetConfig, spec: GameSpec):
        super().__init__()
        self.config = config
        self.obs_shape: tuple[int, int, int] = tuple(spec.obs_shape)  # type: ignore[assignment]
        self.num_actions = int(spec.num_actions)
        c_in, h, w = self.obs_shape
        if config.kind == "resnet":
            layers: list[nn.Module] = [ConvBNAct(c_in, config.channels, 3, bn=True)]
            layers += [ResBlock(config.channels) for _ in range(config.blocks)]
            width, bn = config.channels, True
        else:
            layers, prev = [], c_in
            for c in config.trunk:
                layers.append(ConvBNAct(prev, c, 3, bn=config.batch_norm))
                prev = c
            width, bn = prev, config.batch_norm
        self.trunk = nn.Sequential(*layers)
        self.policy_conv = ConvBNAct(width, config.policy_channels, 1, bn=bn)
        self.policy_fc = _mlp([config.policy_channels * h * w, *config.policy_hidden,
                               self.num_actions])
        self.value_conv = ConvBNAct(width, config.value_channels, 1, bn=bn)
        self.value_fc = _mlp([config.value_channels * h * w, *config.value_hidden, 1])

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [B, C, H, W] float -> (policy_logits [B, A], value [B])."""
        z = self.trunk(x)
        # flatten(1) also works for channels_last inputs (it copies to contiguous order).
        p = self.policy_fc(self.policy_conv(z).flatten(1))
        v = torch.tanh(self.value_fc(self.value_conv(z).flatten(1))).squeeze(1)
        return p, v


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
