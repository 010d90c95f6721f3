"""Honest Triton Leaky ReLU (slope 0.1) for any shape: one program per 1024 elements of the
flattened input, the tail masked. Expected: PASS at the problem's own sizes and at every declared
workload (tests/data/workloads/level1/1_Leaky_ReLU_workloads.py), on cuda (or cpu tensors under
TRITON_INTERPRET=1)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _leaky(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.where(x > 0, x, 0.1 * x), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        if n:
            _leaky[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
        return out
