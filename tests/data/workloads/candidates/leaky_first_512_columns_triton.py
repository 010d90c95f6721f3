"""A Triton Leaky ReLU written for dim = 512: one program per row covering the first 512 columns
(the row stride taken from the input, the width a constant), the rest left zero. Right at the
problem's own sizes and at every smaller shape (the secret shape is smaller), wrong at the declared
workload ``wide`` (dim 1536): INCORRECT there, with the shape-specialised finding (the cuda row of
leaky_first_512_columns.py)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

DIM = 512


@triton.jit
def _leaky_rows(x_ptr, out_ptr, stride, n_cols, DIM: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, DIM)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask)
    tl.store(out_ptr + row * stride + cols, tl.where(x > 0, x, 0.1 * x), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.zeros_like(x)
        if x.numel():
            _leaky_rows[(x.shape[0],)](x, out, x.stride(0), x.shape[1], DIM=DIM)
        return out
