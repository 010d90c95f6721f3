"""Memory that grows with every call (a leak: ``memory:growth``) and the CUPTI kernel time beside the
CUDA-event median (``timing:cupti-disagrees``), through whole verifications (issue 24). The cuda tests
are marked ``cuda``: run on a GPU host and logged in docs/gpu-runs.md."""

from __future__ import annotations

import pytest

from conftest import candidate, demo_candidate, demo_problem, problem
from kbv.model.records import EvalConfig, Status

MiB = 1 << 20
#: the leaking candidate keeps this much a call.
LEAK_BYTES = 8 * MiB


def _growth(v) -> list:
    return [f for f in v.findings if f.check == "memory:growth"]


# relu_cyclic_garbage: 8 MiB of cyclic garbage a call, which the collector frees (a Triton interpreter
# launch leaves such a cycle holding its output): no leak, since each reading follows a full
# collection and malloc_trim in the worker
@pytest.mark.parametrize("name, leaks", [("relu_leak_8mib.py", True), ("relu_torch.py", False),
                                         ("relu_cyclic_garbage.py", False)])
def test_a_per_call_leak_on_cpu_is_a_warning_and_an_honest_relu_has_none(cpu_evaluator, name, leaks):
    cfg = EvalConfig(device="cpu", trials=9, timing_rounds=3, warmup=1, call_timeout_s=60)
    v = cpu_evaluator.evaluate(problem("level1/1_Small_ReLU.py"), candidate(name), cfg)
    assert v.status is Status.PASS, v.message
    growth = v.evidence["memory_growth"]
    # the reference worker's readings of the worker's tree after each of three rounds (or more)
    assert growth["source"] == "proc" and len(growth["samples"]) >= 3, growth
    assert all(b and b > 0 for _, b in growth["samples"]), growth
    assert bool(_growth(v)) is leaks, (_growth(v), growth)
    if leaks:
        assert 0.9 * LEAK_BYTES < growth["rate_bytes_per_call"] < 1.2 * LEAK_BYTES, growth
        assert "resident memory" in _growth(v)[0].detail


@pytest.mark.cuda
def test_a_per_call_leak_of_device_memory_is_a_warning(gpu_evaluator):
    v = gpu_evaluator.evaluate(problem("level1/1_Small_ReLU.py"), candidate("relu_leak_8mib.py"),
                               EvalConfig(device="cuda", trials=30))
    assert v.status in (Status.PASS, Status.SHORTCUT), v.message  # torch ops: SHORTCUT by the kernel profile
    growth = v.evidence["memory_growth"]
    assert growth["source"] in ("nvml", "device"), growth  # a device reading (why not, in device_note)
    assert "host" in growth and growth["host"]["source"] == "proc"
    found = _growth(v)
    assert found and "device memory" in found[0].detail, (found, growth)
    # the caching allocator gives 8 MiB blocks from 20 MiB segments: about 10 MiB a call in steps
    assert 0.5 * LEAK_BYTES < growth["rate_bytes_per_call"] < 3 * LEAK_BYTES, growth


@pytest.mark.cuda
def test_an_honest_cuda_kernel_has_no_growth_and_its_cupti_time_agrees_with_its_events(gpu_evaluator):
    v = gpu_evaluator.evaluate(demo_problem("level1/1_ReLU.py"), demo_candidate("relu_cuda.py"),
                               EvalConfig(device="cuda", trials=30))
    assert v.status is Status.PASS, v.message
    assert not _growth(v), (_growth(v), v.evidence["memory_growth"])
    assert v.evidence["memory_growth"]["source"] in ("nvml", "device"), v.evidence["memory_growth"]
    cupti = v.evidence["cupti"]
    assert cupti["kernel_ms_per_call"] > 0 and cupti["event_median_ms"] > 0, cupti
    # the events bracket the kernel: at least its time, within the launch and the L2 flush's cold start
    assert 0.5 * cupti["kernel_ms_per_call"] < cupti["event_median_ms"] < 5 * cupti["kernel_ms_per_call"], cupti
    assert not [f for f in v.findings if f.check == "timing:cupti-disagrees"], v.findings
