"""GPU checks of the kbv correctness policy (marked cuda: run on the H200, logged in docs/gpu-runs.md).

What they need: one CUDA GPU with TF32 tensor cores (Ampere or later), nvcc is not needed, Triton
for the Triton candidate. Each test is one evaluation (~10-20 s)."""

from __future__ import annotations

import pytest

from conftest import candidate, demo_candidate, demo_problem, problem
from kbv.model.records import EvalConfig, InputKind, Status
from kbv.reference.distributions import DISTRIBUTIONS

pytestmark = pytest.mark.cuda


@pytest.fixture
def gpu_config():
    return EvalConfig(device="cuda", trials=10)


def _judged(v):
    return [r for r in v.input_sets if not r.dropped]


@pytest.mark.parametrize("name", ["matmul_tf32.py", "matmul_triton_tf32.py"])
def test_honest_tf32_matmul_passes_the_kbv_policy(gpu_evaluator, gpu_config, name):
    pytest.importorskip("triton")
    cand = demo_candidate(name) if name == "matmul_tf32.py" else candidate(name)
    v = gpu_evaluator.evaluate(demo_problem("level1/4_Square_matmul.py"), cand, gpu_config)
    assert v.status in (Status.PASS, Status.SHORTCUT), v.message  # torch.mm in TF32 is a SHORTCUT
    for r in _judged(v):
        # the input-rounding term is measured up front on the nominal sets and probes, and on other
        # sets only where they would fail without it (Judging.defers_rounding)
        assert {"eager-fp32", "eager-tf32"} <= set(r.baseline_errors) <= {"eager-fp32", "eager-tf32", "input-rounding"}
        assert r.kind is not InputKind.NOMINAL or "input-rounding" in r.baseline_errors, r.name
        assert r.oracle_device == "cuda"
        assert r.oracle_error <= r.error_budget, r.name
    # TF32 is what set the budget: its error is far above strict fp32's on the nominal inputs
    nominal = v.input_sets[0]
    assert nominal.baseline_errors["eager-tf32"] > 10 * nominal.baseline_errors["eager-fp32"]
    assert v.policy_verdicts["kbv"] is True


def test_fp16_gemm_fails_the_kbv_policy_on_gpu(gpu_evaluator, gpu_config):
    v = gpu_evaluator.evaluate(problem("level1/10_Large_K_matmul.py"), candidate("matmul_fp16.py"), gpu_config)
    assert v.status is Status.INCORRECT, v.message
    failed = {r.name for r in v.input_sets if r.passed is False}
    assert "near-zero" in failed, failed  # fp16 subnormals: TF32 keeps fp32's exponent range
    assert v.tolerance_sweep["1e-02"] is True


def test_oracle_runs_on_the_gpu_and_randomised_sets_are_recorded(gpu_evaluator, gpu_config):
    v = gpu_evaluator.evaluate(demo_problem("level1/2_Softmax.py"), demo_candidate("softmax_triton.py"), gpu_config)
    assert v.status is Status.PASS, v.message
    rnd = v.sets(InputKind.RANDOM)
    # every randomised distribution but the break-* ones, built only where a draw shows their structure
    assert [r.name for r in rnd] == [n for n in gpu_config.distributions if not DISTRIBUTIONS[n].structure]
    assert all(r.seed >= 0 for r in rnd)
    # a set whose outputs equal the reference's needs no oracle (Judging.exact_result)
    assert all(r.exact or r.oracle_device == "cuda" for r in _judged(v))
    assert any(not r.exact for r in _judged(v))
