"""Candidate for level2/1_Gemm_Bias_ReLU_Scale -- backend: C++ (CPU, load_inline).

Honest: the GEMM is torch.nn.functional.linear *without* bias (a library GEMM, allowed);
the epilogue -- add bias, ReLU, multiply by scaling_factor -- is one C++ pass that
overwrites the fresh GEMM output in place (one output buffer instead of three).
Parameters come from an nn.Linear named ``gemm``, created exactly as in Model, so with
torch.manual_seed(42) before each constructor the weights are identical.
Expected verdict: CORRECT on the nominal and all hidden input sets; CPU only.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_CPP_SOURCE = r"""
#include <torch/extension.h>

// y: [..., N] contiguous float32, freshly produced by the GEMM; bias: [N] float32.
// y <- max(y + bias, 0) * scale, in one pass.
torch::Tensor bias_relu_scale_(torch::Tensor y, torch::Tensor bias, double scale) {
    TORCH_CHECK(y.device().is_cpu() && bias.device().is_cpu(), "bias_relu_scale_: CPU tensors only");
    TORCH_CHECK(y.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32,
                "bias_relu_scale_: float32 tensors only");
    TORCH_CHECK(y.is_contiguous(), "bias_relu_scale_: y must be contiguous");
    TORCH_CHECK(y.dim() >= 1, "bias_relu_scale_: y must have at least one dimension");
    const int64_t n = y.size(-1);
    TORCH_CHECK(bias.numel() == n, "bias_relu_scale_: bias has ", bias.numel(),
                " elements, expected ", n);
    torch::Tensor b = bias.contiguous();
    const float* bp = b.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const int64_t rows = n == 0 ? 0 : y.numel() / n;
    const float s = static_cast<float>(scale);
    for (int64_t r = 0; r < rows; ++r) {
        float* row = yp + r * n;
        for (int64_t j = 0; j < n; ++j) {
            const float v = row[j] + bp[j];
            row[j] = (v < 0.0f ? 0.0f : v) * s;
        }
    }
    return y;
}
"""

_ext = load_inline(
    name="kbv_demo_fused_gemm_cpp",
    cpp_sources=_CPP_SOURCE,
    functions=["bias_relu_scale_"],
    with_cuda=False,
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scaling_factor: float):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, self.gemm.weight).contiguous()  # GEMM only; bias goes into the epilogue
        return _ext.bias_relu_scale_(y, self.gemm.bias.detach(), float(self.scaling_factor))
