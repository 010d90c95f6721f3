"""compute-sanitizer's log read into reports, and their findings (kbv.checks.sanitizer_rules). The logs
below are written in the tool's documented shape (its manual's memcheck and racecheck examples)."""

from __future__ import annotations

import pytest

from kbv.checks import sanitizer_rules as sr
from kbv.model.records import Severity

MEMCHECK_OOB = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at _relu_tiles+0x1b0 in /tmp/kbv-scratch/relu.cu:42
=========     by thread (31,0,0) in block (2047,0,0)
=========     Address 0x7f2c4a000000 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f2c48000000 of size 8388608 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========     Host Frame: [0x2dfbef]
=========                in /usr/lib/x86_64-linux-gnu/libcuda.so.1
=========
========= Invalid __global__ read of size 4 bytes
=========     at 0x1b0 in _relu_tiles(float const*, float*, int)
=========     by thread (0,0,0) in block (2048,0,0)
=========     Address 0x7f2c4a000004 is out of bounds
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaDeviceSynchronize.
========= ERROR SUMMARY: 2 errors
"""

RACECHECK = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at _Z9block_sumPKfPfi+0x70 in /scratch/sum.cu:12
=========     and Read access at _Z9block_sumPKfPfi+0x90 in /scratch/sum.cu:14 [128 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""

CLEAN = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"


def test_memcheck_reports_name_the_kernel_the_access_and_the_line():
    run = sr.parse_report("memcheck", MEMCHECK_OOB)
    assert run.summary_count == 2 and run.failed is None
    assert [r.header for r in run.reports] == ["Invalid __global__ read of size 4 bytes"] * 2
    first, second = run.reports
    assert (first.kernel, first.source) == ("_relu_tiles", "/tmp/kbv-scratch/relu.cu:42")
    assert (second.kernel, second.source) == ("_relu_tiles(float const*, float*, int)", None)
    assert "Address 0x7f2c4a000000 is out of bounds" in first.describe()
    assert sr.is_memory_error(run)
    (f,) = sr.sanitizer_findings(run)
    assert f.check == "sanitize:memcheck" and f.severity is Severity.WARNING
    assert "2 memory access errors" in f.detail and "relu.cu:42" in f.detail


def test_a_race_is_a_warning_and_no_memory_error():
    run = sr.parse_report("racecheck", RACECHECK)
    assert run.summary_count == 1
    (r,) = run.reports
    assert r.source == "/scratch/sum.cu:12" and r.kernel == "_Z9block_sumPKfPfi"
    assert not sr.is_memory_error(run)
    (f,) = sr.sanitizer_findings(run)
    assert f.check == "sanitize:racecheck" and f.severity is Severity.WARNING


def test_a_clean_run_has_no_finding():
    run = sr.parse_report("memcheck", CLEAN)
    assert run.reports == () and run.summary_count == 0
    assert sr.sanitizer_findings(run) == [] and not sr.is_memory_error(run)


@pytest.mark.parametrize("text", ["", "========= COMPUTE-SANITIZER\n",
                                  "========= COMPUTE-SANITIZER\n========= Error: Target application terminated "
                                  "before first instrumented API call\n========= ERROR SUMMARY: 0 errors\n"])
def test_a_run_without_a_report_is_kbvs_failure_never_the_candidates(text):
    """No summary (the tool was stopped) or the tool's own error: ``sanitize:not-run``, no accusation."""
    run = sr.parse_report("memcheck", text)
    assert not sr.is_memory_error(run)
    (f,) = sr.sanitizer_findings(run)
    assert f.check == "sanitize:not-run" and "not the candidate's" in f.detail


def test_many_reports_are_counted_and_a_few_listed():
    text = "".join(f"========= Invalid __shared__ write of size 4 bytes\n=========     at k+0x{i:x} in a.cu:{i}\n"
                   for i in range(1, 8)) + "========= ERROR SUMMARY: 7 errors\n"
    (f,) = sr.sanitizer_findings(sr.parse_report("memcheck", text))
    assert f.detail.startswith("7 memory access errors") and "(+4 more)" in f.detail


def test_the_option_lists_tools_in_their_order_and_refuses_others():
    assert sr.parse_tools("synccheck, memcheck") == ("memcheck", "synccheck")
    for bad in ("", ","):
        with pytest.raises(ValueError, match="--sanitize takes"):
            sr.parse_tools(bad)
    with pytest.raises(ValueError, match="unknown tool\\(s\\) 'leakcheck'"):
        sr.parse_tools("memcheck,leakcheck")


def test_the_tools_own_notes_are_no_report():
    """Regression (red team): a target that exits non-zero makes compute-sanitizer write ``Error:
    process didn't terminate successfully``; read as a memcheck report it made an honest candidate
    that raised under the tool INCORRECT. Only the tools' report headers are reports."""
    text = ("========= COMPUTE-SANITIZER\n========= Error: process didn't terminate successfully\n"
            "========= Warning: something the tool says\n========= Target application returned an error\n"
            "========= ERROR SUMMARY: 0 errors\n")
    for tool in sr.TOOLS:
        run = sr.parse_report(tool, text)
        assert run.reports == () and not sr.is_memory_error(run) and sr.sanitizer_findings(run) == []
        assert "Error: process didn't terminate successfully" in run.notes


@pytest.mark.parametrize("tool,header", [
    ("memcheck", "Invalid __shared__ write of size 4 bytes"), ("memcheck", "Misaligned Shared or Local Address"),
    ("memcheck", "Warp Illegal Address"), ("memcheck", "Out-of-range Shared or Local Address"),
    ("initcheck", "Uninitialized __global__ memory read of size 4 bytes"),
    ("synccheck", "Barrier error detected. Divergent thread(s) in warp"),
    ("racecheck", "Warning: Race reported between Write access at k+0x1 in a.cu:2")])
def test_each_tools_report_headers_are_reports(tool, header):
    run = sr.parse_report(tool, f"========= {header}\n=========     at k+0x10 in a.cu:7\n========= ERROR SUMMARY: 1 error\n")
    assert [r.header for r in run.reports] == [header]


def test_a_candidate_that_raised_under_the_tool_was_not_checked():
    run = sr.parse_report("memcheck", CLEAN)
    (f,) = sr.sanitizer_findings(run, target_raised=True)
    assert f.check == "sanitize:not-run" and f.severity is Severity.WARNING and "raised under the tool" in f.detail
