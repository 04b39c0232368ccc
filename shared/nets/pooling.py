"""Global pooling over the board, after KataGo (Wu 2019, "Accelerating Self-Play Learning
in Go", and the KataGo nets since).

A convolution sees a few points around each point; global pooling gives every point a
summary of the whole board (how many liberties are in danger anywhere, how big the board
is) in one layer. Two poolings, both of a tensor ``[B, C, H, W]`` to ``[B, 3 C]``:

- ``global_pool``: the mean, the mean scaled by ``(sqrt(H W) - 14) / 10`` and the max
  over the board, per channel (KataGo's pooling for its pooling blocks and policy head).
- ``value_pool``: the mean, the same scaled mean and the mean scaled by
  ``((sqrt(H W) - 14)^2 / 100 - 0.1)`` (KataGo's value-head pooling: a max says little
  about who is ahead, and the quadratic term lets the value depend on the board size).

The board-size terms are constant on one board size (they make the mean and scaled mean
collinear there) and matter only for a net run on several sizes. There is no mask: every
input fills its whole ``H x W`` board (KataGo masks off-board points of smaller boards
padded into a 19x19 batch; we run each size as its own batch).

``GlobalPoolBias`` is KataGo's global pooling bias structure: pooled channels, through a
linear layer, shift the pre-activations of the other channels, one shift per channel and
position in the batch (the same at every point of the board).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["GlobalPoolBias", "global_pool", "value_pool", "board_width"]


def board_width(h: int, w: int) -> float:
    """sqrt(H W): the board's width for a square board, the size KataGo's terms use."""
    return float(h * w) ** 0.5


def _width(x: torch.Tensor) -> float:
    """``board_width`` of x [B, C, H, W]. No int()/float() of the sizes: under the ONNX
    exporter's tracing they are traced values, and the arithmetic records them as ops."""
    return (x.shape[2] * x.shape[3]) ** 0.5


def global_pool(x: torch.Tensor) -> torch.Tensor:
    """x [B, C, H, W] -> [B, 3 C]: per channel, mean, mean * (sqrt(H W) - 14) / 10, max.

    Channel order: the C means, then the C scaled means, then the C maxima.
    """
    mean = x.mean(dim=(2, 3))
    scale = (_width(x) - 14.0) / 10.0
    return torch.cat([mean, mean * scale, x.amax(dim=(2, 3))], dim=1)


def value_pool(x: torch.Tensor) -> torch.Tensor:
    """x [B, C, H, W] -> [B, 3 C]: per channel, mean, mean * (b - 14) / 10 and
    mean * ((b - 14)^2 / 100 - 0.1), with b = sqrt(H W). Order as in ``global_pool``."""
    mean = x.mean(dim=(2, 3))
    d = _width(x) - 14.0
    return torch.cat([mean, mean * (d / 10.0), mean * (d * d / 100.0 - 0.1)], dim=1)


class GlobalPoolBias(nn.Module):
    """Pooled channels bias the others: KataGo's global pooling bias structure.

    ``forward(v [B, G + X, H, W]) -> (y [B, X, H, W], pooled [B, 3 G])`` where ``v`` is a
    conv + batch-norm output *before* its ReLU, ``G = pooled_channels``,
    ``pooled = global_pool(relu(v[:, :G]))`` and
    ``y = relu(v[:, G:] + linear(pooled))``, the linear output ``[B, X]`` broadcast over
    the board.

    The bias is added after the batch norm, just before the ReLU (KataGo adds it before
    its batch norm): then the batch norm stays a plain conv + BN pair that
    ``fuse_for_inference`` folds exactly, and the bias still moves each channel's
    activation threshold, which is what lets the global features switch channels on and off.
    """

    def __init__(self, pooled_channels: int, biased_channels: int):
        super().__init__()
        self.pooled_channels = int(pooled_channels)
        self.linear = nn.Linear(3 * self.pooled_channels, int(biased_channels))

    def forward(self, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """v [B, G + X, H, W] -> (y [B, X, H, W], pooled [B, 3 G]); see the class doc."""
        g = self.pooled_channels
        pooled = global_pool(torch.relu(v[:, :g]))
        bias = self.linear(pooled)[:, :, None, None]
        return torch.relu(v[:, g:] + bias), pooled
