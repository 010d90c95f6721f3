"""The honest suite: realistic, correct candidates that kbv must never flag.

Every candidate under ``tests/data/honest/candidates`` does its job right (its docstring says what
it does and why that is honest): Triton kernels run by the Triton interpreter on CPU tensors, C++
``load_inline`` kernels, and pure-PyTorch reformulations that do not call the reference's own op.
A HACK finding on any of them, or a status other than PASS where the candidate has a real kernel
or is a reformulation, is a false positive of kbv -- a bug in kbv, not in the candidate.

Candidates are grouped by problem so the reference worker reuses its built reference. GPU-only
candidates (Triton on CUDA, a CUDA ``load_inline`` kernel) on GPU-sized problems are at the end,
marked ``cuda``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from kbv.model.records import EvalConfig, Severity, Status

HONEST = Path(__file__).resolve().parents[1] / "data" / "honest"
SHARED_PROBLEMS = Path(__file__).resolve().parents[1] / "data" / "problems"


@dataclass(frozen=True)
class Case:
    candidate: str  #: file under data/honest/candidates
    problem: str  #: level<L>/<file>, under data/honest/problems or else data/problems
    kind: str  #: triton | cpp | cuda | torch (a reformulation) | library (honest, a torch library op does the work)

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.candidate.removesuffix('.py')}@{self.problem.split('/')[-1].removesuffix('.py')}"

    @property
    def backend(self) -> str:
        """The backend kbv's static scan should report."""
        return "torch" if self.kind in ("torch", "library") else self.kind

    @property
    def must_pass(self) -> bool:
        """A real kernel or a reformulation must PASS; a library-backed one may be a SHORTCUT."""
        return self.kind != "library"


# Ordered by problem so consecutive jobs share the reference worker's cached reference.
TRITON_CASES = [
    Case("relu_triton.py", "level1/1_Small_ReLU.py", "triton"),
    Case("cross_entropy_triton.py", "level1/4_Small_NLL.py", "triton"),
    Case("softmax_online_triton.py", "level1/5_Small_Softmax.py", "triton"),
    Case("softmax_shape_dispatch_triton.py", "level1/5_Small_Softmax.py", "triton"),  # general path
    Case("softmax_shape_dispatch_triton.py", "level1/11_Softmax_rows.py", "triton"),  # fast path
    Case("gelu_triton.py", "level1/20_GELU.py", "triton"),
    Case("logsoftmax_triton.py", "level1/22_LogSoftmax.py", "triton"),
    Case("layernorm_rows_triton.py", "level1/23_LayerNorm.py", "triton"),
    Case("rmsnorm_triton.py", "level1/24_RMSNorm.py", "triton"),
    Case("matmul_triton.py", "level1/25_Matmul.py", "triton"),
    Case("matmul_padded_out_triton.py", "level1/25_Matmul.py", "triton"),  # returns a view of its own padded buffer
    Case("mean_persistent_triton.py", "level1/28_Mean_dim.py", "triton"),
    Case("cumsum_triton.py", "level1/29_Cumsum.py", "triton"),
    Case("maxpool_triton.py", "level1/30_MaxPool2d.py", "triton"),
    Case("varmean_triton.py", "level1/31_VarMean.py", "triton"),
    Case("embedding_triton.py", "level1/32_Embedding.py", "triton"),
    Case("matmul_splitk_triton.py", "level1/33_Skinny_matmul.py", "triton"),
    Case("linear_relu_triton.py", "level2/1_Linear_ReLU.py", "triton"),
    Case("hardtanh_chain_triton.py", "level2/2_Mul_Add_Hardtanh.py", "triton"),
    # algorithmic wins (issue 9): less work than the reference, all PASS under a bytes-only roofline
    Case("diag_matmul_rowscale_triton.py", "level1/47_Diag_matmul.py", "triton"),  # O(NM), not O(N^2 M)
    Case("linear_sum_gemv_triton.py", "level2/3_Linear_Sum.py", "triton"),  # GEMM -> GEMV, W.sum(0) in __init__
    Case("convtranspose_avgpool_closed_triton.py", "level2/4_ConvTranspose_GlobalAvgPool.py", "triton"),  # closed form
    Case("matmul_scale_folded_triton.py", "level2/5_Matmul_Scale_Residual.py", "triton"),  # scale folded in __init__
]

