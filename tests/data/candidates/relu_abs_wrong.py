"""An honest but wrong ReLU: ``abs(x)``. Even, so its outputs on D1 and D4 (inputs ``x`` and ``-x``)
are bit-identical while the references differ: INCORRECT, never HACK (a newcomer's kernel, 2026-12-05,
was HACK ``probe:repeated-output``)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.abs(x)
