"""tanh-approximate GELU (F.gelu(approximate="tanh")) of a 64 x 256 float32 matrix."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return F.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.rand(64, 256)]


def get_init_inputs():
    return []
