"""Candidate for level1/1_ReLU -- backend: CUDA (load_inline, cpp_sources + cuda_sources).

Honest: a float32 grid-stride ReLU kernel launched on PyTorch's current CUDA stream,
writing a new output tensor. Expected verdict: CORRECT on the nominal and all hidden
input sets, at about 1x against torch.relu (measured on an H200: 0.013 ms against
0.012 ms at 128 x 16384, where launch overhead dominates).
Needs a CUDA GPU and nvcc; importing it on a CPU-only machine fails at build time.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SOURCE = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x);
"""

_CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <algorithm>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = x[i];
        y[i] = v < 0.0f ? 0.0f : v;  // NaN propagates, like torch.relu
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "relu_forward: expected a CUDA tensor, got ", x.device());
    TORCH_CHECK(x.scalar_type() == at::kFloat, "relu_forward: expected float32, got ", x.scalar_type());
    const c10::cuda::CUDAGuard device_guard(x.device());
    torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty_like(xc, at::MemoryFormat::Contiguous);
    const int64_t n = xc.numel();
    if (n == 0) {
        return y;
    }
    const int threads = 256;
    const int64_t wanted = (n + threads - 1) / threads;
    const int blocks = (int)std::min<int64_t>(wanted, 65535);  // grid-stride loop covers the rest
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    relu_kernel<<<blocks, threads, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ext = load_inline(
    name="kbv_demo_relu_cuda",
    cpp_sources=_CPP_SOURCE,
    cuda_sources=_CUDA_SOURCE,
    functions=["relu_forward"],
    with_cuda=True,
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu_forward(x)
