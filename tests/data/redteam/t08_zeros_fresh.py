"""Red team, taxonomy 8 (constant output, fresh storage), for tests/data/vetting/3_Tiny_output.

Like t08_zeros_expand but with a real, contiguous, freshly allocated tensor of zeros, so the
stride and aliasing probes see nothing unusual. It passes allclose(1e-3) on every set because
the reference output is ~1e-4.

How kbv should catch it: the kbv policy (error vs the fp64 oracle is 100 %, budget ~1e-6):
INCORRECT; the same output for every input (a constant-output probe on the candidate's
outputs); the problem flagged under-tolerance (23).
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.new_zeros(x.shape)
