"""Honest Triton matmul on TF32 tensor cores (tl.dot with input_precision="tf32"), fp32 accumulation.

Triton feeds the fp32 registers straight to mma.tf32, which ignores the 13 low mantissa bits
(truncation, where cuBLAS rounds), so its error against the fp64 oracle is somewhat above the
eager-tf32 baseline's. Expected verdict on an H200: PASS under the kbv policy, because the budget
is k x the larger of the eager-fp32 and eager-tf32 baselines' own errors. Needs CUDA (or
TRITON_INTERPRET=1, where tl.dot runs in fp32 and TF32 plays no part).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ka = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * sam + ka[None, :] * sak,
                    mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ka[:, None] * sbk + rn[None, :] * sbn,
                    mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32")
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def forward(self, A, B):
        M, K = A.shape
        _, N = B.shape
        C = torch.empty(M, N, device=A.device, dtype=torch.float32)
        grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
        _mm_kernel[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                         C.stride(0), C.stride(1), BM=64, BN=64, BK=32)
        return C
