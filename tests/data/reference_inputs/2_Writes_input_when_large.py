"""A reference that writes its input only where a value is over 1 (never on get_inputs()'s
torch.rand values, so its first run changes nothing): kbv runs it on a copy, so the candidate is
judged on the set's own values (tests/pipeline/test_reference_inputs.py)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        if bool(x.max() > 1):
            x.add_(1)
        return y


def get_inputs():
    return [torch.rand(64, 256)]


def get_init_inputs():
    return []
