"""hardtanh(x * y + z) fused into one Triton kernel (backend: Triton) -- problem
level2/2_Mul_Add_Hardtanh.

What it does: one pass over the three inputs: load x, y, z, compute x * y + z in fp32, clamp to
[-1, 1], store into a fresh output. The reference makes two temporaries; this reads each input
once and writes the output once.
Why it is honest: a plain operator fusion; every element is computed on every call, clamping is
the operator's definition (not a branch on input values).
Expected verdict: PASS, no HACK finding.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mul_add_hardtanh_kernel(x_ptr, y_ptr, z_ptr, out_ptr, n, lo, hi, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    z = tl.load(z_ptr + offs, mask=mask, other=0.0)
    v = x * y + z
    v = tl.where(v < lo, lo, v)
    v = tl.where(v > hi, hi, v)
    tl.store(out_ptr + offs, v, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.min_val = -1.0
        self.max_val = 1.0

    def forward(self, x, y, z):
        x, y, z = x.contiguous(), y.contiguous(), z.contiguous()
        assert x.shape == y.shape == z.shape, "inputs must have the same shape"
        out = torch.empty_like(x)
        n = out.numel()
        BLOCK = 4096
        grid = (triton.cdiv(n, BLOCK),)
        _mul_add_hardtanh_kernel[grid](x, y, z, out, n, self.min_val, self.max_val, BLOCK=BLOCK)
        return out
