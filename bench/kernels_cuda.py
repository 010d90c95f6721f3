"""Honest CUDA ``load_inline`` candidates for the GPU benches (bench/gpu_kernels.py's problems).

Each entry of :func:`cuda_kernels` is a whole candidate file: a float32 CUDA kernel launched on
PyTorch's current stream, a new output tensor per call, NaN propagated like torch. The variants
differ in block size, vector width and reduction scheme, so every one is its own source (its own
content hash and extension name: its own nvcc build). The sources compile with nvcc 13 against
torch's headers (``bench/gpu_kernels.py --check-cuda``); they run only on a CUDA GPU.
"""

from __future__ import annotations

HEADER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
"""

#: checks and output allocation shared by every host function (``x`` float32 CUDA, contiguous copy ``xc``).
PROLOGUE = r"""
    TORCH_CHECK(x.is_cuda(), "expected a CUDA tensor, got ", x.device());
    TORCH_CHECK(x.scalar_type() == at::kFloat, "expected float32, got ", x.scalar_type());
    const c10::cuda::CUDAGuard device_guard(x.device());
    torch::Tensor xc = x.contiguous();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
"""

#: block-wide reductions: ``block_reduce<Op, T>`` through shared memory (tree) or warp shuffles.
REDUCE = r"""
struct MaxOp { __device__ static float apply(float a, float b) { return fmaxf(a, b); }
               __device__ static float identity() { return -INFINITY; } };
struct SumOp { __device__ static float apply(float a, float b) { return a + b; }
               __device__ static float identity() { return 0.0f; } };

