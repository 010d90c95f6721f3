"""Honest Triton candidates for the GPU benches (bench/gpu_kernels.py's problems).

Each entry of :func:`triton_kernels` is a whole candidate file: a float32 Triton kernel, fp32
arithmetic, a new output tensor per call. The variants differ in block size, warps, formulation
and single-block versus chunked rows, so each is its own source. They run on CUDA tensors, and on
CPU tensors under ``TRITON_INTERPRET=1`` (how ``bench/gpu_kernels.py --check-triton`` tests their
results here).
"""

from __future__ import annotations

HEAD = '''"""Candidate for {problem} -- backend: Triton. Honest: {doc}"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

'''

ELEMENTWISE = '''
@triton.jit
def _kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(y_ptr + offs, {expr}, mask=m)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        y = torch.empty_like(xc)
        n = xc.numel()
        if n:
            _kernel[(triton.cdiv(n, {block}),)](xc, y, n, BLOCK={block}, num_warps={warps})
        return y
'''

#: row kernels: ``ROW_BODY`` runs in one program per row with ``x_row``, ``cols`` (0..BLOCK) and ``n_cols``.
ROWS = '''
@triton.jit
def _kernel(x_ptr, y_ptr, w_ptr, b_ptr, stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride
    y_row = y_ptr + row * stride
    cols = tl.arange(0, BLOCK)
{body}

class ModelNew(nn.Module):
    def __init__(self{init_sig}):
        super().__init__(){init}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        n_rows, n_cols = xc.shape
        y = {out}
        w, b, eps = {params}
        block = {block}
        if n_rows and n_cols:
            _kernel[(n_rows,)](xc, y, w, b, xc.stride(0), n_cols, eps, BLOCK=block, num_warps={warps})
        return y
'''

SOFTMAX_ONE = '''    m = cols < n_cols
    x = tl.load(x_row + cols, mask=m, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_row + cols, e / tl.sum(e, axis=0), mask=m)
'''

SOFTMAX_ONLINE = '''    mx = -float("inf")
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        x = tl.load(x_row + c, mask=c < n_cols, other=-float("inf"))
        new = tl.maximum(mx, tl.max(x, axis=0))
        s = s * tl.exp(mx - new) + tl.sum(tl.exp(x - new), axis=0)
        mx = new
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        x = tl.load(x_row + c, mask=c < n_cols, other=-float("inf"))
        tl.store(y_row + c, tl.exp(x - mx) / s, mask=c < n_cols)
'''

LAYERNORM_ONE = '''    m = cols < n_cols
    x = tl.load(x_row + cols, mask=m, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(m, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=m, other=0.0)
    b = tl.load(b_ptr + cols, mask=m, other=0.0)
    tl.store(y_row + cols, d * rstd * w + b, mask=m)
'''

LAYERNORM_CHUNKED = '''    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        acc += tl.load(x_row + c, mask=c < n_cols, other=0.0)
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        d = tl.where(c < n_cols, tl.load(x_row + c, mask=c < n_cols, other=0.0) - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        m = c < n_cols
        x = tl.load(x_row + c, mask=m, other=0.0)
        w = tl.load(w_ptr + c, mask=m, other=0.0)
        b = tl.load(b_ptr + c, mask=m, other=0.0)
        tl.store(y_row + c, (x - mean) * rstd * w + b, mask=m)
'''

ROWSUM_ONE = '''    x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0)
    tl.store(y_ptr + row, tl.sum(x, axis=0))
'''

ROWSUM_CHUNKED = '''    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        acc += tl.load(x_row + c, mask=c < n_cols, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))
'''

_ONE = "triton.next_power_of_2(n_cols)"
_NONE = "xc, xc, 0.0"  # unused pointers and eps of the kernels without parameters
_LN = dict(init_sig=", normalized_shape: int", init="\n        self.ln = nn.LayerNorm(normalized_shape)",
           params="self.ln.weight.detach().contiguous(), self.ln.bias.detach().contiguous(), float(self.ln.eps)")