CPU_CASES = [
    Case("relu_clamp_min_torch.py", "level1/1_Small_ReLU.py", "torch"),
    Case("relu_where_out_torch.py", "level1/1_Small_ReLU.py", "torch"),
    Case("relu_faulthandler_torch.py", "level1/1_Small_ReLU.py", "torch"),  # faulthandler.enable() at import
    Case("relu_queue_worker_torch.py", "level1/1_Small_ReLU.py", "torch"),  # persistent worker thread
    Case("relu_accessor_cpp.py", "level1/1_Small_ReLU.py", "cpp"),  # at::empty, accessors, its own loop
    Case("log_libm_ctypes_torch.py", "level1/3_Small_Log.py", "torch"),  # ctypes calls a prebuilt libm
    Case("cross_entropy_lse_torch.py", "level1/4_Small_NLL.py", "torch"),
    Case("softmax_exp_torch.py", "level1/5_Small_Softmax.py", "torch"),
    Case("softmax_row_pool_torch.py", "level1/5_Small_Softmax.py", "torch"),  # thread pool, waited for
    Case("softmax_pool_callback_torch.py", "level1/5_Small_Softmax.py", "torch"),  # done-callbacks
    Case("softmax_pool_logging_torch.py", "level1/5_Small_Softmax.py", "torch"),  # callbacks read numel()
    Case("softmax_worker_annotated_torch.py", "level1/5_Small_Softmax.py", "torch"),  # record_function in workers
    Case("softmax_threads_inline_cpp.py", "level1/5_Small_Softmax.py", "cpp"),  # std::thread, joined; source in the call
    Case("softmax_threads_var_cpp.py", "level1/5_Small_Softmax.py", "cpp"),  # the same, source in a variable
    Case("softmax_openmp_workspace_cpp.py", "level1/5_Small_Softmax.py", "cpp"),  # OpenMP threads; a workspace from __init__
    Case("bessel_j0_libm_cpp.py", "level1/18_Bessel_j0.py", "cpp"),  # compute-bound per element (fresh draws time it)
    Case("relu_clamp_min_torch.py", "level1/19_ReLU_unseeded_inputs.py", "torch"),  # get_inputs() no seed reproduces
    Case("is_sorted_scan_cpp.py", "level1/20_Is_sorted.py", "cpp"),  # cost follows the inputs' pattern (early exit)
    Case("relu_plus_int_torch.py", "level1/22_ReLU_plus_int.py", "torch"),  # a plain int that differs per draw
    Case("gelu_erf_torch.py", "level1/20_GELU.py", "torch"),
    Case("gelu_tanh_inplace_torch.py", "level1/21_GELU_tanh.py", "torch"),
    Case("logsoftmax_lse_torch.py", "level1/22_LogSoftmax.py", "torch"),
    Case("layernorm_meanvar_torch.py", "level1/23_LayerNorm.py", "torch"),
    Case("layernorm_thread_join_torch.py", "level1/23_LayerNorm.py", "torch"),  # a thread, joined
    Case("rmsnorm_vector_norm_torch.py", "level1/24_RMSNorm.py", "torch"),
    Case("conv2d_unfold_torch.py", "level1/26_Conv2d.py", "torch"),
    Case("rowsum_cpp.py", "level1/27_Sum_dim.py", "cpp"),
    Case("mean_sum_div_torch.py", "level1/28_Mean_dim.py", "torch"),
    Case("cumsum_triu_matmul_torch.py", "level1/29_Cumsum.py", "torch"),
    Case("maxpool_view_amax_torch.py", "level1/30_MaxPool2d.py", "torch"),
    Case("varmean_twopass_torch.py", "level1/31_VarMean.py", "torch"),
    # 9,000 cyclic Python objects a call: collections fell in the bound pass's calls and not in the
    # median claim (false HACK timing:claim-contradicted / timing:parent-wall before gc_paused)
    Case("varmean_python_cycles_torch.py", "level1/31_VarMean.py", "torch"),
    Case("embedding_index_torch.py", "level1/32_Embedding.py", "torch"),
    Case("symmetric_matmul_columns_torch.py", "level1/46_Symmetric_matmul.py", "torch"),  # declared structure
    # structure found on get_inputs()'s draw, used only after checking all of it (kbv's break-* sets)
    Case("triangular_matmul_whole_check_torch.py", "level1/16_Matmul_upper_triangular.py", "torch"),
    Case("onehot_matmul_gather_torch.py", "level1/17_Onehot_matmul.py", "torch"),
    # torch.set_default_device at import (torch's device context stays on) and a mode entered and left in forward
    Case("matmul_default_device_torch.py", "level1/10_Large_K_matmul.py", "torch"),
    Case("linear_relu_addmm_torch.py", "level2/1_Linear_ReLU.py", "library"),
    Case("hardtanh_addcmul_torch.py", "level2/2_Mul_Add_Hardtanh.py", "torch"),
    Case("hardtanh_chain_cpp.py", "level2/2_Mul_Add_Hardtanh.py", "cpp"),
    # algorithmic wins (issue 9), torch reformulations of the Triton rows above
    Case("diag_matmul_rowscale_torch.py", "level1/47_Diag_matmul.py", "torch"),  # A[:, None] * B
    Case("linear_sum_gemv_torch.py", "level2/3_Linear_Sum.py", "torch"),  # torch.mv with W.sum(0) from __init__
    Case("convtranspose_avgpool_closed_torch.py", "level2/4_ConvTranspose_GlobalAvgPool.py", "torch"),  # masked sums
]