template <typename Op, int T>
__device__ float block_reduce_tree(float v, float* red) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (int s = T / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = Op::apply(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    const float out = red[0];
    __syncthreads();
    return out;
}

template <typename Op>
__device__ float warp_reduce(float v) {
    for (int o = 16; o > 0; o >>= 1) v = Op::apply(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

template <typename Op, int T>
__device__ float block_reduce_shuffle(float v, float* red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_reduce<Op>(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = (threadIdx.x < T / 32) ? red[lane] : Op::identity();
    if (warp == 0) v = warp_reduce<Op>(v);
    if (threadIdx.x == 0) red[0] = v;
    __syncthreads();
    const float out = red[0];
    __syncthreads();
    return out;
}
"""


def _file(problem: str, label: str, doc: str, body: str, host: str, fn: str, module: str, init: str = "",
          call: str = "x") -> str:
    name = f"kbv_bench_{problem.lower()}_{label}"
    return f'''"""Candidate for {problem} -- backend: CUDA (load_inline). Honest: {doc}"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SOURCE = "torch::Tensor {fn}({host.split("(", 1)[1].split(")", 1)[0]});"

_CUDA_SOURCE = r"""{HEADER}{REDUCE if "block_reduce" in body else ""}{body}
torch::Tensor {host} {{{PROLOGUE}{module}}}
"""

_ext = load_inline(name="{name}", cpp_sources=_CPP_SOURCE, cuda_sources=_CUDA_SOURCE, functions=["{fn}"],
                   with_cuda=True, extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self{", normalized_shape: int" if init else ""}):
        super().__init__(){init}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.{fn}({call})
'''


def _elementwise(problem: str, label: str, doc: str, expr: str, threads: int, vec: int, grid_stride: bool) -> str:
    """An elementwise kernel ``y = f(v)`` (``expr`` in ``v``): ``vec`` elements per load (1, 2 or
    4; a misaligned pointer or the tail falls back to scalars), grid-stride or one pass per thread."""
    fn = f"{problem.lower()}_forward"
    vtype = {1: "float", 2: "float2", 4: "float4"}[vec]
    comps = {1: [""], 2: [".x", ".y"], 4: [".x", ".y", ".z", ".w"]}[vec]
    lanes = "".join(f"    {{ const float v = a{c}; b{c} = {expr}; }}\n" for c in comps) if vec > 1 else ""
    loop = ("for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nv; i += (int64_t)blockDim.x * gridDim.x)"
            if grid_stride else "const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < nv)")
    if vec == 1:
        body = f"""
__global__ void k(const float* __restrict__ x, float* __restrict__ y, int64_t nv) {{
    {loop} {{ const float v = x[i]; y[i] = {expr}; }}
}}
"""
    else:
        body = f"""
__global__ void kv(const {vtype}* __restrict__ x, {vtype}* __restrict__ y, int64_t nv) {{
    {loop} {{
    const {vtype} a = x[i];
    {vtype} b;
{lanes}    y[i] = b;
    }}
}}
__global__ void k(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {{
    const int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{ const float v = x[i]; y[i] = {expr}; }}
}}
"""
    blocks = ("(int)std::min<int64_t>((nv + T - 1) / T, 65535)" if grid_stride else "(int)((nv + T - 1) / T)")
    if vec == 1:
        launch = f"""    const int64_t nv = n;
    if (nv) k<<<{blocks}, T, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), nv);
"""
    else:
        launch = f"""    const bool aligned = reinterpret_cast<uintptr_t>(xc.data_ptr<float>()) % (sizeof({vtype})) == 0 &&
                         reinterpret_cast<uintptr_t>(y.data_ptr<float>()) % (sizeof({vtype})) == 0;
    const int64_t nv = aligned ? n / {vec} : 0;
    if (nv) kv<<<{blocks}, T, 0, stream>>>(reinterpret_cast<const {vtype}*>(xc.data_ptr<float>()),
                                          reinterpret_cast<{vtype}*>(y.data_ptr<float>()), nv);
    const int64_t done = nv * {vec};
    if (n > done) k<<<(int)((n - done + T - 1) / T), T, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), done, n);
"""
    module = f"""    torch::Tensor y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    constexpr int T = {threads};
{launch}    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
"""
    return _file(problem, label, doc, body, f"{fn}(torch::Tensor x)", fn, module)


def _rows(problem: str, label: str, doc: str, threads: int, scheme: str, kernel: str, out: str,
          extra_args: str = "", extra_host: str = "", extra_launch: str = "", init: str = "", call: str = "x") -> str:
    """A one-block-per-row kernel over a 2-D float32 input (rows x cols); ``kernel`` is its body,
    with ``REDUCE(op, v)`` for a block reduction by ``scheme`` (``tree`` or ``shuffle``)."""
    fn = f"{problem.lower()}_forward"
    red = f"block_reduce_{scheme}"
    shared = threads if scheme == "tree" else 32
    kernel = kernel.replace("REDUCE_MAX(", f"{red}<MaxOp, T>(").replace("REDUCE_SUM(", f"{red}<SumOp, T>(")
    body = f"""
template <int T>
__global__ void __launch_bounds__(T) k(const float* __restrict__ x, float* __restrict__ y, int64_t cols{extra_args}) {{
    __shared__ float red[{shared}];
    const int64_t row = blockIdx.x;
    const float* xr = x + row * cols;
{kernel}}}
"""
    module = f"""    TORCH_CHECK(xc.dim() == 2, "expected a 2-D input, got ", xc.dim(), " dimensions");
    const int64_t rows = xc.size(0), cols = xc.size(1);
{extra_host}    torch::Tensor y = {out};
    if (rows && cols) k<{threads}><<<(unsigned)rows, {threads}, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), cols{extra_launch});
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
"""
    host = f"{fn}(torch::Tensor x{', torch::Tensor w, torch::Tensor b, double eps' if init else ''})"
    return _file(problem, label, doc, body, host, fn, module, init=init, call=call)


SOFTMAX = r"""    float* yr = y + row * cols;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += T) m = fmaxf(m, xr[c]);
    m = REDUCE_MAX(m, red);
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += T) s += expf(xr[c] - m);
    s = REDUCE_SUM(s, red);
    for (int64_t c = threadIdx.x; c < cols; c += T) yr[c] = expf(xr[c] - m) / s;
"""

LAYERNORM = r"""    float* yr = y + row * cols;
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += T) s += xr[c];
    const float mean = REDUCE_SUM(s, red) / (float)cols;
    float q = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += T) { const float d = xr[c] - mean; q += d * d; }
    const float rstd = rsqrtf(REDUCE_SUM(q, red) / (float)cols + (float)eps);
    for (int64_t c = threadIdx.x; c < cols; c += T) yr[c] = (xr[c] - mean) * rstd * w[c] + b[c];
"""

ROWSUM = r"""    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += T) s += xr[c];
    s = REDUCE_SUM(s, red);
    if (threadIdx.x == 0) y[row] = s;
"""

RELU = "v < 0.0f ? 0.0f : v"  # NaN propagates, like torch.relu
SILU = "v / (1.0f + expf(-v))"

_LN_ARGS = ", const float* __restrict__ w, const float* __restrict__ b, double eps"
_LN_HOST = ("    torch::Tensor wc = w.contiguous(), bc = b.contiguous();\n"
            "    TORCH_CHECK(wc.numel() == cols && bc.numel() == cols, \"weight and bias must have cols elements\");\n")
_LN_LAUNCH = ", wc.data_ptr<float>(), bc.data_ptr<float>(), eps"
_LN_INIT = "\n        self.ln = nn.LayerNorm(normalized_shape)"
_LN_CALL = "x, self.ln.weight, self.ln.bias, self.ln.eps"


def cuda_kernels() -> list[tuple[str, str, str]]:
    """(problem name, label, candidate source) of every CUDA candidate: 16 honest kernels."""
    out = []
    for label, threads, vec, gs in (("scalar256", 256, 1, True), ("flat512", 512, 1, False),
                                    ("float2_256", 256, 2, True), ("float4_256", 256, 4, True),
                                    ("float4_512", 512, 4, False)):
        out.append(("ReLU", label, _elementwise("ReLU", label, f"ReLU, {vec} float(s) per load, {threads} threads"
                                                + (", grid-stride" if gs else ""), RELU, threads, vec, gs)))
    for label, threads, vec in (("scalar256", 256, 1), ("float4_256", 256, 4)):
        out.append(("SiLU", label, _elementwise("SiLU", label, f"SiLU as x / (1 + exp(-x)), {vec} float(s) per load",
                                                SILU, threads, vec, True)))
    for threads, scheme in ((256, "tree"), (512, "shuffle"), (1024, "tree"), (1024, "shuffle")):
        label = f"{scheme}{threads}"
        out.append(("Softmax", label, _rows("Softmax", label, f"row softmax (max, sum of exp, divide), one block of "
                                            f"{threads} threads per row, {scheme} reductions", threads, scheme, SOFTMAX,
                                            "torch::empty_like(xc)")))
    for threads, scheme in ((256, "tree"), (512, "shuffle"), (1024, "shuffle")):
        label = f"{scheme}{threads}"
        out.append(("LayerNorm", label, _rows("LayerNorm", label, "two-pass layer norm (mean, then the mean of squared "
                                              f"deviations), one block of {threads} threads per row, {scheme} reductions",
                                              threads, scheme, LAYERNORM, "torch::empty_like(xc)", _LN_ARGS, _LN_HOST,
                                              _LN_LAUNCH, _LN_INIT, _LN_CALL)))
    for threads, scheme in ((256, "tree"), (512, "shuffle")):
        label = f"{scheme}{threads}"
        out.append(("RowSum", label, _rows("RowSum", label, f"row sums, one block of {threads} threads per row, "
                                           f"{scheme} reduction", threads, scheme, ROWSUM,
                                           "torch::empty({rows}, xc.options())")))
    return out


def broken_kernel() -> tuple[str, str, str]:
    """A CUDA ReLU whose kernel does not compile (a build failure the build pool decides)."""
    problem, label, src = cuda_kernels()[0]
    return problem, "broken", src.replace("__global__ void k(", "__global__ void void k(", 1).replace(
        f"_{label}\"", "_broken\"")


__all__ = ["cuda_kernels", "broken_kernel"]
