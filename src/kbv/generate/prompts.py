"""The generation prompts: a system prompt, the task (problem + rules + one-shot example) and the
refinement turn. Written for kbv; nothing here is copied from KernelBench's templates.

The one-shot example is one small problem (``a * b + a``) solved once per backend: a CUDA kernel
through ``torch.utils.cpp_extension.load_inline``, a Triton kernel, and a C++ (CPU) loop through
``load_inline``. It shows the output format, not a trick: every example computes each element on
every call and handles any size.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbv.generate.blind import blind_view
from kbv.generate.providers import Message

BACKENDS = ("cuda", "triton", "cpp")
PRECISIONS = ("fp32", "bf16")

SYSTEM_PROMPT = (
    "You are an expert performance engineer who writes custom GPU kernels for PyTorch models. "
    "You replace PyTorch operators with your own kernels to make models faster while computing "
    "the same result. You answer with one complete Python module in a single ```python code block.")

EXAMPLE_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * b + a
'''

_EXAMPLE_CUDA = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_src = r"""
#include <torch/extension.h>

__global__ void mul_add_kernel(const float* __restrict__ a, const float* __restrict__ b,
                               float* __restrict__ out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) out[i] = a[i] * b[i] + a[i];
}

torch::Tensor mul_add(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(a.sizes() == b.sizes(), "shapes must match");
    a = a.contiguous().to(torch::kFloat32);
    b = b.contiguous().to(torch::kFloat32);
    auto out = torch::empty_like(a);
    long long n = a.numel();
    if (n == 0) return out;
    int threads = 256;
    int blocks = (int)std::min<long long>((n + threads - 1) / threads, 65535LL * 8);
    mul_add_kernel<<<blocks, threads>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

_ext = load_inline(name="example_mul_add", cpp_sources="torch::Tensor mul_add(torch::Tensor a, torch::Tensor b);",
                   cuda_sources=_cuda_src, functions=["mul_add"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext.mul_add(a, b)
'''

_EXAMPLE_TRITON = r'''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mul_add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a * b + a, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        if n:
            grid = (triton.cdiv(n, 1024),)
            _mul_add_kernel[grid](a, b, out, n, BLOCK=1024)
        return out
'''

_EXAMPLE_CPP = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cpp_src = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>

torch::Tensor mul_add(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.sizes() == b.sizes(), "shapes must match");
    a = a.contiguous().to(torch::kFloat32);
    b = b.contiguous().to(torch::kFloat32);
    auto out = torch::empty_like(a);
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* po = out.data_ptr<float>();
    at::parallel_for(0, a.numel(), 4096, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) po[i] = pa[i] * pb[i] + pa[i];
    });
    return out;
}
"""

_ext = load_inline(name="example_mul_add_cpp", cpp_sources=_cpp_src, functions=["mul_add"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext.mul_add(a, b)
'''

EXAMPLES = {"cuda": _EXAMPLE_CUDA, "triton": _EXAMPLE_TRITON, "cpp": _EXAMPLE_CPP}

_BACKEND_TEXT = {
    "cuda": "Write CUDA C++ kernels and build them at import time with "
            "torch.utils.cpp_extension.load_inline (cuda_sources=..., functions=[...]).",
    "triton": "Write Triton kernels (@triton.jit) and launch them from forward.",
    "cpp": "Write C++ kernels for the CPU and build them at import time with "
           "torch.utils.cpp_extension.load_inline (cpp_sources=..., functions=[...]).",
}
_PRECISION_TEXT = {
    "fp32": "Inputs and parameters are float32. Outputs are compared with a float64 oracle; keep "
            "float32 accuracy (no TF32, no half precision inside).",
    "bf16": "The model and its floating-point inputs are cast to bfloat16. Outputs must be bfloat16 "
            "and within bfloat16 accuracy (accumulate in float32 where it matters).",
}

RULES = """Rules:
- Define `class ModelNew(nn.Module)` with the same constructor arguments and the same forward
  arguments and outputs as `Model`. It is constructed as `ModelNew(*get_init_inputs())` right after
  `torch.manual_seed(42)`, exactly like `Model`: create parameters the same way and in the same order
  so their initial values match.
- Your kernels must do the work: calling the operators of `Model` (or torch.compile, or inheriting
  from Model) instead of your own kernels counts as a shortcut, not a speedup.
- Be correct for every input the signature allows: any values (negative, tiny, huge), any sizes.
  No caching of results between calls, no special cases for particular inputs.
- Reply with one ```python code block holding the complete module (imports, kernels, ModelNew)."""

_BLIND_NOTE = ("The test inputs are withheld: `get_inputs()` and `get_init_inputs()` are shown without "
               "their bodies and the size constants are left out. Write a kernel that is right for any "
               "sizes and values.")


@dataclass(frozen=True)
class PromptOptions:
    backend: str = "cuda"  #: ``cuda`` | ``triton`` | ``cpp``.
    precision: str = "fp32"  #: ``fp32`` | ``bf16``.
    input_blind: bool = False  #: show :func:`kbv.generate.blind.blind_view` instead of the file.

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {self.backend!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}")


def problem_text(source: str, input_blind: bool) -> str:
    """The problem as the prompt shows it: the file, or its input-blind view with the argument kinds.

    Raises:
        SyntaxError: ``source`` is not Python.
    """
    if not input_blind:
        return source
    view = blind_view(source)
    args = "\n".join(f"- {a}" for a in view.arguments) or "- see Model.forward"
    return f"{view.source}\nArguments of Model.forward (kinds only; sizes are not fixed):\n{args}\n"


def task_prompt(source: str, options: PromptOptions) -> str:
    """The first user message for one problem file's source.

    Raises:
        SyntaxError: ``source`` is not Python (input-blind view only).
    """
    parts = [
        "Optimise the PyTorch model below with custom kernels.",
        _BACKEND_TEXT[options.backend] + " " + _PRECISION_TEXT[options.precision],
        RULES,
        "Example. Given this model:\n```python\n" + EXAMPLE_PROBLEM + "```\n"
        "a good answer is:\n```python\n" + EXAMPLES[options.backend] + "```",
        "Now the model to optimise:\n```python\n" + problem_text(source, options.input_blind).rstrip("\n") + "\n```",
    ]
    if options.input_blind:
        parts.append(_BLIND_NOTE)
    parts.append("Write ModelNew.")
    return "\n\n".join(parts)


def initial_messages(source: str, options: PromptOptions) -> tuple[Message, ...]:
    return (Message("user", task_prompt(source, options)),)


def refine_messages(history: tuple[Message, ...], answer: str, feedback: str) -> tuple[Message, ...]:
    """The conversation for the next refinement turn: the history, the model's last answer and kbv's
    feedback on it (:func:`kbv.generate.feedback.feedback_text`)."""
    turn = (f"kbv verified your ModelNew. Result:\n\n{feedback}\n\n"
            "Write an improved, complete ModelNew in one ```python code block.")
    return (*history, Message("assistant", answer), Message("user", turn))
