"""Compiled candidates on CPU: a C++ load_inline build cached by content hash, and a Triton kernel
run by the Triton interpreter (TRITON_INTERPRET=1), both through the real worker processes."""

from __future__ import annotations

import os

import pytest

from conftest import demo_candidate, problem
from kbv.intake.candidates import build_dir
from kbv.model.records import Status


@pytest.mark.slow
def test_cpp_candidate_builds_once_and_is_reused(cpu_evaluator, fast_config):
    cand = demo_candidate("relu_cpp.py")
    first = cpu_evaluator.evaluate(problem("level1/1_Small_ReLU.py"), cand, fast_config)
    assert first.status is Status.PASS, first.message
    root = build_dir(cand, "cpu") / "torch_extensions"
    libs = sorted(root.rglob("*.so"))
    assert libs, f"no extension built under {root}"
    mtimes = [os.stat(p).st_mtime_ns for p in libs]
    second = cpu_evaluator.evaluate(problem("level1/1_Small_ReLU.py"), cand, fast_config)
    assert second.status is Status.PASS
    assert [os.stat(p).st_mtime_ns for p in sorted(root.rglob("*.so"))] == mtimes  # not rebuilt


@pytest.mark.e2e
def test_triton_candidate_under_the_interpreter(monkeypatch, fast_config):
    pytest.importorskip("triton")
    from kbv.batch.evaluator import Evaluator

    monkeypatch.setenv("TRITON_INTERPRET", "1")  # inherited by the reference and candidate workers
    with Evaluator("cpu") as ev:
        v = ev.evaluate(problem("level1/5_Small_Softmax.py"), demo_candidate("softmax_triton.py"), fast_config)
    assert v.candidate.backend == "triton"
    assert v.status is Status.PASS, v.message
