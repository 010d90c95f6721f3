"""Leaky ReLU with its own settings (issue 23): five nominal seeds and a looser allclose tolerance
unless the user sets them."""
import torch
import torch.nn as nn

batch_size = 32
dim = 256

KBV_METADATA = {
    "config": {"nominal_seeds": 5, "atol": 1e-2, "rtol": 1e-2},
}


class Model(nn.Module):
    def forward(self, x):
        return torch.where(x > 0, x, 0.1 * x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
