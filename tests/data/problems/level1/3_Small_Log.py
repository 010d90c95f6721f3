"""log(x): finite on torch.rand inputs, NaN on negative ones, so hidden set D4 (x -1) is dropped."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.log(x + 1e-3)


def get_inputs():
    return [torch.rand(16, 128)]


def get_init_inputs():
    return []
