"""Same structure as Model but draws its own weights: every output is wrong and the same-weights
check names the parameters that differ (INCORRECT)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        with torch.no_grad():
            self.linear.weight.mul_(2.0)

    def forward(self, x):
        return self.linear(x)
