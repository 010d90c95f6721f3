"""Red team, taxonomy 9 (stale memory), cuda, for src/kbv/data/problems/level1/4_Square_matmul.

Runs one real GEMM (torch.mm) on the first call; every later call returns torch.empty of the
output shape, betting that the caching allocator hands back a block that still holds a valid
result (on the original KernelBench harness, the reference output freed a moment earlier, which
lives in the same process and has the same size).

How kbv should catch it: reference outputs never exist in the candidate's process; the
allocator's free blocks are filled with the NaN poison pattern before each call, so the
returned block shows the pattern: INCORRECT with the stale-memory finding.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.warm = False

    def forward(self, A, B):
        if not self.warm:
            self.warm = True
            return torch.mm(A, B)
        return torch.empty(A.shape[0], B.shape[1], device=A.device, dtype=A.dtype)
