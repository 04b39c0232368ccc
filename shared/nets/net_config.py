"""The network's configuration and its named presets, apart from the network itself
(``model.py``): configs are read and checked, by the command line too, without
importing torch."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class NetConfig:
    """Architecture of a policy-value network; the game's spec supplies the sizes."""

    kind: Literal["resnet", "convnet"] = "resnet"
    """``"resnet"``: conv stem + residual tower (AlphaZero); ``"convnet"``: plain conv stack."""
    channels: int = 64
    """resnet: width of the stem and of every residual block."""
    blocks: int = 6
    """resnet: number of residual blocks (two 3x3 convs each)."""
    trunk: tuple[int, ...] = (32, 64, 128)
    """convnet: output channels of each 3x3 conv layer of the trunk, in order."""
    batch_norm: bool = True
    """convnet: batch norm after each trunk and head conv (resnets always use it)."""
    policy_channels: int = 2
    """Filters of the policy head's 1x1 conv."""
    policy_hidden: tuple[int, ...] = ()
    """Hidden FC layer sizes between the policy conv and the A logits (AlphaZero: none)."""
    value_channels: int = 1
    """Filters of the value head's 1x1 conv."""
    value_hidden: tuple[int, ...] = (256,)
    """Hidden FC layer sizes between the value features (the flattened value conv, or its
    pooling with ``heads="pooled"``) and the single tanh output."""
    global_pool_every: int = 0
    """resnet: every k-th residual block (the k-th, 2k-th, ...) is a global pooling block
    (KataGo): after its first conv, ``pool_channels`` channels are pooled over the board
    and, through a linear layer, bias the other channels before the second conv.
    0: none (the AlphaZero tower)."""
    pool_channels: int = 16
    """Channels pooled in each global pooling block, out of the first conv's
    ``channels``; the second conv reads the other ``channels - pool_channels``.
    Unused unless ``global_pool_every`` > 0."""
    heads: Literal["fc", "pooled"] = "fc"
    """``"fc"``: AlphaZero heads, a 1x1 conv flattened into FC layers sized by the board.
    ``"pooled"``: fully convolutional heads (KataGo): a logit per point from a 1x1 conv
    whose inputs pooled features bias (``policy_channels`` of each), the logits of the
    actions beyond the board (Go's pass) from those pooled features, and the value from
    the pooled value conv (``value_channels``) through ``value_hidden``. No layer's size
    depends on the board, so one net runs on any board size (of the same planes)."""
    ownership_head: bool = False
    """Add KataGo's ownership head (``PolicyValueNet.forward_all``): a 1x1 conv + tanh
    predicting each point's final owner from the mover's view, +1 the mover's."""
    score_head: bool = False
    """Add KataGo's score head (``PolicyValueNet.forward_all``): the final score margin in
    points from the mover's view, predicted from the value features (``value_hidden``)."""

    def __post_init__(self) -> None:
        if self.kind not in ("resnet", "convnet"):
            raise ValueError(f"NetConfig.kind must be 'resnet' or 'convnet', not {self.kind!r}")
        sizes = [self.channels, self.policy_channels, self.value_channels,
                 *self.trunk, *self.policy_hidden, *self.value_hidden]
        if any(int(s) < 1 for s in sizes):
            raise ValueError(f"NetConfig: every layer size must be >= 1, got {self}")
        if self.blocks < 0:
            raise ValueError(f"NetConfig.blocks must be >= 0, got {self.blocks}")
        if self.kind == "convnet" and not self.trunk:
            raise ValueError("NetConfig: a convnet needs at least one trunk layer")
        if self.heads not in ("fc", "pooled"):
            raise ValueError(f"NetConfig.heads must be 'fc' or 'pooled', not {self.heads!r}")
        if self.heads == "pooled" and self.policy_hidden:
            raise ValueError("NetConfig: pooled heads have no policy_hidden layers "
                             f"(a 1x1 conv per point), got {self.policy_hidden}")
        if self.global_pool_every < 0:
            raise ValueError("NetConfig.global_pool_every must be >= 0 (0: no pooling "
                             f"blocks), got {self.global_pool_every}")
        if self.global_pool_every > 0:
            if self.kind != "resnet":
                raise ValueError("NetConfig: global_pool_every needs kind 'resnet' (the "
                                 "pooling is inside residual blocks)")
            if not 1 <= self.pool_channels < self.channels:
                raise ValueError(f"NetConfig.pool_channels must be in 1..channels-1 "
                                 f"({self.channels - 1}), got {self.pool_channels}")

    def pools_in_block(self, index: int) -> bool:
        """Whether residual block ``index`` (0-based) is a global pooling block."""
        k = self.global_pool_every
        return k > 0 and (index + 1) % k == 0

    @staticmethod
    def preset(name: str) -> NetConfig:
        """The named preset (see ``PRESETS``); ValueError listing the known names."""
        try:
            return PRESETS[name]
        except KeyError:
            raise ValueError(
                f"unknown net preset {name!r}; known: {', '.join(PRESETS)}") from None

    def replace(self, **changes: Any) -> NetConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


