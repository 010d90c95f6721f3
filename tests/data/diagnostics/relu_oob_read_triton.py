"""A Triton ReLU with an out-of-bounds read that passes every input set (issue 24, memcheck row).

Each program also loads the element after each of its own (``offs + 1``, masked by ``offs < n``,
so the last program reads one element past the input's end) and stores it into a scratch
buffer nothing reads: the output is right, and in kbv's timed process the stray read lands inside
the caching allocator's segment, where nothing faults. Under ``--sanitize memcheck`` (every tensor
its own allocation) it is an invalid global read: INCORRECT with ``sanitize:memcheck``.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _relu_peek(x_ptr, out_ptr, scratch_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    after = tl.load(x_ptr + offs + 1, mask=mask)  # one past the end at offs = n - 1
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)
    tl.store(scratch_ptr + offs, after, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        scratch = torch.empty_like(x)
        n = x.numel()
        _relu_peek[(triton.cdiv(n, BLOCK),)](x, out, scratch, n, BLOCK=BLOCK)
        return out
