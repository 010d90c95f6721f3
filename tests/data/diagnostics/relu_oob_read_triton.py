"""A Triton ReLU with an out-of-bounds read that passes every input set (issue 24, memcheck row).

Each program also loads eight floats of a four-float tensor of its own (``tiny``, indices ``offs & 7``)
and stores them into a scratch buffer nothing reads: the output is right, and in kbv's timed
process the stray read lands inside the 512-byte block torch's caching allocator gives ``tiny``, where
nothing ever faults. Under ``--sanitize memcheck`` (every tensor its own ``cudaMalloc``) it is an
invalid global read 16-31 bytes past a 16-byte allocation: INCORRECT with ``sanitize:memcheck``.
(A read one element past the input's end instead faults in a timed run whenever the input closes
its allocator segment: on the H200 of 2026-12-05 it did, a RUNTIME_ERROR.)
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _relu_peek(x_ptr, out_ptr, tiny_ptr, scratch_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    stray = tl.load(tiny_ptr + (offs & 7), mask=mask)  # indices 4-7 are past tiny's four floats
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)
    tl.store(scratch_ptr + offs, stray, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        scratch = torch.empty_like(x)
        tiny = torch.zeros(4, device=x.device, dtype=x.dtype)
        n = x.numel()
        _relu_peek[(triton.cdiv(n, BLOCK),)](x, out, tiny, scratch, n, BLOCK=BLOCK)
        return out
