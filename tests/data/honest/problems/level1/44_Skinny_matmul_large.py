"""GPU-sized skinny float32 matmul with a long reduction: 256 x 65536 @ 65536 x 256."""
import torch
import torch.nn as nn

M = 256
K = 65536
N = 256


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
