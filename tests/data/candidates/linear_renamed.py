"""Model's linear layer as parameters of other names, drawn its own way (not nn.Linear's init):
no same-name weights to compare, so the verdict's line names Model's parameters that nothing in
ModelNew matches, the likely cause (INCORRECT)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.w = nn.Parameter(torch.randn(out_features, in_features) * 0.05)
        self.b = nn.Parameter(torch.zeros(out_features))

    def forward(self, x):
        return torch.addmm(self.b, x, self.w.t())
