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
