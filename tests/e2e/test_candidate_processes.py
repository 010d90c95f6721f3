"""Processes of the candidate's kept beside its calls (kbv.checks.timing_rules.candidate_processes):
named by a WARNING, never credited; an honest worker has none."""

from __future__ import annotations

import pytest

from conftest import EXPLOITS, data_file, problem
from kbv.intake.candidates import load_candidate
from kbv.model.records import EvalConfig, Severity, Status

pytestmark = pytest.mark.e2e

CONFIG = EvalConfig(device="cpu", trials=6, timing_rounds=2, warmup=1, call_timeout_s=60)


def test_a_child_forked_at_load_is_named_and_the_honest_relu_is_not(cpu_evaluator):
    relu = problem("level1/1_Small_ReLU.py")
    v = cpu_evaluator.evaluate(relu, load_candidate(EXPLOITS / "t02_hidden_fork_idle.py"), CONFIG)
    found = [f for f in v.findings if f.check == "probe:processes"]
    assert v.status is Status.PASS and found and found[0].severity is Severity.WARNING, v.findings
    assert v.evidence["paused_cpu_ms"]["other_processes"]
    honest = cpu_evaluator.evaluate(relu, load_candidate(data_file("candidates/relu_torch.py")), CONFIG)
    assert honest.status is Status.PASS
    assert not [f for f in honest.findings if f.check == "probe:processes"], honest.findings
    assert honest.evidence["paused_cpu_ms"]["other_processes"] == []
