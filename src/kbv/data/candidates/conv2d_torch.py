"""Candidate for level1/5_Conv2d -- backend: torch (plain PyTorch, no custom kernel).

Honest: calls torch.nn.functional.conv2d with the weight and bias of an nn.Conv2d named
``conv2d`` built exactly as in Model (same seed -> same weights). It does the same work
as the reference through the same library.
Expected verdict: SHORTCUT (correct, but forward runs the reference's own torch op, taxonomy 15): CORRECT on the nominal and all hidden input sets, about 1x speed.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        dilation: int = 1,
        groups: int = 1,
        bias: bool = False,
    ):
        super().__init__()
        self.conv2d = nn.Conv2d(
            in_channels,
            out_channels,
            (kernel_size, kernel_size),
            stride=stride,
            padding=padding,
            dilation=dilation,
            groups=groups,
            bias=bias,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv2d
        return F.conv2d(x, c.weight, c.bias, c.stride, c.padding, c.dilation, c.groups)
