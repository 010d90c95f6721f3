"""A per-call leak (a bug, not a cheat): an honest ReLU by ``clamp_min`` that keeps every output it
returns in a list on the module (a history an author forgot), so the worker's memory grows by one
output a call and never levels off. Expected: PASS (its values are right, its time honest) with a
WARNING ``memory:growth`` naming the rate."""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.history = []

    def forward(self, x):
        out = x.clamp_min(0.0)
        self.history.append(out.clone())
        return out
