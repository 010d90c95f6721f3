"""Red team, taxonomy 10 (garbage within a loose tolerance), for tests/data/vetting/3_Tiny_output
(tanh(x) * 1e-4).

tanh(x) ~ x "for small x": it returns x * 1e-4. On torch.rand inputs the error reaches
(1 - tanh(1)) * 1e-4 ~ 2.4e-5, far inside atol = 1e-3, so allclose passes everywhere; the
answer is off by up to 31 %.

How kbv should catch it: the kbv policy's normalised error against the fp64 oracle is ~10^5
times the fp32 baseline's: INCORRECT, with the finding "passes allclose, fails the oracle"; the
problem is flagged under-tolerance (23).
"""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 1e-4
