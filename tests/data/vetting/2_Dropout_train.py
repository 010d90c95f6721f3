"""Stochastic: dropout in training mode (KernelBench never calls .eval()) (vet: stochastic)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.dropout = nn.Dropout(p)

    def forward(self, x):
        return self.dropout(x) * 2.0


def get_inputs():
    return [torch.rand(16, 64)]


def get_init_inputs():
    return [0.5]
