"""kbv.checks.memory_growth_rules: a per-call leak from the trusted side's samples of what the candidate
worker's tree holds (device bytes on cuda, the resident set on both devices)."""

from __future__ import annotations

from kbv.checks import memory_growth_rules as rule
from kbv.checks.memory_growth_rules import GrowthSeries
from kbv.model.records import Severity
from kbv.sandbox.timed import HOLD_CALLS

MiB = 1 << 20
CALLS = (17, 34, 51, 68, 85)  # after each of five rounds


def series(bytes_, source="nvml", output_bytes=MiB, held_bytes=128 * MiB, calls=CALLS):
    return GrowthSeries(tuple(zip(calls, bytes_)), source, output_bytes, held_bytes)


def test_device_memory_that_grows_by_8_mib_a_call_is_a_leak_with_its_rate():
    f = rule.memory_growth(series([600 * MiB + c * 8 * MiB for c in CALLS]))
    assert f is not None and f.check == "memory:growth" and f.severity is Severity.WARNING and f.taxonomy == ()
    assert "8.00 MiB a call" in f.detail and "NVML" in f.detail
    assert rule.late_rate(series([600 * MiB + c * 8 * MiB for c in CALLS])) == 8 * MiB


def test_a_caching_allocator_that_grows_then_levels_off_is_not():
    # segments reserved while it warms up (a 200 MiB step, then one more 20 MiB segment): flat after
    assert rule.memory_growth(series([600 * MiB, 800 * MiB, 820 * MiB, 820 * MiB, 820 * MiB])) is None
    # steps of whole 20 MiB segments through the later half: within the granularity and held outputs
    assert rule.memory_growth(series([600 * MiB, 600 * MiB, 620 * MiB, 640 * MiB, 640 * MiB])) is None


def test_kbvs_held_outputs_are_not_a_leak_however_they_fall():
    # the worker keeps up to HOLD_CALLS earlier outputs alive at random: they can all appear late
    out = 16 * MiB
    held = rule.held_allowance(out, 128 * MiB)
    assert held == HOLD_CALLS * out + out
    assert rule.memory_growth(series([600 * MiB, 600 * MiB, 600 * MiB, 600 * MiB + held, 600 * MiB + held],
                                     output_bytes=out)) is None
    # capped by EvalConfig.held_output_bytes: earlier outputs are dropped past it
    assert rule.held_allowance(64 * MiB, 128 * MiB) == 128 * MiB + 64 * MiB
    # the same growth with outputs of 1 KiB is more than held outputs explain
    assert rule.memory_growth(series([600 * MiB, 600 * MiB, 600 * MiB, 600 * MiB + held, 600 * MiB + held + 64 * MiB],
                                     output_bytes=1024)) is not None


def test_memory_given_back_and_taken_again_is_not_growth():
    assert rule.memory_growth(series([600 * MiB, 900 * MiB, 600 * MiB, 800 * MiB, 900 * MiB])) is None


def test_a_small_leak_in_host_memory_is_found_under_the_resident_sets_own_floor():
    # 128 KiB a call (one small output kept per call), over 34 calls: 4.3 MiB past 1.1 MiB of held outputs
    grow = [300 * MiB + c * (128 << 10) for c in CALLS]
    f = rule.memory_growth(series(grow, source="proc", output_bytes=128 << 10))
    assert f is not None and "VmRSS" in f.detail
    # the same on the device is within one allocator segment: not a finding there
    assert rule.memory_growth(series(grow, source="nvml", output_bytes=128 << 10)) is None
    # page-level noise (4 KiB a call) never is
    assert rule.memory_growth(series([300 * MiB + c * 4096 for c in CALLS], source="proc", output_bytes=0)) is None


def test_too_few_failed_or_unordered_samples_say_nothing():
    assert rule.memory_growth(series([0, 500 * MiB], calls=(0, 20))) is None
    assert rule.memory_growth(series([0, None, 900 * MiB], calls=(0, 20, 40))) is None
    assert rule.memory_growth(series([0, 400 * MiB, 900 * MiB], calls=(0, 20, 20))) is None
    assert rule.late_rate(series([0, 500 * MiB], calls=(0, 20))) is None


def test_the_evidence_and_the_judgement_of_both_series():
    dev = [(c, 600 * MiB + c * 8 * MiB) for c in CALLS]
    host = [(c, 300 * MiB) for c in CALLS]
    record, found = rule.judge(host, dev, "nvml", MiB, 128 * MiB)
    assert record["source"] == "nvml" and record["samples"] == [list(s) for s in dev]
    assert record["rate_bytes_per_call"] == 8 * MiB
    assert record["host"] == {"samples": [list(s) for s in host], "source": "proc", "rate_bytes_per_call": 0.0}
    assert [f.check for f in found] == ["memory:growth"]
    # cpu, or cuda without a device reading: the host series alone, and why
    record, found = rule.judge(host, [], None, MiB, 128 * MiB, note="nvidia-ml-py is not installed")
    assert record["source"] == "proc" and "host" not in record and found == []
    assert record["device_note"] == "nvidia-ml-py is not installed"
