# The batch test's Softmax: kbv's demo problem level1/2_Softmax at 16 x 4096 (a batch of small jobs).
import torch
import torch.nn as nn


class Model(nn.Module):
    """Simple model that performs a softmax over the feature dimension (dim=1)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 16
dim = 4096


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
