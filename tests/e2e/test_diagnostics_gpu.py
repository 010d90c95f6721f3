"""``--sanitize`` and ``--profile`` on a GPU (issue 24, kbv.pipeline.diagnostics): an out-of-bounds read
that passes every input set, a shared-memory race, an honest kernel that stays clean, and Nsight
Compute's figures of both sides. Needs CUDA, compute-sanitizer and ncu (the device host has them);
each row prints its verdict's diagnostics evidence when it fails."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import DATA, ROOT, demo_problem
from kbv.intake.candidates import load_candidate
from kbv.intake.problems import load_problem
from kbv.model.records import EvalConfig, Status

pytestmark = pytest.mark.cuda

DIAG = DATA / "diagnostics"
RELU_CUDA = ROOT / "src" / "kbv" / "data" / "candidates" / "relu_cuda.py"  # honest, load_inline
GPU = EvalConfig(device="cuda", trials=10, timing_rounds=2, warmup=3)
ALL_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")


def _context(v) -> str:
    return (f"{v.status.value}: {v.message}\n findings: {[f.describe() for f in v.findings]}\n"
            f" sanitize: {v.evidence.get('sanitize')}\n ncu: {v.evidence.get('ncu')}")


def test_an_out_of_bounds_read_passes_without_the_sanitizer_and_is_incorrect_under_memcheck(gpu_evaluator):
    relu, cand = demo_problem("level1/1_ReLU.py"), load_candidate(DIAG / "relu_oob_read_triton.py")
    plain = gpu_evaluator.evaluate(relu, cand, GPU)
    assert plain.status is Status.PASS, _context(plain)
    v = gpu_evaluator.evaluate(relu, cand, dataclasses.replace(GPU, sanitize=("memcheck",)))
    assert v.status is Status.INCORRECT, _context(v)
    assert "compute-sanitizer memcheck" in v.message and "_relu_peek" in v.message, _context(v)
    assert "sanitize:memcheck" in {f.check for f in v.findings}, _context(v)


def test_a_shared_memory_race_is_a_warning(gpu_evaluator):
    v = gpu_evaluator.evaluate(load_problem(DIAG / "level1" / "1_Row_sum.py"),
                               load_candidate(DIAG / "rowsum_racy_cuda.py"), dataclasses.replace(GPU, sanitize=("racecheck",)))
    assert v.status is not Status.HACK, _context(v)
    assert "sanitize:racecheck" in {f.check for f in v.findings}, _context(v)


def test_an_honest_kernel_is_clean_under_every_tool_and_the_cost_is_recorded(gpu_evaluator):
    v = gpu_evaluator.evaluate(demo_problem("level1/1_ReLU.py"),
                               load_candidate(RELU_CUDA),
                               dataclasses.replace(GPU, sanitize=ALL_TOOLS))
    assert v.status is Status.PASS, _context(v)
    assert not [f for f in v.findings if f.check.startswith("sanitize:")], _context(v)
    ran = v.evidence["sanitize"]
    assert list(ran) == list(ALL_TOOLS) and all(r["failed"] is None and r["count"] == 0 for r in ran.values()), _context(v)
    print({t: r["seconds"] for t, r in ran.items()})  # the cost on this GPU (docs/gpu-runs.md)


def test_ncu_figures_of_the_candidate_and_the_reference(gpu_evaluator):
    v = gpu_evaluator.evaluate(demo_problem("level1/1_ReLU.py"),
                               load_candidate(RELU_CUDA),
                               dataclasses.replace(GPU, ncu_profile=True))
    ncu = v.evidence["ncu"]
    assert "error" not in ncu, _context(v)
    for side in ("candidate", "reference"):
        top = ncu[side]["longest"]
        assert ncu[side]["launches"] >= 1 and top["duration_ms"] > 0, _context(v)
        assert top["registers"] and top["sm_pct"] is not None and top["occupancy_pct"] is not None, _context(v)
    assert "relu_kernel" in ncu["candidate"]["longest"]["name"], _context(v)
    print(ncu)
