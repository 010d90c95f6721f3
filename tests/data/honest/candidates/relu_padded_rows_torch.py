"""ReLU written into rows padded to three times their length (backend: torch) -- problem
level1/1_Small_ReLU.

What it does: allocates a (batch, 3 * dim) buffer, writes clamp_min(x, 0) into its first dim
columns and returns that slice: a non-contiguous output whose storage spans about 3x its elements
(as a kernel that keeps padded rows, or returns one chunk of a fused wider result, does).
Why it is honest: every element is computed on every call, in a fresh buffer.
Expected: PASS (kbv copies out the outputs' storage span: a padded honest output must fit)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        wide = torch.empty(x.shape[0], 3 * x.shape[1], dtype=x.dtype)
        out = wide[:, :x.shape[1]]
        torch.clamp_min(x, 0, out=out)
        return out
