"""Red team, taxonomy 10 (garbage within a loose tolerance), for tests/data/vetting/3_Tiny_output.

Computes tanh(x) * 1e-4 for every row but the last, which it leaves as torch.empty: freshly
mapped pages are zero and zero is within atol of a 1e-4-sized reference, so allclose passes;
whatever garbage the allocator hands back is "usually small".

How kbv should catch it: the kbv policy (fp64 oracle: the last row is 100 % wrong); the poisoned
allocator pool shows the unwritten elements; bitwise repeatability across runs of the same input.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        out[:-1] = torch.tanh(x[:-1]) * 1e-4
        return out
