"""Honest control for level1/10_Large_K_matmul and the trusted bound (kbv.checks.bound_rules): a C++
matmul that starts two ``std::thread`` per call, each computing half of the output rows, and joins
them before it returns (the threads no longer exist when the bound pass's CPU time is read).
Expected: PASS, with no ``timing:claim-*`` finding."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <thread>
static void rows(const float *pa, const float *pb, float *pc, int64_t r0, int64_t r1, int64_t K, int64_t N) {
    for (int64_t i = r0; i < r1; ++i)
        for (int64_t j = 0; j < N; ++j) {
            const float *x = pa + i * K, *y = pb + j * K;
            float s = 0;
            for (int64_t k = 0; k < K; ++k) s += x[k] * y[k];
            pc[i * N + j] = s;
        }
}
torch::Tensor mm(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.dtype() == torch::kFloat32 && B.dtype() == torch::kFloat32, "float32 only");
    auto a = A.contiguous(), b = B.t().contiguous();
    const int64_t M = a.size(0), K = a.size(1), N = b.size(0);
    auto C = torch::empty({M, N}, a.options());
    const float *pa = a.data_ptr<float>(), *pb = b.data_ptr<float>();
    float *pc = C.data_ptr<float>();
    std::thread t0(rows, pa, pb, pc, 0, M / 2, K, N), t1(rows, pa, pb, pc, M / 2, M, K, N);
    t0.join();
    t1.join();
    return C;
}
"""
_ext = load_inline("kbv_honest_joined_mm", cpp_sources=_SRC, functions=["mm"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, A, B):
        return _ext.mm(A, B)
