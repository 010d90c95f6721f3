"""Red team (taxonomy 21): for level1/2_Small_Linear, a ModelNew that refuses to be built with other
sizes than the problem's own (its kernel would be specialised to them). Expected: INCORRECT, the
secret shape's set failed with the build's error, whichever side of the candidate's own sets the
shape is judged on."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        if (in_features, out_features) != (64, 48):
            raise ValueError(f"built for 64 x 48 only, not {in_features} x {out_features}")
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.addmm(self.linear.bias, x, self.linear.weight.t())
