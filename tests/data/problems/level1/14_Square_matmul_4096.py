"""A float32 square matmul, N = 4096 (KernelBench level 1 problem 1's shape): inputs and output
(192 MiB) exceed an H200's L2 three times over, so a call that moves none of them is visible."""
import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(N, N), torch.rand(N, N)]


def get_init_inputs():
    return []
