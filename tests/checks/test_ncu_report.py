"""Nsight Compute's CSV read into per-launch figures (kbv.checks.ncu_report), on text in ncu's
``--csv --page raw`` shape: its ``==PROF==`` lines, a header, a units row, one row per launch."""

from __future__ import annotations

import pytest

from kbv.checks import ncu_report as nr

CSV = '''==PROF== Connected to process 4242 (/usr/bin/python3.12)
==PROF== Profiling "_leaky" - 0: 0%....50%....100% - 9 passes
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed","dram__throughput.avg.pct_of_peak_sustained_elapsed","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active","launch__registers_per_thread","launch__shared_mem_per_block_static","launch__shared_mem_per_block_dynamic","smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio","smsp__average_warp_latency_issue_stalled_selected.ratio","smsp__average_warp_latency_issue_stalled_wait.ratio","smsp__average_warp_latency_issue_stalled_barrier.ratio"
"","","","","","","","","","","","usecond","%","%","%","%","register/thread","Kbyte","byte","","","",""
"0","4242","python3.12","h","_leaky","1","7","(128, 1, 1)","(2048, 1, 1)","0","9.0","1,234.56","12.5","81.25","83.0","77.4","16","1.02","0","18.2","1.0","3.5","0.4"
"1","4242","python3.12","h","void at::native::vectorized_elementwise_kernel","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","3.2","n/a","5.0","","40.1","24","0","0","","","",""
'''


def test_every_launch_with_its_figures_in_ms_percent_and_bytes():
    first, second = nr.parse_csv(CSV)
    assert first.name == "_leaky" and first.duration_ms == pytest.approx(1.23456)
    assert (first.sm_pct, first.dram_pct, first.memory_pct, first.occupancy_pct) == (12.5, 81.25, 83.0, 77.4)
    assert first.registers == 16 and first.shared_bytes == 1020
    assert (first.grid, first.block) == ("(2048, 1, 1)", "(128, 1, 1)")
    # the issuing "reason" (selected) is no stall; the rest largest first
    assert first.stalls == (("long_scoreboard", 18.2), ("wait", 3.5), ("barrier", 0.4))
    assert second.sm_pct is None and second.stalls == () and second.duration_ms == pytest.approx(0.0032)


def test_no_csv_is_no_launch():
    assert nr.parse_csv("==PROF== No kernels were profiled.\n") == []


def test_summary_names_the_longest_launch():
    s = nr.summary(nr.parse_csv(CSV))
    assert s["launches"] == 2 and s["total_ms"] == pytest.approx(1.23776)
    assert s["longest"]["name"] == "_leaky"
    assert nr.summary([]) == {"launches": 0, "total_ms": None, "longest": None}


def test_a_blank_line_after_the_header_is_skipped():
    """Regression (red team): a blank row after the header raised IndexError."""
    lines = CSV.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    text = "\n".join(lines[:at + 1] + [""] + lines[at + 1:])
    assert [k.name for k in nr.parse_csv(text)] == ["_leaky", "void at::native::vectorized_elementwise_kernel"]


def test_dram_throughput_under_the_speed_of_light_sections_hopper_name():
    """ncu 2025.3 on Hopper names it ``gpu__dram_throughput`` (the H200 and H100 runs of 2026-12-05
    showed DRAM % empty for every kernel when only ``dram__throughput`` was read)."""
    (k,) = nr.parse_csv(CSV.replace('"dram__throughput.', '"gpu__dram_throughput.').split('"1","4242"')[0])
    assert k.dram_pct == 81.25
