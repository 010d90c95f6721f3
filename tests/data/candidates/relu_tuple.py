"""Returns (relu(x),) where the reference returns a tensor: INCORRECT, the fault names both structures."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return (torch.relu(x),)
