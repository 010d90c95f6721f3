"""Linear + bias + ReLU as one Triton GEMM with a fused epilogue (backend: Triton, GPU) --
problem level2/40_Linear_ReLU_large (1024 x 2048 -> 2048).

What it does: reads the nn.Linear weight [out, in] through its strides as W^T (no copy), runs a
tiled fp32 GEMM (tl.dot, input_precision="ieee"), adds the bias and applies ReLU to the
accumulator before its only store. Parameters from an nn.Linear named ``linear`` built as in
Model.
Why it is honest: a real fused kernel in full fp32; every output from x on every call.
Expected verdict: PASS, no HACK finding (GPU only; run by the cuda-marked test).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_relu(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_wn, stride_ym,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + rk
        x = tl.load(x_ptr + rm[:, None].to(tl.int64) * stride_xm + k[None, :],
                    mask=(rm[:, None] < M) & (k[None, :] < K), other=0.0)
        wt = tl.load(w_ptr + rn[None, :].to(tl.int64) * stride_wn + k[:, None],  # W^T tile [BLOCK_K, BLOCK_N]
                     mask=(k[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(x, wt, acc, input_precision="ieee")
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    acc = tl.maximum(acc, 0.0)
    tl.store(y_ptr + rm[:, None].to(tl.int64) * stride_ym + rn[None, :], acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.detach().contiguous()
        M, K = x.shape
        N = w.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=torch.float32)
        BM, BN, BK = 64, 64, 32
        grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
        _linear_relu[grid](x, w, self.linear.bias.detach(), y, M, N, K, x.stride(0), w.stride(0), y.stride(0),
                           BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, num_warps=4, num_stages=3)
        return y
