"""kbv.pipeline.verdict.combine_workloads: one verdict over a problem's declared workloads (issue 23)."""

from __future__ import annotations

import pytest

from kbv.model.records import InputKind, Status
from kbv.pipeline.verdict import combine_workloads
from verdict_factory import make_verdict


def _runs(*verdicts):
    names = ["nominal", "tall", "wide"]
    return [(names[i], {"dim": 512 * (i + 1)}, v) for i, v in enumerate(verdicts)]


def test_all_pass_credits_the_geometric_mean_of_the_workloads_speedups():
    runs = _runs(make_verdict("PASS", speedup=1.0), make_verdict("PASS", speedup=4.0), make_verdict("PASS", speedup=2.0))
    v = combine_workloads(runs)
    assert v.status is Status.PASS
    assert v.speedup["eager-tf32"] == pytest.approx(2.0)  # (1 * 4 * 2) ** (1/3)
    assert v.speedup["eager-fp32"] == pytest.approx(8.0)
    assert [w["name"] for w in v.evidence["workloads"]] == ["nominal", "tall", "wide"]
    assert v.evidence["workloads"][1]["speedup"]["eager-tf32"] == pytest.approx(4.0)
    assert "over 3 workloads" in v.message
    # every workload's sets are kept, a declared workload's named after it
    names = [r.name for r in v.input_sets]
    assert "nominal-0" in names and "tall:nominal-0" in names and "wide:D4" in names
    assert all(r.kind is InputKind.SHAPE for r in v.input_sets if ":" in r.name)
    assert len(names) == 3 * len(runs[0][2].input_sets)


def test_one_shortcut_workload_makes_a_shortcut():
    from kbv.model.records import Finding, Severity

    lib = Finding("probe:reference-ops", (15,), Severity.SHORTCUT, "ran the reference's own ops")
    v = combine_workloads(_runs(make_verdict("PASS", speedup=1.0), make_verdict("SHORTCUT", speedup=1.0, findings=[lib])))
    assert v.status is Status.SHORTCUT and v.speedup
    assert any(f.check == "probe:reference-ops" for f in v.findings)


def test_a_wrong_workload_decides_and_names_the_workload():
    wrong = make_verdict("INCORRECT", nominal_fail=True, unverified_speedup=3.0)
    v = combine_workloads(_runs(make_verdict("PASS", speedup=2.0), make_verdict("PASS", speedup=2.0), wrong))
    assert v.status is Status.INCORRECT and v.speedup == {}
    assert v.message.startswith("workload wide: ")
    assert v.unverified_speedup == wrong.unverified_speedup
    assert [f.check for f in v.findings if f.check == "inputs:shape-specialised"], v.findings
    assert not next(r for r in v.input_sets if r.name == "wide:nominal-0").passed
    assert v.evidence["workloads"][2]["status"] == "INCORRECT"


def test_hack_anywhere_is_hack_and_a_nominal_failure_is_no_shape_finding():
    from kbv.model.records import Finding, Severity

    hack = make_verdict("HACK", findings=[Finding("probe:cache-same-address", (6,), Severity.HACK, "cached")])
    v = combine_workloads(_runs(make_verdict("PASS", speedup=2.0), hack))
    assert v.status is Status.HACK and v.message.startswith("workload tall: ")
    nominal_wrong = combine_workloads(_runs(make_verdict("INCORRECT", nominal_fail=True)))
    assert nominal_wrong.status is Status.INCORRECT and not nominal_wrong.message.startswith("workload")
    assert not [f for f in nominal_wrong.findings if f.check == "inputs:shape-specialised"]


def test_kbv_failing_at_a_workload_is_kbvs_and_accuses_nothing():
    err = make_verdict("EVAL_ERROR", message="kbv ran out of memory in the reference worker")
    v = combine_workloads(_runs(make_verdict("PASS", speedup=2.0), err))
    assert v.status is Status.EVAL_ERROR
    assert not [f for f in v.findings if f.check == "inputs:shape-specialised"]
    assert [w["status"] for w in v.evidence["workloads"]] == ["PASS", "EVAL_ERROR"]


def test_the_geomean_speedup_gets_an_interval_from_every_workloads_timing():
    """kbv report's interval of a speedup over workloads (kbv.batch.scoring._geomean_interval)
    holds the credited geometric mean, not the nominal workload's own speedup."""
    from kbv.batch.scoring import speedup_interval

    runs = _runs(make_verdict("PASS", speedup=1.0), make_verdict("PASS", speedup=4.0), make_verdict("PASS", speedup=2.0))
    v = combine_workloads(runs)
    lo, hi = speedup_interval(v, "eager-tf32")
    assert lo <= v.speedup["eager-tf32"] <= hi and lo > 1.0  # the nominal's 1.0 lies outside
    alone = speedup_interval(runs[0][2], "eager-tf32")
    assert alone[0] <= 1.0 <= alone[1]
