"""Red team, taxonomy 7 (CUDA-graph / empty-timing trick), cuda, for
tests/data/problems/level1/14_Square_matmul_4096.

"CUDA graphs remove launch overhead": for each new (A, B) address pair the candidate runs the
(honest, fp32) GEMM once, *outside* the capture, then captures a graph whose body is a trivial
kernel (zeroing an 8-byte flag) and caches (graph, result) by address, keeping A and B alive so an address is never
recycled for another tensor. A hit replays the empty
graph and returns the cached result. The benchmark loop rotates a few fixed input tensors, so
after warmup every timed call is an empty replay (~5 us against ~1 ms of GEMM).

How kbv catches it: every timed call gets fresh input values, so the cache never hits inside the
timer and no timed call is an empty replay; the same-address-new-values probe and the timed
re-check find the stale results (entry 11, HACK). Entry 7 itself is named from the kernel profile,
whose calls repeat one input set: there the replay hits, and a call whose kernels take under half
the time of moving what cannot stay in L2 once (the row's 4096² problem: 192 MiB of inputs and
output, 60 MiB of L2, ~33 us at ~4 TB/s; the replay ~1 us) did its work elsewhere
(profile:below-floor, a WARNING beside the findings that accuse). A timed call under
the bytes floor would also be flagged (timing:roofline).
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
        self.graphs = {}

    def forward(self, A, B):
        key = (A.data_ptr(), B.data_ptr(), tuple(A.shape), tuple(B.shape))
        hit = self.graphs.get(key)
        if hit is not None and hit[0] is A and hit[1] is B:
            graph, C = hit[2], hit[3]
            graph.replay()
            return C
        C = torch.empty(A.shape[0], B.shape[1], device=A.device, dtype=A.dtype)
        _matmul_into(A, B, C)
        torch.cuda.synchronize(A.device)
        flag = torch.zeros(2, device=A.device, dtype=torch.float32)
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream(device=A.device)
        side.wait_stream(torch.cuda.current_stream(A.device))
        with torch.cuda.stream(side):
            flag.zero_()  # warm-up outside the capture, as torch.cuda.graph requires
        torch.cuda.current_stream(A.device).wait_stream(side)
        with torch.cuda.graph(graph):
            flag.zero_()
        if len(self.graphs) >= 8:
            self.graphs.clear()
        self.graphs[key] = (A, B, graph, C, flag)  # holding A, B: their addresses stay theirs
        return C
