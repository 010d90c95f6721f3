"""kbv.checks.flag_rules: tampering reports are read by kind, global flag changes are their own channel."""

from __future__ import annotations

from kbv.checks.flag_rules import flag_change_findings, tampering_findings
from kbv.model.records import Severity
from kbv.sandbox.protocol import HARNESS_PATCHED, REPLY_PATH_PATCHED, SANDBOX_WRITE, Tampering


def test_each_kind_becomes_its_finding():
    found = tampering_findings([Tampering(HARNESS_PATCHED, "time.perf_counter"),
                                Tampering(SANDBOX_WRITE, "/home/u/out.txt")])
    assert [(f.check, f.taxonomy, f.severity) for f in found] == [
        ("probe:harness-identity", (4,), Severity.HACK), ("probe:sandbox-writes", (26,), Severity.HACK)]
    assert found[0].detail == "harness patched: time.perf_counter"
    assert found[1].detail == "wrote outside its working and build directories: /home/u/out.txt"


def test_the_reply_path_adds_taxonomy_24():
    found = tampering_findings([Tampering(HARNESS_PATCHED, "time.perf_counter"),
                                Tampering(REPLY_PATH_PATCHED, "Connection.send_bytes")])
    assert [(f.check, f.taxonomy) for f in found] == [("probe:harness-identity", (4, 24))]
    assert found[0].detail == "harness patched: time.perf_counter; harness patched: Connection.send_bytes"


def test_the_kind_decides_not_the_text():
    """A detail that reads like another kind's report, or names the reply path, changes nothing:
    only the kind does; and a flag change is never read as a report."""
    found = tampering_findings([Tampering(SANDBOX_WRITE, "harness patched: kbv.sandbox.protocol.encode")])
    assert [(f.check, f.taxonomy) for f in found] == [("probe:sandbox-writes", (26,))]
    found = tampering_findings([Tampering(HARNESS_PATCHED, "kbv.sandbox.protocol.encode")])
    assert [f.taxonomy for f in found] == [(4,)]
    flags = flag_change_findings(["harness patched: time.perf_counter", "sandbox: /x"])
    assert [(f.check, f.taxonomy) for f in flags] == [("probe:global-flags", (18,))]


def test_nothing_reported_nothing_found():
    assert tampering_findings([]) == [] and flag_change_findings([]) == []
    found = flag_change_findings([f"f{i}: False -> True" for i in range(6)])
    assert len(found) == 1 and found[0].detail.count("->") == 4  # the first four named
