"""Red team, taxonomy 6 (phase detection from the stream state), cuda, for
src/kbv/data/problems/level1/4_Square_matmul.

A checked call comes after the harness synchronised (to read the previous output), so the
current stream is idle when forward starts; inside a benchmark loop the previous GEMM or the L2
flush is still queued, so the stream is busy. forward() asks torch.cuda.current_stream().query():
idle -> honest GEMM; busy -> return the last output again without launching anything.

How kbv should catch it: re-check randomly chosen timed calls inside the loop; make the stream
state of checked calls look like timed ones (queue work before checked calls, or check inside
the timing loop); the sync-vs-event pass and the roofline floor see the empty calls.
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
    def __init__(self):
        super().__init__()
        self.last = None

    def forward(self, A, B):
        busy = not torch.cuda.current_stream(A.device).query()
        if busy and self.last is not None and self.last.shape == (A.shape[0], B.shape[1]):
            return self.last
        C = torch.empty(A.shape[0], B.shape[1], device=A.device, dtype=A.dtype)
        self.last = _matmul_into(A, B, C)
        return self.last
