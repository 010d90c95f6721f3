"""GPU verifications (marked cuda: skipped without CUDA; run on the H200, logged in docs/gpu-runs.md)."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import candidate, demo_candidate, demo_problem, problem
from kbv.model.records import EvalConfig, Status

pytestmark = pytest.mark.cuda


@pytest.fixture
def gpu_config():
    return EvalConfig(device="cuda", trials=30)


def test_tf32_matmul_wins_only_against_the_fp32_baseline(gpu_evaluator, gpu_config):
    import torch

    v = gpu_evaluator.evaluate(demo_problem("level1/4_Square_matmul.py"), demo_candidate("matmul_tf32.py"),
                               gpu_config)
    # torch.mm in TF32: correct, and the speed is torch's own (README: SHORTCUT)
    assert v.status is Status.SHORTCUT, v.message
    assert any(f.check == "probe:reference-ops" for f in v.findings), v.findings
    # several times faster than strict FP32 (the bound pass and the findings printed when it is not)
    assert v.speedup["eager-fp32"] > 2.5, (v.speedup, v.findings, v.evidence.get("trusted_bound"))
    assert 0.6 < v.speedup["eager-tf32"] < 1.6, v.speedup  # about 1x against TF32
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    assert all(m.l2_flush_bytes == 2 * l2 for m in v.timing.values())
    assert all(m.clock == "cuda-event" for m in v.timing.values())
    assert v.memory["candidate"].peak_bytes > 0 and v.memory["reference"].peak_bytes > 0
    assert v.memory_efficiency is not None and 0.5 < v.memory_efficiency < 2.0
    assert v.environment.device_name and v.environment.cuda


def test_relu_hack_fails_d4_on_gpu(gpu_evaluator, gpu_config):
    v = gpu_evaluator.evaluate(demo_problem("level1/1_ReLU.py"), demo_candidate("relu_hack.py"), gpu_config)
    # it returns its input when it looks like torch.rand (an alias: HACK, taxonomy 8) and is wrong on D4
    assert v.status is Status.HACK and 8 in v.taxonomy, v.message
    assert v.nominal_passed
    failed = [r.name for r in v.input_sets if r.passed is False]
    assert [n for n in failed if n.startswith("D")] == ["D4"]  # of KernelBench-Verified's sets, only x-1
    assert {"normal", "sign-flip"} <= set(failed)  # and kbv's mixed-sign randomised sets


@pytest.mark.parametrize("name, prob", [
    ("relu_cuda.py", "level1/1_ReLU.py"),
    ("softmax_triton.py", "level1/2_Softmax.py"),
    ("layernorm_triton.py", "level1/3_LayerNorm.py"),
])
def test_honest_gpu_kernels_pass(gpu_evaluator, gpu_config, name, prob):
    from kbv.processes.footprint import LEFT_OVER_BYTES

    v = gpu_evaluator.evaluate(demo_problem(prob), demo_candidate(name), gpu_config)
    assert v.status is Status.PASS, v.message
    assert v.weight_mismatches == ()
    assert v.memory_efficiency is not None
    assert v.evidence["reference_device_left_over_bytes"] <= LEFT_OVER_BYTES, v.evidence


def test_inputs_a_candidate_keeps_do_not_stay_in_the_reference_worker(gpu_evaluator, gpu_config):
    """The reference worker's device memory grew job after job at full size (CUDA IPC blocks of
    killed candidate workers, seventh session): the worker releases what it was sent on shutdown,
    and a reference worker left holding memory is replaced before the next job."""
    from kbv.processes.footprint import LEFT_OVER_BYTES

    cfg = dataclasses.replace(gpu_config, trials=6)
    hoard = gpu_evaluator.evaluate(problem("level1/14_Square_matmul_4096.py"), candidate("matmul_hoards_inputs.py"), cfg)
    assert hoard.status is not Status.EVAL_ERROR, hoard.message
    after = gpu_evaluator.evaluate(demo_problem("level1/1_ReLU.py"), demo_candidate("relu_cuda.py"), cfg)
    assert after.status is Status.PASS, after.message
    assert after.evidence["reference_device_left_over_bytes"] <= LEFT_OVER_BYTES, (
        hoard.evidence.get("reference_device_left_over_bytes"), after.evidence)


def test_crash_and_timeout_on_gpu_then_next_job_runs(gpu_evaluator, gpu_config):
    cfg = dataclasses.replace(gpu_config, call_timeout_s=10, trials=6)
    p = problem("level1/1_Small_ReLU.py")
    assert gpu_evaluator.evaluate(p, candidate("relu_segfault.py"), cfg).status is Status.CRASH
    assert gpu_evaluator.evaluate(p, candidate("relu_hang.py"), cfg).status is Status.TIMEOUT
    # torch's own kernels on cuda: SHORTCUT (the kernel profile); what matters is that the job ran
    assert gpu_evaluator.evaluate(p, candidate("relu_torch.py"), cfg).status in (Status.PASS, Status.SHORTCUT)


def test_integer_targets_on_gpu(gpu_evaluator, gpu_config):
    v = gpu_evaluator.evaluate(problem("level1/4_Small_NLL.py"), candidate("nll_dtype_check.py"),
                               dataclasses.replace(gpu_config, trials=6))
    assert v.status in (Status.PASS, Status.SHORTCUT), v.message  # torch ops: SHORTCUT by the kernel profile
