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
    """Hidden FC layer sizes between the value conv and the single tanh output."""

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
}
"""Preset name -> NetConfig."""