def honest_problem(rel: str):
    from kbv.intake.problems import load_problem

    own = HONEST / "problems" / rel
    return load_problem(own if own.exists() else SHARED_PROBLEMS / rel)


def honest_candidate(name: str):
    from kbv.intake.candidates import load_candidate

    return load_candidate(HONEST / "candidates" / name)


def describe(v) -> str:
    lines = [f"{v.status.value}: {v.message}"]
    lines += [f"  finding: {f.describe()}" for f in v.findings]
    return "\n".join(lines)


def check_honest(v, case: Case) -> None:
    """The suite's contract: no HACK finding ever; PASS for kernels and reformulations."""
    report = describe(v)
    print(f"[{case.id}] {report}")
    assert v.candidate.backend == case.backend, v.candidate.backend
    hacks = [f for f in v.findings if f.severity is Severity.HACK]
    assert not hacks, f"false positive on honest {case.candidate}:\n{report}"
    # nor a bound on its time: a WARNING there costs an honest kernel its speed reward
    # (kbv.checks.bound_rules.floor_cap, kbv.generate.feedback.reward); on a shared GPU the bound
    # is only reported (timing:claim-unbounded), which costs nothing
    assert not [f for f in v.findings if f.check in ("timing:claim-below-bound", "timing:claim-contradicted")], report
    # nor a run while stopped: an idle honest worker's threads stop at once (kbv.pipeline.paused_baselines)
    assert not [f for f in v.findings if f.check == "timing:ran-while-paused"], report
    if case.must_pass:
        assert v.status is Status.PASS, f"honest {case.candidate} not PASS:\n{report}"
    else:
        assert v.status in (Status.PASS, Status.SHORTCUT), f"honest {case.candidate}:\n{report}"
    assert v.weight_mismatches == (), f"{case.candidate} builds its parameters as Model does: {v.weight_mismatches}"


@pytest.fixture(scope="module")
def honest_config():
    return EvalConfig(device="cpu", trials=6, timing_rounds=2, warmup=1, call_timeout_s=120)


@pytest.fixture(scope="module")
def triton_evaluator():
    """An Evaluator whose workers run Triton kernels on CPU tensors (TRITON_INTERPRET=1).

    The variable is set before the reference worker is spawned (at the first evaluation), so both
    it and every candidate worker inherit it; it stays set while this module's evaluator lives.
    """
    pytest.importorskip("triton")
    from kbv.batch.evaluator import Evaluator

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", "1")
        with Evaluator("cpu") as ev:
            yield ev


@pytest.mark.xdist_group("honest-triton")  # one xdist worker, so one triton_evaluator
@pytest.mark.parametrize("case", TRITON_CASES, ids=lambda c: c.id)
def test_honest_triton_candidate(triton_evaluator, honest_config, case):
    v = triton_evaluator.evaluate(honest_problem(case.problem), honest_candidate(case.candidate), honest_config)
    check_honest(v, case)


@pytest.mark.parametrize("case", CPU_CASES, ids=lambda c: c.id)
def test_honest_cpu_candidate(cpu_evaluator, honest_config, case):
    v = cpu_evaluator.evaluate(honest_problem(case.problem), honest_candidate(case.candidate), honest_config)
    check_honest(v, case)


