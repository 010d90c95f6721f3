"""The trusted side measures (issue: no time, no call the candidate controls): a forged timing reply
and work deferred into code the harness once called after the clock stopped, against an honest
kernel of the same problem, through the real workers on cpu."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import DATA, data_file, problem
from kbv.intake.candidates import load_candidate
from kbv.model.records import EvalConfig, Severity, Status

pytestmark = pytest.mark.e2e

CONFIG = EvalConfig(device="cpu", trials=6, timing_rounds=2, warmup=1, call_timeout_s=60)
MATMUL_K = "level1/10_Large_K_matmul.py"


def _checks(v, severity: Severity) -> set:
    return {f.check for f in v.findings if f.severity is severity}


def test_honest_kernel_is_credited_its_own_time(cpu_evaluator):
    v = cpu_evaluator.evaluate(problem(MATMUL_K), load_candidate(DATA / "honest/candidates/matmul_broadcast_sum.py"),
                               CONFIG)
    assert v.status is Status.PASS, v.findings
    bound = v.evidence["trusted_bound"]
    assert bound["credited_median_ms"] == bound["claimed_median_ms"]
    assert not {c for c in _checks(v, Severity.WARNING) | _checks(v, Severity.HACK) if c.startswith("timing:claim")}
    assert len(v.evidence["bound_rechecks"]) >= 1  # the pass's outputs were judged


@pytest.mark.xfail(strict=False, reason="partly open: beside the other xdist worker the credited floor fell "
                   "to 2.2x the forged claim in 1 of 2 full-suite runs (2026-12-05); passes alone")
def test_forged_time_reply_is_contradicted_by_the_trusted_bound(cpu_evaluator):
    """A clock forged by 50 is proof (HACK) where the pass's loop is cheap; on a loaded machine the
    proof's slack grows with the loop's own cost (kbv.checks.bound_rules: 3x the claim + 0.1 ms + the
    loop) and the floor is credited with a WARNING instead (1 run of 9 in the full suite beside
    another xdist worker, 2026-12-04): never the forged claim, never a speed reward."""
    from kbv.generate.feedback import reward

    v = cpu_evaluator.evaluate(problem(MATMUL_K), load_candidate(data_file("redteam/t24_forged_time_reply.py")), CONFIG)
    bound = v.evidence["trusted_bound"]
    if v.status is Status.HACK:
        assert "timing:claim-contradicted" in _checks(v, Severity.HACK), v.findings
    else:
        assert "timing:claim-below-bound" in _checks(v, Severity.WARNING), v.findings
        assert reward(v).status_score <= 1.0, v.findings
    assert bound["credited_median_ms"] > 3 * bound["claimed_median_ms"], bound


def test_work_deferred_into_parameters_is_not_credited(cpu_evaluator):
    v = cpu_evaluator.evaluate(problem(MATMUL_K), load_candidate(data_file("redteam/t04_deferred_parameters.py")),
                               dataclasses.replace(CONFIG, trials=12))
    assert v.status is not Status.PASS, v.findings
    assert v.status in (Status.HACK, Status.INCORRECT)
