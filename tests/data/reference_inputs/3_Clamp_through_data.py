"""A reference that clamps its input through ``.data`` after using it (no version counter moves; on
get_inputs()'s torch.rand values the clamp changes nothing, on a scaled set it does): a red-team
helper's case against running the reference on a set's own inputs (tests/pipeline/test_reference_inputs.py)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        y = x * 2
        x.data.clamp_(max=1.0)
        return y + x


def get_inputs():
    return [torch.rand(64, 256)]


def get_init_inputs():
    return []
