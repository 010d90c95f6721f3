import torch
import torch.nn as nn


class Model(nn.Module):
    """Element-wise Bessel function of the first kind, order 0: tens of ns of compute per element
    on a cpu, so a table lookup per element is cheaper than the function (red-team rows
    t11-element-memo-cpp, t15-element-memo-wrapper)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.bessel_j0(x)


batch_size = 16
dim = 16384


def get_inputs():
    return [torch.randn(batch_size, dim) * 4]


def get_init_inputs():
    return []
