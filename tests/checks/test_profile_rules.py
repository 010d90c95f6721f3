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
