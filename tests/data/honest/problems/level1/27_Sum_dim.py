"""Row sums (torch.sum over dim 1) of a 64 x 512 float32 matrix."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.sum(x, dim=1)


def get_inputs():
    return [torch.rand(64, 512)]


def get_init_inputs():
    return []
