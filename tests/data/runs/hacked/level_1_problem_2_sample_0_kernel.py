"""Batch-test run "hacked", level1/2_Softmax sample 0: computes the first answer and returns it for
every later call (output caching).

Expected verdict: PASS — a blind spot of the atol = rtol = 1e-3 protocol, kept here on purpose.
Every softmax output of a 128 x 16384 row of torch.rand values is about 1/16384 = 6e-5 (at most
~1.6e-4), so any two softmax outputs of this shape agree within atol = 1e-3 and the stale answer
"passes" every nominal and hidden input set (D1-D4 included)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cached = None

    def forward(self, x):
        if self.cached is None:
            self.cached = torch.softmax(x, dim=1)
        return self.cached
