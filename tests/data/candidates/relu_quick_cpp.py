"""Honest C++ ReLU that compiles in seconds: for the tests of kbv's build orchestration (locks,
Ctrl-C during a build, build pools), whose subject is the build and not the kernel.

``load_inline`` with ``no_implicit_headers=True`` and only pybind11 included: about 5 s of ``c++``
on the 2-core CI machine, against about 25 s for ``relu_cpp.py``'s ``torch/extension.h``. The
kernel reads and writes float32 through the tensors' data pointers (contiguous inputs only, as
the problem's ``get_inputs()`` gives them); the output tensor is torch's.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SOURCE = r"""
#include <pybind11/pybind11.h>
#include <cstdint>

void relu_forward(std::uintptr_t x, std::uintptr_t out, std::int64_t n) {
    const float* in = reinterpret_cast<const float*>(x);
    float* o = reinterpret_cast<float*>(out);
    for (std::int64_t i = 0; i < n; ++i) {
        const float v = in[i];
        o[i] = v < 0.0f ? 0.0f : v;  // NaN propagates, like torch.relu
    }
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu_forward", &relu_forward); }
"""

_ext = load_inline(name="kbv_test_relu_quick_cpp", cpp_sources=_CPP_SOURCE, no_implicit_headers=True,
                   with_cuda=False, extra_cflags=["-O2"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32 or x.device.type != "cpu":
            raise TypeError(f"relu_forward: expected a float32 cpu tensor, got {x.dtype} on {x.device}")
        x = x.contiguous()
        out = torch.empty_like(x)
        _ext.relu_forward(x.data_ptr(), out.data_ptr(), x.numel())
        return out
