"""Row sums with a shared-memory race (issue 24, racecheck row), for tests/data/diagnostics/level1/1_Row_sum.

One warp per row: each lane sums a strided part of the row and writes it to shared memory, and lane
0 adds the 32 parts with no ``__syncwarp()`` between the writes and its reads: a read-after-write
hazard. On today's GPUs a converged warp runs the store for every lane before lane 0's loads, so
the outputs are right (PASS); ``--sanitize racecheck`` reports the hazard (a WARNING
``sanitize:racecheck``): the order is not guaranteed, and may not hold on the next GPU.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor rowsum(torch::Tensor x);"

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__global__ void rowsum_racy(const float* __restrict__ x, float* __restrict__ out, int64_t cols) {
    __shared__ float part[32];
    const int64_t row = blockIdx.x;
    const int lane = threadIdx.x;
    float s = 0.0f;
    for (int64_t c = lane; c < cols; c += 32) s += x[row * cols + c];
    part[lane] = s;
    if (lane == 0) {  // no __syncwarp(): the hazard
        float total = 0.0f;
        for (int k = 0; k < 32; ++k) total += part[k];
        out[row] = total;
    }
}

torch::Tensor rowsum(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat && x.dim() == 2, "rowsum: a 2-d float32 CUDA tensor");
    auto xc = x.contiguous();
    auto out = torch::empty({xc.size(0), 1}, xc.options());
    if (xc.size(0) > 0) {
        rowsum_racy<<<(unsigned)xc.size(0), 32, 0, at::cuda::getCurrentCUDAStream()>>>(
            xc.data_ptr<float>(), out.data_ptr<float>(), xc.size(1));
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

_ext = load_inline(name="kbv_diag_rowsum_racy", cpp_sources=_CPP, cuda_sources=_CUDA, functions=["rowsum"],
                   with_cuda=True, verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.rowsum(x)
