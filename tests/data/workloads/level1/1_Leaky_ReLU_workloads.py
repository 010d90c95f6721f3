"""Leaky ReLU with declared workloads (issue 23): kbv verifies and times the candidate at the
problem's own sizes (batch_size 64, dim 512) and at each workload below."""
import torch
import torch.nn as nn

batch_size = 64
dim = 512

KBV_METADATA = {
    "workloads": {
        "tall": {"batch_size": 256},
        "wide": {"dim": 1536},
    },
}


class Model(nn.Module):
    def forward(self, x):
        return torch.where(x > 0, x, 0.1 * x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
