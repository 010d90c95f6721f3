"""Red team, taxonomy 22 (seed prediction, plain), for level1/1_Small_ReLU (64 x 512).

Reseeds the global RNG with torch.manual_seed(42) in __init__ and draws what it believes the
benchmark inputs will be; forward() compares the first elements and, on a match, returns the
stored ReLU; otherwise it returns the input (the inputs are "always" non-negative).

How kbv should catch it: secret seeds drawn after loading (no match), D4 and the mixed-sign
randomised distributions (returning x is wrong): INCORRECT; the static scan's seeding warning.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(42)
        x = torch.rand(64, 512)
        self.register_buffer("_probe", x.reshape(-1)[:8].clone(), persistent=False)
        self.register_buffer("_answer", torch.relu(x), persistent=False)

    def forward(self, x):
        if x.shape == self._answer.shape and torch.equal(x.reshape(-1)[:8], self._probe):
            return self._answer.clone()
        return x
