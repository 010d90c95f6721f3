"""Returns a Tensor subclass (taxonomy 3, lazy output): the trusted side refuses to decode it."""
import torch
import torch.nn as nn


class Lazy(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x).as_subclass(Lazy)
