"""GPU-sized float32 square matmul, 2048 x 2048 x 2048."""
import torch
import torch.nn as nn

N = 2048


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(N, N), torch.rand(N, N)]


def get_init_inputs():
    return []
