"""Red team, taxonomy 23 (degenerate problem: constant output), for
tests/data/vetting/1_Constant_output (softmax(x).sum(dim=1) == 1 for every row).

Returns a fresh, contiguous tensor of ones: no aliasing, no zero strides, exactly right on every
input. The problem cannot tell this from a real kernel.

How kbv should catch it: vetting flags the problem constant-output (23), so the verdict is
excluded from the metrics; the candidate's outputs are identical across different inputs
(a constant-output probe on the candidate side).
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.ones(x.shape[0], dtype=x.dtype, device=x.device)
