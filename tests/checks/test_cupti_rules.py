"""kbv.checks.cupti_rules: the candidate's kernel time under CUPTI beside its CUDA-event median."""

from __future__ import annotations

import math

from kbv.checks import cupti_rules as rule
from kbv.model.records import Severity


def test_events_that_cover_the_kernels_agree():
    assert rule.cupti_disagrees(0.100, 0.130) is None  # the events add the launch
    assert rule.cupti_disagrees(0.100, 0.095) is None  # a little faster than the profile: its clock
    assert rule.cupti_disagrees(0.100, 0.045) is None  # half the kernels' time less 10 µs still passes


def test_events_well_under_the_kernels_time_disagree_as_a_warning():
    f = rule.cupti_disagrees(1.0, 0.2)
    assert f is not None and f.check == "timing:cupti-disagrees" and f.severity is Severity.WARNING
    assert f.taxonomy == () and "0.2 ms" in f.detail and "1 ms" in f.detail


def test_kernels_of_a_few_microseconds_are_left_to_the_cover():
    assert rule.cupti_disagrees(0.015, 0.001) is None  # 15 µs of kernels: under the 10 µs cover's reach
    assert rule.cupti_disagrees(0.030, 0.001) is not None


def test_missing_or_malformed_figures_say_nothing():
    assert rule.cupti_disagrees(None, 0.1) is None and rule.cupti_disagrees(1.0, None) is None
    assert rule.cupti_disagrees(math.nan, 0.1) is None and rule.cupti_disagrees(1.0, -1.0) is None
    assert rule.evidence(None, 0.5) is None and rule.evidence("12", 0.5) is None and rule.evidence(True, 0.5) is None
    assert rule.evidence(250.0, 0.5) == {"kernel_ms_per_call": 0.25, "event_median_ms": 0.5}
    assert rule.evidence(250, None) == {"kernel_ms_per_call": 0.25, "event_median_ms": None}
