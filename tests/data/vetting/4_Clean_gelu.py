"""A sound problem (control): vet finds nothing."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return F.gelu(x)


def get_inputs():
    return [torch.rand(16, 64)]


def get_init_inputs():
    return []
