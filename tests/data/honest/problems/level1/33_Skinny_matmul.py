"""A skinny float32 matmul with a long reduction: 16 x 4096 @ 4096 x 16 (split-K territory)."""
import torch
import torch.nn as nn

M = 16
K = 4096
N = 16


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
