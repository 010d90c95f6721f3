"""Candidate for level1/1_ReLU -- backend: C++ (CPU, torch.utils.cpp_extension.load_inline).

Honest: an element-wise ReLU written as a plain loop over a contiguous float32 buffer.
Expected verdict: CORRECT on the nominal and all hidden input sets; runs on CPU only
(a CUDA tensor is refused with an error). Speed is whatever one scalar loop gives --
typically no faster than torch.relu, which is vectorised and multi-threaded.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SOURCE = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "relu_forward: expected a CPU tensor, got ", x.device());
    TORCH_CHECK(x.scalar_type() == torch::kFloat32,
                "relu_forward: expected float32, got ", x.scalar_type());
    torch::Tensor xc = x.contiguous();
    torch::Tensor out = torch::empty_like(xc, torch::MemoryFormat::Contiguous);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) {
        const float v = in[i];
        o[i] = v < 0.0f ? 0.0f : v;  // NaN propagates, like torch.relu
    }
    return out;
}
"""

_ext = load_inline(
    name="kbv_demo_relu_cpp",
    cpp_sources=_CPP_SOURCE,
    functions=["relu_forward"],
    with_cuda=False,
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu_forward(x)
