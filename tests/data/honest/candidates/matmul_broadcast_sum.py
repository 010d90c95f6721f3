"""Honest control for level1/10_Large_K_matmul and the trusted bound (kbv.checks.bound_rules): a matmul
as a broadcast product summed over K (its own ops, not torch.matmul; the sum runs in another order
than the GEMM's). Expected: PASS, with the trusted bound at or under its claimed time (no
``timing:claim-*`` finding)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        return (A.unsqueeze(2) * B.unsqueeze(0)).sum(1)
