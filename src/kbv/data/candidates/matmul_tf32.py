"""Candidate for level1/4_Square_matmul -- backend: torch (cuBLAS with TF32 tensor cores).

Not a kernel at all: it runs the same torch.matmul with
torch.backends.cuda.matmul.allow_tf32 switched on for the call (and restored afterwards),
so a GPU uses TF32 tensor cores (10-bit mantissa inputs, fp32 accumulation).
Expected verdict: SHORTCUT (correct, but forward runs the reference's own torch op, taxonomy 15): CORRECT within atol = rtol = 1e-3 of the strict-FP32 reference for
these [0, 1) inputs (N = 2048; on an H200 the max abs error was 0.03 on outputs near 512,
well inside rtol). Several times faster than the strict-FP32 baseline on an Ampere/Hopper
GPU (measured on an H200: 0.052 ms against 0.341 ms, 6.5x), but about 1x against the TF32
baseline (0.055 ms), which is the point: its "speedup" is only the precision mode. On a
CPU the flag does nothing (1x).
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        saved = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return torch.matmul(A, B)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = saved