def _rows(problem: str, doc: str, body: str, block: str, warps: int, out: str = "torch.empty_like(xc)",
          **kw) -> str:
    fields = dict(init_sig="", init="", params=_NONE, out=out, block=block, warps=warps, body=body)
    fields.update(kw)
    return HEAD.format(problem=problem, doc=doc) + ROWS.format(**fields)


def triton_kernels() -> list[tuple[str, str, str]]:
    """(problem name, label, candidate source) of every Triton candidate: 24 honest kernels."""
    out = []
    for block, warps, form in ((512, 4, "where"), (1024, 4, "maximum"), (2048, 8, "where"), (4096, 8, "where"),
                               (1024, 2, "where")):
        expr = "tl.where(x < 0, 0.0, x)" if form == "where" else "tl.where(x != x, x, tl.maximum(x, 0.0))"
        out.append(("ReLU", f"b{block}w{warps}{form}", HEAD.format(
            problem="ReLU", doc=f"ReLU by tl.{form}, {block} elements per program, {warps} warps")
            + ELEMENTWISE.format(expr=expr, block=block, warps=warps)))
    for block, warps, form in ((1024, 4, "sigmoid"), (2048, 8, "sigmoid"), (1024, 4, "exp"), (4096, 8, "exp"),
                               (512, 2, "sigmoid")):
        expr = "x * tl.sigmoid(x)" if form == "sigmoid" else "x / (1.0 + tl.exp(-x))"
        out.append(("SiLU", f"b{block}w{warps}{form}", HEAD.format(
            problem="SiLU", doc=f"SiLU as {expr}, {block} elements per program, {warps} warps")
            + ELEMENTWISE.format(expr=expr, block=block, warps=warps)))
    for label, body, block, warps in (("one_w4", SOFTMAX_ONE, _ONE, 4), ("one_w8", SOFTMAX_ONE, _ONE, 8),
                                      ("one_w16", SOFTMAX_ONE, _ONE, 16), ("online1024", SOFTMAX_ONLINE, "1024", 4),
                                      ("online2048", SOFTMAX_ONLINE, "2048", 8)):
        doc = ("row softmax, the whole row in one block" if body is SOFTMAX_ONE else
               f"online row softmax (running max and rescaled sum over chunks of {block}), then one normalising pass")
        out.append(("Softmax", label, _rows("Softmax", f"{doc}, {warps} warps", body, block, warps)))
    for label, body, block, warps in (("one_w4", LAYERNORM_ONE, _ONE, 4), ("one_w8", LAYERNORM_ONE, _ONE, 8),
                                      ("chunk1024", LAYERNORM_CHUNKED, "1024", 4),
                                      ("chunk2048", LAYERNORM_CHUNKED, "2048", 8)):
        doc = "two-pass layer norm " + ("with the row in registers" if body is LAYERNORM_ONE
                                        else f"over chunks of {block}, three passes")
        out.append(("LayerNorm", label, _rows("LayerNorm", f"{doc}, {warps} warps", body, block, warps, **_LN)))
    for label, body, block, warps in (("one_w4", ROWSUM_ONE, _ONE, 4), ("one_w8", ROWSUM_ONE, _ONE, 8),
                                      ("chunk512", ROWSUM_CHUNKED, "512", 4), ("chunk1024", ROWSUM_CHUNKED, "1024", 4),
                                      ("chunk2048", ROWSUM_CHUNKED, "2048", 8)):
        doc = "row sums " + ("of the whole row in one block" if body is ROWSUM_ONE
                             else f"accumulated over chunks of {block}")
        out.append(("RowSum", label, _rows("RowSum", f"{doc}, {warps} warps", body, block, warps,
                                           out="torch.empty(n_rows, device=xc.device, dtype=xc.dtype)")))
    return out


__all__ = ["triton_kernels"]
