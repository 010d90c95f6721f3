"""kbv.sandbox.profiling: compute-op counts (cpu and cuda) and the own/library kernel profile (cuda).

CPU tests cover compute_ops / reference_covered with plain torch functions, the Triton interpreter
(in a subprocess: TRITON_INTERPRET must be set before triton is imported), robustness against a
hostile model, and the kernel classifier on synthetic profiler events. Tests marked ``cuda`` run
kernel_profile for real on the GPU host (docs/gpu-runs.md).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from kbv.sandbox.profiling import NO_MATH_OPS, OpCount, compute_ops
from kbv.checks.op_coverage import OWN_SHARE_MIN, reference_covered, shortcut_reason
from kbv.sandbox.kernels import (KernelProfile, _DeviceEvent, _events, _Launch, _Span, _summarise,
    kernel_profile)

SRC = Path(__file__).resolve().parents[2] / "src"

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - triton is a test dependency
    triton = None


# --------------------------------------------------------------------------- compute_ops (cpu)

def _ops(fn, *args):
    r = compute_ops(fn, args)
    assert r.error is None, r.error
    return r


def test_relu_vs_relu_is_covered():
    x = torch.randn(64, 32)
    ref = _ops(F.relu, x)
    assert ref.ops == {"aten.relu": 1}
    assert reference_covered(ref, _ops(torch.relu, x)) == ["aten.relu"]


def test_in_place_relu_counts_as_relu():
    x = torch.randn(64, 32)
    cand = _ops(lambda t: t.clone().relu_(), x)
    assert cand.ops == {"aten.relu_": 1}  # clone left out, the in-place op keeps its name
    assert reference_covered(_ops(F.relu, x), cand) == ["aten.relu"]


def test_clamp_min_is_a_reformulation_not_covered():
    x = torch.randn(64, 32)
    cand = _ops(torch.clamp_min, x, 0.0)
    assert cand.ops == {"aten.clamp_min": 1}
    assert reference_covered(_ops(F.relu, x), cand) is None


def test_linear_vs_chunked_mm_is_covered_through_the_gemm_family():
    x, w, b = torch.randn(16, 32), torch.randn(24, 32), torch.randn(24)
    ref = _ops(F.linear, x, w, b)
    assert ref.ops == {"aten.addmm": 1}  # aten.t is a view: left out

    def chunked(a):
        return torch.cat([torch.mm(c, w.t()) for c in a.chunk(4)]) + b

    cand = _ops(chunked, x)
    assert cand.ops["aten.mm"] == 4
    assert reference_covered(ref, cand) == ["aten.addmm"]
    assert reference_covered(ref, _ops(lambda a: torch.matmul(a, w.t()) + b, x)) == ["aten.addmm"]


def test_linear_by_broadcast_multiply_is_not_covered():
    x, w = torch.randn(16, 32), torch.randn(24, 32)
    cand = _ops(lambda a: (a[:, None, :] * w[None]).sum(-1), x)
    assert "aten.mul" in cand.ops and "aten.sum" in cand.ops
    assert reference_covered(_ops(F.linear, x, w), cand) is None


def test_counts_matter_one_torch_layer_of_two_is_not_covered():
    x, w1, w2 = torch.randn(8, 16), torch.randn(16, 16), torch.randn(16, 16)
    ref = _ops(lambda a: F.relu(F.linear(F.relu(F.linear(a, w1)), w2)), x)
    assert ref.ops == {"aten.mm": 2, "aten.relu": 2}
    # first layer "custom" (here: broadcast multiply), second layer torch: not a full re-run
    part = _ops(lambda a: F.relu(F.linear(F.relu((a[:, None] * w1[None]).sum(-1)), w2)), x)
    assert reference_covered(ref, part) is None
    full = _ops(lambda a: torch.relu(torch.relu(a @ w1.t()) @ w2.t()), x)
    assert reference_covered(ref, full) == ["aten.mm", "aten.relu"]


def test_softmax_and_conv_names():
    x = torch.randn(4, 10)
    assert _ops(F.softmax, x, 1).ops == {"aten._softmax": 1}
    assert reference_covered(_ops(F.softmax, x, 1), _ops(torch.softmax, x, 1)) == ["aten._softmax"]
    img, k = torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3)
    assert _ops(F.conv2d, img, k).ops == {"aten.convolution": 1}


def test_no_math_ops_are_left_out():
    x = torch.randn(4, 8)

    def shuffle(a):
        y = a.t().contiguous().to(torch.float64).clone()
        y.fill_(1.0).zero_()
        z = torch.empty(3), torch.zeros(3), torch.ones_like(a), torch.full((2,), 1.0)
        _ = a.new_zeros(2), torch.arange(5), a.reshape(-1)[0].item(), a.detach(), a.view(2, 16)
        return y, z

    assert _ops(shuffle, x).ops == {}
    assert {"view", "_to_copy", "copy_", "empty_like", "fill_", "_local_scalar_dense"} <= NO_MATH_OPS
    assert "cat" not in NO_MATH_OPS and "relu" not in NO_MATH_OPS


def test_opcount_is_frozen():
    r = OpCount(ops={"aten.relu": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.error = "x"  # type: ignore[misc]


# --------------------------------------------------------------------------- reference_covered edges

def test_reference_covered_edge_cases():
    relu = {"aten.relu": 1}
    assert reference_covered(relu, {"aten.relu": 3, "aten.add": 1}) == ["aten.relu"]
    assert reference_covered({}, relu) is None  # nothing to compare
    assert reference_covered(OpCount(ops={}), OpCount(ops=relu)) is None
    assert reference_covered({"aten.view": 2}, {"aten.view": 2}) is None  # only no-math ops
    assert reference_covered(OpCount(ops=relu, error="boom"), relu) is None
    assert reference_covered(relu, OpCount(ops=relu, error="boom")) is None
    assert reference_covered(relu, {}) is None
    assert reference_covered(relu, None) is None  # type: ignore[arg-type]
    assert reference_covered("aten.relu", relu) is None  # type: ignore[arg-type]
    assert reference_covered(relu, {"aten.relu": "1"}) is None  # bad counts ignored
    assert reference_covered(relu, {"aten.relu": 0}) is None
    assert reference_covered({"aten.addmm": 1}, {"aten.bmm": 1}) == ["aten.addmm"]
    assert reference_covered({"aten.max_pool2d_with_indices": 1}, {"aten.max_pool2d": 1}) == [
        "aten.max_pool2d_with_indices"]
    assert reference_covered({"mylib.op": 1}, {"mylib.op": 1}) == ["mylib.op"]
    assert reference_covered({"aten.relu": 2}, {"aten.relu": 1}) is None


# --------------------------------------------------------------------------- robustness

def test_fn_raising_gives_error_not_exception():
    def boom(x):
        torch.relu(x)
        raise ValueError("kernel failed")

    r = compute_ops(boom, (torch.randn(3),))
    assert r.error == "ValueError: kernel failed"
    assert r.ops == {"aten.relu": 1}  # what ran before the failure


def test_hostile_exceptions_and_bad_arguments():
    class Nasty(Exception):
        def __str__(self):
            raise RuntimeError("no")

    def nasty(x):
        raise Nasty()

    def leave(x):
        raise SystemExit(0)

    assert compute_ops(nasty, (torch.randn(2),)).error == "Nasty: <unprintable>"
    assert compute_ops(leave, (torch.randn(2),)).error.startswith("SystemExit")
    assert compute_ops(None, ()).error  # type: ignore[arg-type]
    assert compute_ops(torch.relu, 5).error  # type: ignore[arg-type]
    assert reference_covered(compute_ops(nasty, (torch.randn(2),)), {"aten.relu": 1}) is None


def test_candidate_tampering_with_the_dispatch_mode_is_reported_and_repaired():
    from torch.utils._python_dispatch import TorchDispatchMode, _pop_mode, is_in_torch_dispatch_mode

    depth = torch._C._len_torch_dispatch_stack()

    def pop_it(x):
        _pop_mode()
        return torch.relu(x)

    r = compute_ops(pop_it, (torch.randn(2),))
    assert r.error == "dispatch mode removed during the call" and r.ops == {}
    assert torch._C._len_torch_dispatch_stack() == depth and not is_in_torch_dispatch_mode()

    class Other(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    def push_one(x):
        Other().__enter__()
        return torch.relu(x)

    r = compute_ops(push_one, (torch.randn(2),))
    assert r.error == "dispatch mode removed during the call"
    assert torch._C._len_torch_dispatch_stack() == depth and not is_in_torch_dispatch_mode()
    assert compute_ops(torch.relu, (torch.randn(2),)) == OpCount(ops={"aten.relu": 1})


def test_kernel_profile_is_cuda_only():
    p = kernel_profile(torch.relu, (torch.randn(4),), "cpu")
    assert p.error == "cuda only" and p.own_share is None and p.kernels == ()
    assert shortcut_reason(p) is None
    assert kernel_profile(torch.relu, (torch.randn(4),), "no-such-device").error
    if not torch.cuda.is_available():
        assert kernel_profile(torch.relu, (torch.randn(4),), "cuda").error == "cuda only"


# --------------------------------------------------------------------------- Triton interpreter

_TRITON_SCRIPT = textwrap.dedent('''
    import json, sys
    import torch, triton, triton.language as tl
    from kbv.sandbox.profiling import compute_ops
    from kbv.checks.op_coverage import reference_covered

    @triton.jit
    def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=m)

    def triton_relu(x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
        return y

    def fallback(x):  # the kernel runs, then torch does the work again (silent fallback)
        triton_relu(x)
        return torch.relu(x)

    x = torch.randn(300)
    ref = compute_ops(torch.relu, (x,))
    own = compute_ops(triton_relu, (x,))
    fb = compute_ops(fallback, (x,))
    print(json.dumps({
        "correct": bool(torch.equal(triton_relu(x), torch.relu(x))),
        "ref": ref.ops, "own": own.ops, "own_error": own.error, "fallback": fb.ops,
        "own_covered": reference_covered(ref, own), "fallback_covered": reference_covered(ref, fb),
    }))
''')


def test_triton_interpreter_issues_no_compute_ops(tmp_path):
    if triton is None:
        pytest.skip("triton not installed")
    script = tmp_path / "triton_interp.py"
    script.write_text(_TRITON_SCRIPT)
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(SRC))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["correct"]
    assert out["ref"] == {"aten.relu": 1}
    # the interpreter's loads/stores issue empty/new_empty/set_/copy_ only: all no-math ops
    assert out["own"] == {} and out["own_error"] is None
    assert out["own_covered"] is None
    assert out["fallback_covered"] == ["aten.relu"]


# --------------------------------------------------------------------------- classifier (synthetic)

def test_classifier_on_synthetic_events():
    spans = [
        _Span("outer", 1, 0, 10_000, 1),  # a user annotation around everything
        _Span("aten::mm", 1, 100, 200, 5),
        _Span("Torch-Compiled Region: 0/0", 1, 300, 400, 7),
        _Span("aten::linear", 1, 500, 700, 8),
        _Span("helper", 1, 510, 600, 9),  # an annotation inside an aten op
    ]
    launches = [_Launch("cudaLaunchKernel", 150, 1001), _Launch("cuLaunchKernel", 350, 1002),
                _Launch("cuLaunchKernel", 800, 1003), _Launch("cudaGraphLaunch", 900, 1004),
                _Launch("cuLaunchKernel", 820, 1006)]
    devices = [
        _DeviceEvent("ampere_sgemm_128x64_nn", 40_000, 1001, 5),  # linked to aten::mm
        _DeviceEvent("compiled_kernel", 2_000, 1002, 0),  # launched inside the compile region
        _DeviceEvent("my_kernel", 3_000, 1003, 0),  # own (Triton / extension)
        _DeviceEvent("my_kernel", 3_000, 1006, 0),
        _DeviceEvent("void at::native::vectorized_elementwise_kernel<4>", 1_000, 1004, 0),  # graph
        _DeviceEvent("inner", 1_000, 1005, 9),  # linked to an annotation under aten::linear
    ]
    p = _summarise(spans, launches, devices, repeats=2)
    rows = {name: (us, own) for name, us, own in p.kernels}
    assert rows["ampere_sgemm_128x64_nn"] == (20.0, False)
    assert rows["compiled_kernel"] == (1.0, False)
    assert rows["my_kernel"] == (3.0, True)
    assert rows["void at::native::vectorized_elementwise_kernel<4>"] == (0.5, False)
    assert rows["inner"] == (0.5, False)
    assert p.kernels[0][0] == "ampere_sgemm_128x64_nn"  # largest first
    assert p.own_us == 3.0 and p.total_us == 25.0 and p.own_share == pytest.approx(0.12)
    assert p.repeats == 2 and p.error is None
    assert shortcut_reason(p) is None


class _FakeEvent:
    """A kineto event as torch 2.11 exposes it (no activity_type accessor)."""

    def __init__(self, name, dev, corr, linked, start, dur, activity=None):
        self._v = (name, dev, corr, linked, start, dur)
        if activity is not None:
            self.activity_type = lambda: activity

    def name(self): return self._v[0]
    def device_type(self): return self._v[1]
    def correlation_id(self): return self._v[2]
    def linked_correlation_id(self): return self._v[3]
    def start_thread_id(self): return 1
    def start_ns(self): return self._v[4]
    def end_ns(self): return self._v[4] + self._v[5]


class _FakeProf:
    def __init__(self, events):
        self.profiler = type("P", (), {})()
        self.profiler.kineto_results = type("R", (), {"events": lambda _self: events})()


def _trace(rows):
    from torch._C._autograd import DeviceType

    return _FakeProf([_FakeEvent(n, DeviceType.CUDA if gpu else DeviceType.CPU, c, l, t, d)
                      for n, gpu, c, l, t, d in rows])


# Traces recorded on the H200 (torch 2.11.0+cu130, Triton 3.6.0), times shortened.
_COMPILE_TRACE = [  # torch.compile(lambda t: torch.relu(t) * 2.0)
    ("TorchDynamo Cache Lookup", 0, 3073, 0, 206_957_944, 36_729),
    ("Torch-Compiled Region: 0/0", 0, 3074, 0, 206_999_235, 1_175_402),
    ("## Call CompiledFxGraph fkkmln ##", 0, 3077, 0, 207_089_424, 1_050_532),
    ("Activity Buffer Request", 0, 3077, 0, 207_123_689, 422_637),  # same id as an op
    ("triton_poi_fused_mul_relu_0", 0, 3078, 0, 207_669_949, 449_114),  # Inductor's annotation
    ("cuLaunchKernel", 0, 2296, 3078, 207_702_324, 409_678),
    ("triton_poi_fused_mul_relu_0", 1, 2296, 3078, 208_107_467, 7_232),  # the kernel, same name
    ("cudaDeviceSynchronize", 0, 2300, 0, 208_233_843, 23_704),
]
_TRITON_MM_TRACE = [  # torch.mm(triton_relu(b), b)
    ("aten::empty_like", 0, 2049, 0, 338_008_562, 43_913),
    ("aten::empty_strided", 0, 2050, 0, 338_013_711, 35_499),
    ("cuLaunchKernelEx", 0, 1491, 0, 338_556_302, 382_342),
    ("relu_k", 1, 1491, 0, 338_936_641, 2_143),
    ("aten::mm", 0, 2051, 0, 338_985_820, 129_347),
    ("cudaLaunchKernelExC", 0, 1502, 2051, 339_094_227, 16_281),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x64x8", 1, 1502, 2051, 339_108_608, 55_808),
]
_GRAPH_TRACE = [  # g.replay() of a captured torch.relu
    ("cudaGraphLaunch", 0, 1641, 0, 347_114_731, 267_010),
    ("void at::native::vectorized_elementwise_kernel<4, ...>", 1, 1641, 0, 347_381_286, 6_944),
]


def test_events_from_real_traces():
    spans, launches, devices = _events(_trace(_COMPILE_TRACE))
    assert [d.name for d in devices] == ["triton_poi_fused_mul_relu_0"]  # not mistaken for a span
    assert "Activity Buffer Request" not in {s.name for s in spans}
    assert {r.name for r in launches} == {"cuLaunchKernel", "cudaDeviceSynchronize"}
    p = _summarise(spans, launches, devices, 1)
    assert p.own_share == 0.0 and p.kernels[0][1] == pytest.approx(7.232)

    p = _summarise(*_events(_trace(_TRITON_MM_TRACE)), 1)
    assert dict((n, own) for n, _, own in p.kernels) == {
        "relu_k": True, "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x64x8": False}
    assert p.own_share == pytest.approx(2.143 / (2.143 + 55.808))

    p = _summarise(*_events(_trace(_GRAPH_TRACE)), 1)
    assert p.own_share == 0.0  # launch site is graph.replay(); the name says ATen


def test_events_with_activity_types():
    from torch._C._autograd import DeviceType

    evs = [
        _FakeEvent("aten::relu", DeviceType.CPU, 7, 0, 100, 50, "cpu_op"),
        _FakeEvent("cudaLaunchKernel", DeviceType.CPU, 900, 7, 110, 5, "cuda_runtime"),
        _FakeEvent("my_ann", DeviceType.CUDA, 901, 0, 100, 500, "gpu_user_annotation"),
        _FakeEvent("elementwise", DeviceType.CUDA, 900, 7, 120, 4000, "kernel"),
        _FakeEvent("Memcpy DtoD (Device -> Device)", DeviceType.CUDA, 902, 0, 130, 1000,
                   "gpu_memcpy"),
    ]
    spans, launches, devices = _events(_FakeProf(evs))
    assert [d.name for d in devices] == ["elementwise", "Memcpy DtoD (Device -> Device)"]
    p = _summarise(spans, launches, devices, 1)
    assert p.own_share == 0.0 and p.total_us == pytest.approx(5.0)


def test_classifier_merges_beyond_64_kernels():
    devices = [_DeviceEvent(f"k{i}", 1000 + i, i + 1, 0) for i in range(100)]
    p = _summarise([], [], devices, repeats=1)
    assert len(p.kernels) == 63 and p.kernels[-1][0] == "<other own kernels>"
    assert p.total_us == pytest.approx(sum(1000 + i for i in range(100)) / 1000)
    assert p.own_share == 1.0


def test_shortcut_reason_thresholds():
    lib = KernelProfile(kernels=(("void at::native::k", 10.0, False),), own_us=0.0, total_us=10.0,
                        own_share=0.0, repeats=3)
    reason = shortcut_reason(lib)
    assert reason and "0.0%" in reason and "at::native" in reason
    tiny = dataclasses.replace(lib, own_us=0.05, total_us=10.05, own_share=0.05 / 10.05)
    assert shortcut_reason(tiny)  # 0.5 % < 1 %
    mixed = dataclasses.replace(lib, own_us=1.0, total_us=11.0, own_share=1 / 11)
    assert shortcut_reason(mixed) is None
    assert shortcut_reason(KernelProfile()) is None  # nothing ran
    assert shortcut_reason(dataclasses.replace(lib, error="profiler failed: x")) is None
    assert shortcut_reason("not a profile") is None  # type: ignore[arg-type]
    assert OWN_SHARE_MIN == 0.01


# --------------------------------------------------------------------------- cuda

if triton is not None:
    @triton.jit
    def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=m)


def _triton_relu(x):
    y = torch.empty_like(x)
    _relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


def _needs_triton():
    if triton is None:
        pytest.skip("triton not installed")


def _show(p: KernelProfile) -> str:
    return f"share={p.own_share} total={p.total_us:.2f}us error={p.error} kernels={p.kernels}"


@pytest.mark.cuda
def test_cuda_torch_relu_is_all_library():
    import time

    x = torch.randn(4096, 1024, device="cuda")
    for attempt in ("first", "second"):
        t0 = time.perf_counter()
        p = kernel_profile(torch.relu, (x,), "cuda")
        print(f"kernel_profile wall ({attempt} in this process): {time.perf_counter() - t0:.3f} s")
    print(_show(p))
    assert p.error is None and p.total_us > 0, _show(p)
    assert p.own_share == 0.0 and all(not own for _, _, own in p.kernels), _show(p)
    assert shortcut_reason(p), _show(p)
    assert not torch.autograd.profiler._is_profiler_enabled


@pytest.mark.cuda
def test_cuda_triton_kernel_is_own():
    _needs_triton()
    x = torch.randn(4096, 1024, device="cuda")
    assert torch.equal(_triton_relu(x), torch.relu(x))
    p = kernel_profile(_triton_relu, (x,), torch.device("cuda"))
    print(_show(p))
    assert p.error is None and p.own_share is not None and p.own_share > 0.9, _show(p)
    assert any(own and "_relu_kernel" in name for name, _, own in p.kernels), _show(p)
    assert shortcut_reason(p) is None


@pytest.mark.cuda
def test_cuda_triton_then_mm_is_mixed():
    _needs_triton()
    a = torch.randn(1024, 1024, device="cuda")
    b = torch.randn(1024, 1024, device="cuda")
    p = kernel_profile(lambda u, v: torch.mm(_triton_relu(u), v), (a, b), "cuda:0", repeats=5)
    print(_show(p))
    assert p.error is None and p.repeats == 5, _show(p)
    assert any(own for _, _, own in p.kernels) and any(not own for _, _, own in p.kernels), _show(p)
    assert 0.0 < p.own_share < 1.0, _show(p)
    assert p.own_us + sum(us for _, us, own in p.kernels if not own) == pytest.approx(p.total_us)


@pytest.mark.cuda
def test_cuda_compute_ops_sees_torch_not_triton():
    _needs_triton()
    x = torch.randn(1 << 16, device="cuda")
    ref = compute_ops(torch.relu, (x,))
    own = compute_ops(_triton_relu, (x,))
    assert ref.ops == {"aten.relu": 1} and own.error is None
    assert own.ops == {}, own.ops
    assert reference_covered(ref, own) is None


@pytest.mark.cuda
def test_cuda_model_failure_is_an_error():
    def boom(x):
        torch.relu(x)
        raise RuntimeError("bad launch")

    p = kernel_profile(boom, (torch.randn(8, device="cuda"),), "cuda")
    assert p.error == "warm-up call failed: RuntimeError: bad launch"
    assert shortcut_reason(p) is None


@pytest.mark.cuda
def test_cuda_graph_replay_of_torch_ops_is_library():
    x = torch.randn(4096, 1024, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.relu(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = torch.relu(x)

    def replay(_):
        g.replay()
        return out

    p = kernel_profile(replay, (x,), "cuda")
    print(_show(p))
    assert p.error is None, _show(p)
    if p.total_us == 0:
        pytest.skip("this CUPTI does not report kernels replayed from a CUDA graph")
    assert p.own_share == 0.0, _show(p)


@pytest.mark.cuda
@pytest.mark.slow
def test_cuda_torch_compile_kernels_are_library():
    _needs_triton()
    x = torch.randn(4096, 1024, device="cuda")
    compiled = torch.compile(lambda t: torch.relu(t) * 2.0)
    p = kernel_profile(compiled, (x,), "cuda")
    print(_show(p))
    assert p.error is None and p.total_us > 0, _show(p)
    assert p.own_share == 0.0, _show(p)
    assert shortcut_reason(p)


_CUDA_SRC = r"""
#include <torch/extension.h>
__global__ void own_relu_kernel(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor own_relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    own_relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
torch::Tensor lib_relu(torch::Tensor x) { return torch::relu(x); }
"""


@pytest.mark.cuda
@pytest.mark.slow
def test_cuda_load_inline_kernel_is_own_and_at_calls_are_library(tmp_path, monkeypatch):
    from torch.utils.cpp_extension import load_inline

    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    decls = "torch::Tensor own_relu(torch::Tensor x);\ntorch::Tensor lib_relu(torch::Tensor x);"
    ext = load_inline(name="kbv_profiling_relu", cpp_sources=decls, cuda_sources=_CUDA_SRC,
                      functions=["own_relu", "lib_relu"], build_directory=str(tmp_path),
                      verbose=False)
    x = torch.randn(4096, 1024, device="cuda")
    assert torch.equal(ext.own_relu(x), torch.relu(x))
    own = kernel_profile(ext.own_relu, (x,), "cuda")
    print(_show(own))
    assert own.error is None and own.own_share == 1.0, _show(own)
    assert shortcut_reason(own) is None
    lib = kernel_profile(ext.lib_relu, (x,), "cuda")
    print(_show(lib))
    assert lib.own_share == 0.0 and shortcut_reason(lib), _show(lib)
    assert compute_ops(ext.own_relu, (x,)).ops == {}
    assert compute_ops(ext.lib_relu, (x,)).ops == {"aten.relu": 1}


def test_recorded_ops_sees_other_threads_and_disabled_dispatch():
    """kbv.sandbox.profiling.recorded_ops records top-level aten ops in every thread, at the dispatcher:
    torch ops a wrapper hands to a thread (also one reached from C, or a raw _thread thread) and
    ops run with Python dispatch disabled, all invisible to compute_ops."""
    import _thread
    import functools
    import threading

    import torch

    from kbv.sandbox.profiling import compute_ops, recorded_ops
    from kbv.checks.op_coverage import reference_covered

    x = torch.randn(32, 32)

    def mapped(x):
        box = []
        t = threading.Thread(target=box.extend, args=(map(functools.partial(torch.softmax, dim=1), (x,)),))
        t.start()
        t.join()
        return box[0]

    def raw(x):
        box, done = [], threading.Event()
        _thread.start_new_thread(lambda: (box.append(torch.softmax(x, 1)), done.set()), ())
        done.wait()
        return box[0]

    def hidden(x):
        with torch._C._DisableTorchDispatch():
            return torch.softmax(x, 1)

    def honest(x):
        e = torch.exp(x - x.amax(1, keepdim=True))
        return e / e.sum(1, keepdim=True)

    ref = recorded_ops(lambda x: torch.softmax(x, 1), [x])
    assert ref.error is None and ref.ops == {"aten.softmax": 1}, ref  # top level only, not _softmax
    for fn in (mapped, raw, hidden):
        assert compute_ops(fn, [x]).ops == {}, fn.__name__
        rec = recorded_ops(fn, [x])
        assert rec.error is None and reference_covered(ref, rec) == ["aten.softmax"], (fn.__name__, rec)
    rec = recorded_ops(honest, [x])
    assert reference_covered(ref, rec) is None and rec.ops.get("aten.exp") == 1, rec
    # a user annotation named like an op is not a parent
    def annotated(x):
        with torch.profiler.record_function("aten::empty"):
            return torch.softmax(x, 1)

    rec = recorded_ops(annotated, [x])
    assert rec.ops == {"aten.softmax": 1}, rec
    # top level only: one F.linear is one gemm op, and an honest mean() does not cover a sum
    # reference through the sum it calls inside
    w = torch.randn(32, 32)
    assert recorded_ops(lambda x: torch.nn.functional.linear(x, w), [x]).ops == {"aten.linear": 1}
    ref_sum = recorded_ops(lambda x: x.sum(1), [x])
    assert reference_covered(ref_sum, recorded_ops(lambda x: x.mean(1) * 32, [x])) is None
    boom = recorded_ops(lambda x: 1 / 0, [x])
    assert boom.error and "ZeroDivisionError" in boom.error


def test_recorded_ops_counts_compute_hidden_under_a_no_math_op():
    """A Tensor subclass's __torch_dispatch__ running torch.softmax inside a clone: ops
    that do no math are not parents, so the softmax is top level."""
    import importlib.util

    import torch

    from conftest import EXPLOITS
    from kbv.sandbox.profiling import recorded_ops

    # the red-team candidate's own subclass (t15-subclass-dispatch), not a copy of it
    spec = importlib.util.spec_from_file_location("t15_subclass_dispatch", EXPLOITS / "t15_subclass_dispatch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rec = recorded_ops(lambda x: mod._Wrapped(x).clone(), [torch.randn(8, 8)])
    assert rec.error is None and rec.ops.get("aten.softmax") == 1, rec


_NO_DYNAMO = r'''
import sys, torch
from kbv.sandbox import numeric_flags as flags, profiling
flags.apply_flags(flags.flags_for("eager-fp32"))
x = torch.randn(32, 32)
f = lambda a: torch.softmax(a @ a, 1)
assert profiling.compute_ops(f, [x]).ops == {"aten.mm": 1, "aten._softmax": 1}
assert profiling.recorded_ops(f, [x]).ops == {"aten.matmul": 1, "aten.softmax": 1}
flags.apply_flags(flags.flags_for("eager-fp32"))
print("LOADED", "torch._dynamo" in sys.modules, "torch._inductor" in sys.modules)
g = torch.compile(f, backend="eager")  # a candidate that compiles: Dynamo loads, the counter still counts
c = profiling.compute_ops(g, [x])
assert c.error is None and c.ops.get("aten._softmax") == 1, c
torch.use_deterministic_algorithms(True)
flags.apply_flags(flags.flags_for("eager-fp32"))
import torch._inductor.config as ic
assert not torch.are_deterministic_algorithms_enabled() and not ic.deterministic
print("OK")
'''


def test_the_op_counters_and_the_flags_do_not_load_dynamo():
    """Dynamo and Inductor cost a CPU candidate worker ~2 CPU-seconds of its ~4 s start when kbv
    loaded them (``torch.use_deterministic_algorithms`` in the flags, the dispatch mode's
    ``_disable_dynamo`` wrapper, ``torch.profiler``'s ``hasattr(torch, "_inductor")``); none of kbv's
    calls loads them now, and once a candidate does, counting and the flags still work."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    r = subprocess.run([sys.executable, "-c", _NO_DYNAMO], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "LOADED False False" in r.stdout and "OK" in r.stdout, r.stdout


_COMPILED_FORWARD = r'''
import torch
from kbv.sandbox import profiling
import torch._dynamo.utils as du
x = torch.randn(16, 16)
g = torch.compile(lambda a: torch.softmax(a @ a, 1), backend="eager")
g(x)
frames = dict(du.counters["frames"])
c = profiling.compute_ops(g, [x])
assert c.error is None and c.ops == {"aten.mm": 1, "aten._softmax": 1}, c
assert dict(du.counters["frames"]) == frames, (frames, dict(du.counters["frames"]))  # no kbv frame traced
h = torch.compile(lambda a: torch.softmax(a @ a, 1), backend="eager", fullgraph=True)
c = profiling.compute_ops(h, [x])
assert c.ops == {"aten.mm": 1, "aten._softmax": 1} and "marked as skipped" not in str(c.error), c
print("OK")
'''


def test_a_compiled_forward_does_not_trace_the_op_counters_dispatch():
    """Regression: the op counter's ``__torch_dispatch__`` (kbv's ``_dispatch``, not torch's
    Dynamo-disabled wrapper) was traced by Dynamo when a candidate's compiled forward ran under it
    (four more frames compiled), and with ``fullgraph=True`` the trace failed on the wrapped call
    ("function marked as skipped") before any op was counted. ``_dispatch`` is marked for Dynamo to
    skip."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    r = subprocess.run([sys.executable, "-c", _COMPILED_FORWARD], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]


def test_refused_counts_lets_a_working_profiler_count_decide():
    """probe:op-count-refused: a forward failing under the profiler (alone or with the dispatch
    mode) refuses the check; one failing under the dispatch mode alone does not (the profiler,
    which sees every thread and ops run with modes off, still counted: an honest custom kernel that
    cannot run under a dispatch mode keeps its PASS); a probe's own failure is never the candidate's."""
    from kbv.checks.op_coverage import refused_counts

    raised = "RuntimeError: unsupported here"
    assert refused_counts(raised, None) == []
    assert refused_counts(None, raised) == [("profiler count", raised)]
    assert refused_counts(raised, raised) == [("dispatch-mode count", raised), ("profiler count", raised)]
    assert refused_counts(raised, "recorded_ops failed: RuntimeError: profiler busy",
                          profiler_probe_failed=True) == [("dispatch-mode count", raised)]
    assert refused_counts("compute_ops failed: x", "recorded_ops failed: y", True, True) == []
    # the probe's own failure is a kind set where it was caught: a forward raising that text is refused
    assert refused_counts(None, "recorded_ops failed: y") == [("profiler count", "recorded_ops failed: y")]
    assert refused_counts(None, None) == []


def test_counts_of_several_calls_are_their_union():
    """The op count's turns (a timed call's inputs, a fresh draw) counted as one: each op the most
    any call ran, so a forward that runs the reference's op on one path only is counted with it
    (red-team helper, twentieth session: a wrapper that told the counted call apart)."""
    from kbv.sandbox.op_tables import OpCount, union

    a = OpCount(ops={"aten.index": 1, "aten.mul": 2}, shaped={"aten.mul|x": 2}, time_us={"aten.mul|x": 5.0})
    b = OpCount(ops={"aten.bmm": 1, "aten.mul": 1}, shaped={"aten.bmm|y": 1}, time_us={"aten.bmm|y": 40.0})
    u = union([a, b])
    assert u.ops == {"aten.index": 1, "aten.mul": 2, "aten.bmm": 1}
    assert u.shaped == {"aten.mul|x": 2, "aten.bmm|y": 1} and u.time_us["aten.bmm|y"] == 40.0
    assert u.error is None and not u.probe_failed
    bad = union([a, OpCount(error="RuntimeError: no", probe_failed=True)])
    assert bad.error == "RuntimeError: no" and bad.probe_failed
