"""Red team, taxonomy 17 (precision downgrade), for level1/12_LayerNorm_large_row (32768-long
rows).

"Read the row in bfloat16 to halve the memory traffic of the statistics pass": mean and variance
come from a bfloat16 copy of the input (accumulated in float32), the normalisation itself is
done in float32. The rounding errors of the 32768 inputs mostly average out, so the output is
off by ~1e-5: well inside allclose(1e-3), but ~100 x the fp32 baseline's error.

How kbv should catch it: the kbv policy (error vs the fp64 oracle beyond k x the baselines'
errors): INCORRECT with the finding "passes allclose, fails the oracle"; the static scan's
half-cast rule.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        xb = x.to(torch.bfloat16).float()
        mean = xb.mean(dim=-1, keepdim=True)
        var = (xb - mean).pow(2).mean(dim=-1, keepdim=True)
        y = (x - mean) * torch.rsqrt(var + self.ln.eps)
        return y * self.ln.weight + self.ln.bias
