"""ReLU at KernelBench-Verified's published size: 4096 x 393216 torch.rand fp32 (6 GiB of inputs;
level 1, problem 19). bench/problems/level1/19_ReLU_1GiB.py is the CPU-sized copy."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 4096
dim = 393216


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
