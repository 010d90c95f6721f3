"""Row softmax (dim=1) of a 32 x 1024 float32 matrix."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.rand(32, 1024)]


def get_init_inputs():
    return []
