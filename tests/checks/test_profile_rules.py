"""kbv.checks.profile_rules: the kernel profile's and the work share's findings."""

from kbv.checks import profile_rules
from kbv.model.records import Severity


def test_the_work_share_finding_names_the_ops_as_the_reference_s_not_the_candidate_s():
    """A candidate that wrote ``linear`` as ``mm`` + ``add`` is matched to the reference's ``linear``:
    the text says whose ops it lists (a newcomer read them as ops the candidate called)."""
    f = profile_rules.reference_work(0.93, ["aten.linear", "aten.mul"])
    assert f.severity is Severity.SHORTCUT and f.check == "probe:reference-ops" and f.taxonomy == (15,)
    assert "the work of the reference's ops aten.linear, aten.mul" in f.detail, f.detail
    assert "same family on the same sizes" in f.detail and "93%" in f.detail, f.detail


def test_the_reference_ops_finding_names_the_candidates_ops_where_they_differ():
    """A GEMM written as ``mm`` + ``add`` covers the reference's ``addmm`` (one family): the text
    says which of the candidate's ops were counted for it (a newcomer read "ran aten.addmm" as a
    false statement about a file that never calls it); the same names are not repeated."""
    from kbv.checks.op_coverage import covering_ops

    as_ops = covering_ops({"aten.addmm": 1}, {"aten.mm": 1, "aten.add": 1})
    assert as_ops == ["aten.mm"]
    f = profile_rules.reference_ops(["aten.addmm"], False, as_ops)
    assert f.detail.endswith("aten.addmm (as aten.mm: ops of the same family, as often)"), f.detail
    same = profile_rules.reference_ops(["aten.relu"], False, covering_ops({"aten.relu": 1}, {"aten.relu": 1}))
    assert same.detail.endswith("ops: aten.relu"), same.detail
    assert covering_ops({"aten.mm": 1}, None) == []
