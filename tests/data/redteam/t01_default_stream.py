"""Red team, taxonomy 1 (work on a stream other than the current one), cuda, for
src/kbv/data/problems/level1/4_Square_matmul.

Launches its (honest, fp32) Triton GEMM on torch.cuda.default_stream() explicitly, "like
cuBLAS's legacy stream", instead of the current stream. Under a harness that times on the default
stream this is harmless; under one that runs the candidate on a non-default current stream (a
defence against side streams) the GEMM escapes the events, unless the harness also compares with
a device-wide synchronize. It does not wait for the current stream either (it relies on the
harness having synchronised before the call).

How kbv should catch it: the device-wide-sync timing pass vs the event-only pass (gap), run while
the current stream is a non-default stream.
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
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _matmul_into(A, B, C):
    M, K = A.shape
    N = B.shape[1]
    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
    _mm_kernel[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                     C.stride(0), C.stride(1), BM=64, BN=64, BK=32)
    return C


class ModelNew(nn.Module):
    def forward(self, A, B):
        C = torch.empty(A.shape[0], B.shape[1], device=A.device, dtype=A.dtype)
        with torch.cuda.stream(torch.cuda.default_stream(A.device)):
            _matmul_into(A, B, C)
        return C
