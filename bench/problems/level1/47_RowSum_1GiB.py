"""An input-heavy problem for bench/memory_peaks.py: a 1 GiB input (16384 x 16384 float32) summed over
its rows into 64 KiB, so B is nearly all input and the bound 4·B + 1 GiB is about 5 GiB (the shape of
KernelBench-Verified's pooling and reduction problems at full size)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)


def get_inputs():
    return [torch.rand(16384, 16384)]


def get_init_inputs():
    return []
