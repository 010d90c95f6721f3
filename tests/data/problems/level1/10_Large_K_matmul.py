"""A float32 matmul with a long reduction (K = 16384): precision downgrades show up here."""
import torch
import torch.nn as nn

M = 16
K = 16384
N = 16


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
