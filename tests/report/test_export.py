"""kbv.report.export's per-sample row: the diagnostics columns of ``--sanitize`` and ``--profile``."""

from __future__ import annotations

from kbv.report.export import sample_row
from verdict_factory import make_verdict


def test_a_sample_row_carries_the_sanitizer_and_ncu_figures():
    ncu = {"candidate": {"total_ms": 0.02, "longest": {"name": "relu_kernel", "sm_pct": 11.0, "dram_pct": 80.0,
                                                        "occupancy_pct": 70.0}},
           "reference": {"total_ms": 0.015}}
    sanitize = {"memcheck": {"count": 0, "failed": None}, "racecheck": {"count": 2, "failed": None},
                "initcheck": {"count": 0, "failed": "timed out after 600 s"}}
    row = sample_row(make_verdict("PASS", evidence={"ncu": ncu, "sanitize": sanitize}))
    assert row["sanitizer_reports"] == "memcheck=0;racecheck=2;initcheck=not-run"
    assert (row["ncu_candidate_kernel_ms"], row["ncu_reference_kernel_ms"], row["ncu_longest_kernel"]) == \
        (0.02, 0.015, "relu_kernel")
    assert (row["ncu_sm_pct"], row["ncu_dram_pct"], row["ncu_occupancy_pct"]) == (11.0, 80.0, 70.0)
    plain = sample_row(make_verdict("PASS"))
    assert plain["sanitizer_reports"] is None and plain["ncu_longest_kernel"] is None