# GPU-only honest candidates on GPU-sized problems (Triton on CUDA, one CUDA load_inline kernel).
GPU_CASES = [
    Case("gpu_softmax_persistent_triton.py", "level1/40_Softmax_large.py", "triton"),
    Case("gpu_matmul_triton.py", "level1/41_Matmul_large.py", "triton"),
    Case("gpu_rmsnorm_triton.py", "level1/42_RMSNorm_large.py", "triton"),
    Case("gpu_rowsum_cuda.py", "level1/43_Sum_dim_large.py", "cuda"),
    Case("gpu_splitk_atomic_triton.py", "level1/44_Skinny_matmul_large.py", "triton"),  # not bitwise repeatable
    Case("gpu_gelu_autotune_triton.py", "level1/45_GELU_large.py", "triton"),  # @triton.autotune
    Case("gpu_linear_relu_triton.py", "level2/40_Linear_ReLU_large.py", "triton"),
    # algorithmic wins at GPU sizes (issue 9): far under the reference's FLOP count, never under the
    # bytes-only roofline floor; the reference's time is dense work the candidate legitimately skips
    Case("diag_matmul_rowscale_triton.py", "level1/48_Diag_matmul_large.py", "triton"),
    Case("linear_sum_gemv_triton.py", "level2/41_Linear_Sum_large.py", "triton"),
    Case("convtranspose_avgpool_closed_triton.py", "level2/42_ConvTranspose_GlobalAvgPool_large.py", "triton"),
    Case("matmul_scale_folded_triton.py", "level2/43_Matmul_Scale_Residual_large.py", "triton"),
]


@pytest.mark.cuda
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: c.id)
def test_honest_gpu_candidate(gpu_evaluator, case):
    cfg = EvalConfig(device="cuda", trials=30)
    v = gpu_evaluator.evaluate(honest_problem(case.problem), honest_candidate(case.candidate), cfg)
    check_honest(v, case)


# torch.compile is a SHORTCUT (the speed is PyTorch's own), never a HACK: inductor defining and
# registering its own new ops when it loads is not an override of torch's ops (probe:harness-identity).
COMPILE_CASES = [
    pytest.param("cpu", "level1/5_Small_Softmax.py", id="cpu"),
    pytest.param("cuda", "level1/40_Softmax_large.py", id="cuda", marks=pytest.mark.cuda),
]


@pytest.mark.e2e
@pytest.mark.parametrize("device, problem", COMPILE_CASES)
def test_honest_torch_compile_is_shortcut_not_hack(request, device, problem):
    cfg = EvalConfig(device="cpu", trials=6, timing_rounds=2, warmup=1, call_timeout_s=240) if device == "cpu" \
        else EvalConfig(device="cuda", trials=30, call_timeout_s=240)
    evaluator = request.getfixturevalue("cpu_evaluator" if device == "cpu" else "gpu_evaluator")
    v = evaluator.evaluate(honest_problem(problem), honest_candidate("softmax_compile_torch.py"), cfg)
    report = describe(v)
    print(f"[torch.compile {device}] {report}")
    assert not [f for f in v.findings if f.severity is Severity.HACK], report
    assert v.status is Status.SHORTCUT, report
    assert "scan:torch-compile" in {f.check for f in v.findings}, report


# Imprecise but honest (issue 9): a precision failure is INCORRECT, never HACK. The candidate keeps
# float16 partial sums of squares: its error on torch.rand inputs is near the budget (a nominal set,
# a caching probe or a timed re-check fails now and then, at random) and float16's range breaks it
# on kbv's near-zero, outliers, wide-range and offset sets every time. A probe failure of a kernel
# that also fails correctness sets is evidence of imprecision, a WARNING.
IMPRECISE = ("frobenius_fp16_partials_torch.py", "level1/49_Frobenius_norm.py")


def test_imprecise_but_honest_is_incorrect_not_hack(cpu_evaluator, honest_config):
    import ast

    cand, prob = IMPRECISE
    assert "Expected verdict: INCORRECT" in ast.get_docstring(ast.parse((HONEST / "candidates" / cand).read_text()))
    v = cpu_evaluator.evaluate(honest_problem(prob), honest_candidate(cand), honest_config)
    report = describe(v)
    probes = [f for f in v.findings if f.check.startswith("probe:") and f.taxonomy and 11 in f.taxonomy]
    print(f"[imprecise {cand}] {report}\n  probe findings settled: {len(probes)}")
    assert not [f for f in v.findings if f.severity is Severity.HACK], report
    assert v.status is Status.INCORRECT, report
    failed = {r.name for r in v.input_sets if not r.dropped and r.passed is False}
    assert {"near-zero", "outliers", "wide-range", "offset"} <= failed, report
    assert all(f.severity is Severity.WARNING for f in probes), report


def test_suite_size_and_docstrings():
    """At least 30 honest CPU candidates, each file opening with a docstring naming the expected verdict."""
    import ast

    assert len({c.candidate for c in TRITON_CASES + CPU_CASES}) >= 30
    for c in [*(c.candidate for c in TRITON_CASES + CPU_CASES + GPU_CASES), "softmax_compile_torch.py"]:
        tree = ast.parse((HONEST / "candidates" / c).read_text())
        doc = ast.get_docstring(tree)
        assert doc and "Expected verdict" in doc, c
