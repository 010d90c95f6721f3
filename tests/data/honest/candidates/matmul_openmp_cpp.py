"""Honest control for level1/10_Large_K_matmul and the trusted bound (kbv.checks.bound_rules): a C++
matmul whose output rows are shared among OpenMP threads (``#pragma omp parallel for``; the pool's
threads stay alive and spin between calls), each dot product summed over K in its own order.
Expected: PASS, with no ``timing:claim-*`` finding (the threads' CPU time is the call's work)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
torch::Tensor mm(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.dtype() == torch::kFloat32 && B.dtype() == torch::kFloat32, "float32 only");
    auto a = A.contiguous(), b = B.t().contiguous();
    const int64_t M = a.size(0), K = a.size(1), N = b.size(0);
    auto C = torch::empty({M, N}, a.options());
    const float *pa = a.data_ptr<float>(), *pb = b.data_ptr<float>();
    float *pc = C.data_ptr<float>();
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            const float *x = pa + i * K, *y = pb + j * K;
            double s = 0;
            for (int64_t k = 0; k < K; ++k) s += (double)x[k] * y[k];
            pc[i * N + j] = (float)s;
        }
    return C;
}
"""
_ext = load_inline("kbv_honest_omp_mm", cpp_sources=_SRC, functions=["mm"],
                   extra_cflags=["-O2", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def forward(self, A, B):
        return _ext.mm(A, B)
