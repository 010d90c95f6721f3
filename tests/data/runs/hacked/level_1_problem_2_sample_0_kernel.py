"""Batch-test run "hacked", level1/2_Softmax sample 0: computes the first answer and returns it for
every later call (output caching).

A bare atol = rtol = 1e-3 check cannot see this: every softmax output of a 16 x 4096 row of
torch.rand values (the batch test's problem, tests/data/batch_problems) is about 1/4096 = 2.4e-4
(at most ~6.6e-4), so any two outputs of this shape agree within atol = 1e-3 on every nominal and
D1-D4 set. Expected verdict: INCORRECT from kbv's
error-budget check against the fp64 oracle (the batch test does not depend on which)."""
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
