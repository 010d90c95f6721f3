"""Red team, taxonomy 5 (cross-call batching), cuda, for src/kbv/data/problems/level1/4_Square_matmul.

Honest for the first 15 calls (kbv's correctness phase). Then each call only queues (A, B, C)
and returns the unwritten C; every 4th call launches the four queued GEMMs back to back. Three
timed calls in four measure nothing, so the median collapses to the launch overhead; by the end
of a Time request every buffer has been written.

How kbv should catch it: re-check randomly chosen timed calls with the output copied right after
that call (a sync inside the loop for the kept call), not at the end of the loop; the
sync-vs-event timing pass; the roofline floor (2*2048^3 flops cannot take 5 us).
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


_CHECKED_CALLS = 15
_BATCH = 4


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.queue = []

    def forward(self, A, B):
        self.calls += 1
        C = torch.empty(A.shape[0], B.shape[1], device=A.device, dtype=A.dtype)
        if self.calls <= _CHECKED_CALLS:
            return _matmul_into(A, B, C)
        self.queue.append((A, B, C))
        if len(self.queue) >= _BATCH:
            for a, b, c in self.queue:
                _matmul_into(a, b, c)
            self.queue = []
        return C
