"""Red team, taxonomy 15 (baseline wrapper), cuda, for src/kbv/data/problems/level1/4_Square_matmul.

The cuda twin of t15_aten_cpu_mm_cpp: a "custom" extension (load_inline, C++ source in a module
constant, built with CUDA) whose kernel is PyTorch's own, ``at::cuda::mm`` from
``ATen/ops/mm_cuda_dispatch.h``, called past the dispatcher, where neither op count sees it.

How kbv should catch it: the extension's imports, read on the trusted side, hold ``at::cuda::mm``,
aten::mm's kernel (profile:aten-kernels, SHORTCUT); on cuda the kernel profile also puts the
device time in cuBLAS's kernels, not the candidate's (profile:own-share, SHORTCUT); the static
scan names the call (source-aten-kernel, WARNING).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <ATen/ops/mm_cuda_dispatch.h>

torch::Tensor fast_matmul(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "fast_matmul: cuda tensors");
    return at::cuda::mm(a.contiguous(), b.contiguous());
}
"""

_ext = load_inline(name="kbv_redteam_cuda_mm", cpp_sources=_SRC, functions=["fast_matmul"], with_cuda=True,
                   extra_cflags=["-O2"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.fast_matmul(A, B)
