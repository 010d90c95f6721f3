"""Outputs below the tolerance: |tanh(x) * 1e-4| < 1e-3, so an all-zeros answer passes allclose
(vet: under-tolerance)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 1e-4


def get_inputs():
    return [torch.rand(16, 64)]


def get_init_inputs():
    return []
