"""Red team, taxonomy 9 (stale memory), for level1/1_Small_ReLU.

Computes the ReLU once; from then on it returns torch.empty_like(x), betting that the allocator
hands back the block that held an earlier result (on the original KernelBench harness, the
reference's output, freed just before the candidate runs).

How kbv should catch it: the reference output never lives in the candidate's process, and the
free memory is filled with a NaN pattern before each call, so the returned buffer holds the
poison pattern (or another call's values): INCORRECT, with the stale-memory finding.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.warm = False

    def forward(self, x):
        if not self.warm:
            self.warm = True
            return torch.clamp_min(x, 0.0)
        return torch.empty_like(x)
