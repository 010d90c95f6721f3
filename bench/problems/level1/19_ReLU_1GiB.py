"""ReLU on a 1 GiB torch.rand input (16384 x 16384 fp32): KernelBench-Verified's level-1 ReLU is
4096 x 393216 (6 GiB); this is the size a 2-core, 24 GiB machine can verify within the 4·B + 1 GiB
bound (B = 2 GiB here, inputs and outputs)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 16384
dim = 16384


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
