"""Honest for inplace/1_Clamp_in_place: the same values, without writing the input: correct on every set
(SHORTCUT: torch's own ops)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2 + torch.clamp(x, max=1.0)
