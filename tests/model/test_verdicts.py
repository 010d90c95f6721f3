"""The verdict's own consistency rules (kbv.model.verdicts.Verdict.__post_init__)."""

from __future__ import annotations

import pytest

from kbv.model.findings import finding
from kbv.model.records import Severity, Status
from verdict_factory import make_verdict


def test_an_incorrect_verdict_needs_a_failed_set_or_a_memcheck_report():
    with pytest.raises(ValueError, match="INCORRECT needs"):
        make_verdict(Status.INCORRECT, findings=[finding("sanitize:racecheck", (), Severity.WARNING, "a race")])
    v = make_verdict(Status.INCORRECT, findings=[finding("sanitize:memcheck", (), Severity.WARNING, "read past")])
    assert v.status is Status.INCORRECT and all(r.passed for r in v.input_sets if not r.dropped)
    assert make_verdict(Status.INCORRECT, nominal_fail=True).status is Status.INCORRECT


def test_a_memcheck_incorrect_is_wrong_under_kbv_in_every_aggregate_and_export():
    """Red team 2026-12-05: with every set passed, the memcheck INCORRECT was counted correct under the
    kbv policy (correct_frac 1.0) and ``correctness: true`` in eval_results_hidden.json."""
    from kbv.batch.policies import policy_correct, policy_metrics
    from kbv.report.export import kernelbench_entry

    v = make_verdict(Status.INCORRECT, findings=[finding("sanitize:memcheck", (), Severity.WARNING, "read past")])
    assert v.wrong_whatever_its_outputs and v.policy_verdicts["kbv"] is False
    assert v.policy_verdicts["kbv-compat"] is True  # the paper's protocol runs no sanitizer
    assert not policy_correct(v, "kbv") and policy_metrics({"L1/1": [v]}, "kbv", "eager-tf32").correct_frac == 0.0
    assert kernelbench_entry(v, hidden=True)["correctness"] is False
    assert kernelbench_entry(v, hidden=False)["correctness"] is False
