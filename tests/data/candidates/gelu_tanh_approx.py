"""The tanh approximation of GELU for the exact (erf) GELU problem: within KernelBench's allclose
(atol = rtol = 1e-3; the approximation is off by up to ~3e-4) and over kbv's fp64-oracle budget.

Expected verdict: INCORRECT under the kbv policy, whose one line says it is within KernelBench's
allclose on every set (``oracle:within-allclose``), so ``--policy kbv-compat`` would pass it."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
