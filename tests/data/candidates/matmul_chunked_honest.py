"""Honest control for level1/10_Large_K_matmul: float32 throughout, the K reduction split into
16 chunks whose partial products are summed in a different order than torch.matmul's.
Expected verdict: PASS under the kbv policy (its error vs the fp64 oracle is ~1-2 x the fp32
baseline's, well inside k x baseline + floor).
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        k = A.shape[1]
        step = max(1, k // 16)
        out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        for s in reversed(range(0, k, step)):
            out = out + A[:, s:s + step] @ B[s:s + step]
        return out
