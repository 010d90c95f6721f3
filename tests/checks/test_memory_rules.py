"""kbv.checks.memory_rules: a per-call leak from the worker's resident set after each timing round."""

from __future__ import annotations

from kbv.checks import memory_rules as rule
from kbv.model.records import Severity

MiB = 1 << 20


def test_memory_that_grows_by_an_output_a_call_is_a_leak():
    samples = [(10, 100 * MiB), (20, 110 * MiB), (30, 120 * MiB), (40, 130 * MiB)]
    f = rule.memory_growth(samples, output_bytes=1 * MiB)
    assert f is not None and f.check == "memory:growth" and f.severity is Severity.WARNING
    assert "1.00 MiB a call" in f.detail


def test_growth_that_levels_off_or_stays_under_the_outputs_share_is_not():
    assert rule.memory_growth([(10, 100 * MiB), (20, 150 * MiB), (30, 151 * MiB)], 1 * MiB) is None  # a cache filled
    assert rule.memory_growth([(10, 100 * MiB), (20, 101 * MiB), (30, 102 * MiB)], 8 * MiB) is None  # 1 MiB < half of 8
    assert rule.memory_growth([(10, MiB), (20, MiB + 4096), (30, MiB + 8192)], 1024) is None  # page noise
    assert rule.memory_growth([(10, 100 * MiB), (20, 90 * MiB), (30, 80 * MiB)], MiB) is None  # shrinking


def test_too_few_or_missing_readings_say_nothing():
    assert rule.memory_growth([(10, 0), (20, 50 * MiB)], MiB) is None
    assert rule.memory_growth([(10, 0), (20, None), (30, 90 * MiB)], MiB) is None
    assert rule.memory_growth([(10, 0), (10, 5 * MiB), (10, 90 * MiB)], MiB) is None
