"""A reference that clamps its input in place after using it: on get_inputs()'s torch.rand values
the clamp changes nothing, on a scaled set (D2, x3) it does. Its first run moves the input's version
counter all the same, so kbv copies the inputs for every run (tests/pipeline/test_reference_inputs.py)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        y = x * 2
        x.clamp_(max=1.0)
        return y + x


def get_inputs():
    return [torch.rand(64, 256)]


def get_init_inputs():
    return []