PRESETS: dict[str, NetConfig] = {
    # Fast enough for unit tests on one core: one residual block of 16 channels.
    "tiny": NetConfig(kind="resnet", channels=16, blocks=1, policy_channels=2,
                      value_channels=1, value_hidden=(16,)),
    # The net of most small public gomoku AlphaZero repos (3 convs, small heads), with batch
    # norm: without it the 4- and 2-channel head convs' ReLUs all died within ~500 Adam
    # steps (lr 2e-3) on gomoku 6x6, leaving a constant policy and value. BN folds into the
    # convs for inference, so it costs nothing there.
    "small": NetConfig(kind="convnet", trunk=(32, 64, 128), batch_norm=True,
                       policy_channels=4, value_channels=2, value_hidden=(64,)),
    # AlphaZero towers; the value FC scales down with the width so small nets stay small.
    "resnet6x64": NetConfig(kind="resnet", channels=64, blocks=6, value_hidden=(128,)),
    "resnet10x128": NetConfig(kind="resnet", channels=128, blocks=10, value_hidden=(256,)),
    "resnet20x256": NetConfig(kind="resnet", channels=256, blocks=20, value_hidden=(256,)),
    # QPT-CleverGo's 9x9 net: the same 3-conv trunk with deeper heads.
    "qpt": NetConfig(kind="convnet", trunk=(32, 64, 128), batch_norm=False,
                     policy_channels=8, policy_hidden=(256,),
                     value_channels=4, value_hidden=(128, 64)),
    # KataGo-style Go nets: global pooling blocks, pooled heads (any board size) and the
    # ownership and score heads. go_small is the go9 preset's (a batch of 128 9x9
    # positions in ~0.35x go_cpu's time; on one core its run reached 85% against uct:1000
    # in 15 minutes where go_cpu's had 15%: docs/lab/go9.md, "Screening");
    # go_cpu (~0.6x resnet6x64's time: docs/lab/networks.md, "Global pooling nets") for
    # longer CPU runs, go_gpu for one GPU.
    "go_small": NetConfig(kind="resnet", channels=32, blocks=4, global_pool_every=3,
                          pool_channels=8, heads="pooled", policy_channels=8,
                          value_channels=8, value_hidden=(64,), ownership_head=True,
                          score_head=True),
    "go_cpu": NetConfig(kind="resnet", channels=48, blocks=6, global_pool_every=3,
                        pool_channels=16, heads="pooled", policy_channels=16,
                        value_channels=16, value_hidden=(64,), ownership_head=True,
                        score_head=True),
    "go_gpu": NetConfig(kind="resnet", channels=128, blocks=15, global_pool_every=3,
                        pool_channels=32, heads="pooled", policy_channels=32,
                        value_channels=32, value_hidden=(128,), ownership_head=True,
                        score_head=True),
}
"""Preset name -> NetConfig."""


