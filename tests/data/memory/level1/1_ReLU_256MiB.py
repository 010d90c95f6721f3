"""ReLU on a 256 MiB torch.rand input (4096 x 16384 fp32): big enough that kbv's own copies of
it dominate the reference worker's memory (tests/e2e/test_memory.py asserts the 4·B + 1 GiB bound)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.rand(4096, 16384)]


def get_init_inputs():
    return []
