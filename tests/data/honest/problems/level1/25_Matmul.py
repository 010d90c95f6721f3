"""A float32 matmul whose sizes are no multiples of a tile (64 x 100 @ 100 x 72): masks matter."""
import torch
import torch.nn as nn

M = 64
K = 100
N = 72


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
