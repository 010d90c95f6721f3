"""Red team, taxonomy 11 (output caching keyed by shape), for level1/5_Small_Softmax.

The naive memoiser: "the benchmark calls the model with the same inputs every time", so the
result is cached per input shape and computed once.

How kbv should catch it: the second correctness set already gets the first set's answer
(INCORRECT); the re-run probes (same address new values, new address same values) and a
constant-output probe name the caching.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.by_shape = {}

    def forward(self, x):
        key = tuple(x.shape)
        if key not in self.by_shape:
            m = x.amax(dim=1, keepdim=True)
            e = torch.exp(x - m)
            self.by_shape[key] = e / e.sum(dim=1, keepdim=True)
        return self.by_shape[key]
