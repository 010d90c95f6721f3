"""Returns a tensor of the wrong shape: INCORRECT, the fault names both shapes."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)[:, :-1]
