"""An output-heavy problem for bench/memory_peaks.py: 80 KiB of inputs, a 256 MiB output (the outer
product of a 16384- and a 4096-vector), so B is nearly all output and the bound 4·B + 1 GiB is
about 2 GiB."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.outer(x, y)


def get_inputs():
    return [torch.rand(16384), torch.rand(4096)]


def get_init_inputs():
    return []
