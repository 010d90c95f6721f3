"""Red team, taxonomy 19 (numerical shortcut: one-pass variance), for
level1/12_LayerNorm_large_row.

Computes mean and E[x^2] in a single pass and var = E[x^2] - mean^2 (one read of the row instead
of two). On torch.rand inputs (mean 0.5, var 1/12) it is accurate to ~1e-6; with a large common
offset (1000 + N(0,1)) E[x^2] ~ 1e6 and float32 cancellation leaves a variance that is off by
several percent or negative (NaN).

How kbv should catch it: the offset / wide-range randomised distributions against the fp64
oracle: INCORRECT, with the finding "passes the nominal sets, fails hidden distributions".
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        n = x.shape[-1]
        s1 = x.sum(dim=-1, keepdim=True)
        s2 = (x * x).sum(dim=-1, keepdim=True)
        mean = s1 / n
        var = s2 / n - mean * mean
        return (x - mean) * torch.rsqrt(var + self.ln.eps) * self.ln.weight + self.ln.bias
