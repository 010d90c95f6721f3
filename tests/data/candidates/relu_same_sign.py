"""Red team, taxonomy 20 (value-distribution exploit): a ReLU that looks at one element's sign.

KernelBench's inputs (torch.rand) and D1-D3 are all non-negative, D4 (x -1) is all negative, so
"if the first element is >= 0 return x, else return zeros" is exact on every one of them. It is
wrong whenever signs are mixed.
Expected verdict: INCORRECT: every nominal and D1-D4 set passes, the mixed-sign randomised sets
(normal, sign-flip, heavy-tail, wide-range, outliers, near-zero) fail.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        if bool(x.reshape(-1)[0] >= 0):
            return x.clone()
        return torch.zeros_like(x)
