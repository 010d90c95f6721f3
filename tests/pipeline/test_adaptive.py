"""The adaptive stop of the timing rounds (kbv.pipeline.adaptive) and the speedup intervals it
judges (kbv.model.intervals), on recorded per-call samples: no worker, no torch."""

from __future__ import annotations

import statistics

import pytest

from kbv.model.intervals import interval_seed, ratio_interval, relative_half_width
from kbv.pipeline.adaptive import StopRule, decide, evidence, half_widths

#: recorded on the 2-core development machine under load (kbv eval, 1_Small_ReLU, torch.clamp_min
#: candidate, --trials 30): per-call ms of the candidate and eager-fp32, one list per subject.
CPU_CAND = [0.1508, 0.1567, 0.1227, 0.1629, 0.1428, 0.193, 0.1682, 0.1542, 0.1507, 0.1956, 0.1778, 0.1342, 0.1741,
            0.1763, 0.1463, 0.1058, 0.1488, 0.1911, 0.1783, 0.2115, 0.1785, 0.1769, 0.1192, 0.1758, 0.1813, 0.1134,
            0.1401, 0.1435, 0.1439, 0.108]
CPU_FP32 = [0.1561, 0.0421, 0.0374, 0.0362, 0.0374, 0.0361, 0.0337, 0.0343, 0.0335, 0.0316, 0.1441, 0.0544, 0.0447,
            0.0455, 0.0471, 0.0442, 0.043, 0.1375, 0.0491, 0.043, 0.1292, 0.0457, 0.2062, 0.0556, 0.0351, 0.0355,
            0.0317, 0.031, 0.0302, 0.0304]
#: the shape of an H200 run of a ~50 us kernel (docs/gpu-runs.md: tight, a few slow outliers).
GPU_CAND = [0.0502, 0.0499, 0.0501, 0.0503, 0.0500, 0.0498, 0.0512, 0.0501, 0.0500, 0.0499] * 3
GPU_FP32 = [0.1201, 0.1199, 0.1203, 0.1198, 0.1200, 0.1202, 0.1250, 0.1200, 0.1199, 0.1201] * 3
P, C = "p" * 64, "c" * 64


def test_interval_brackets_the_ratio_of_medians_and_is_reproducible():
    seed = interval_seed(P, C, "eager-fp32")
    lo, hi = ratio_interval(CPU_FP32, CPU_CAND, seed)
    point = statistics.median(CPU_FP32) / statistics.median(CPU_CAND)
    assert lo <= point <= hi
    assert ratio_interval(CPU_FP32, CPU_CAND, seed) == (lo, hi)
    assert relative_half_width(CPU_FP32, CPU_CAND, seed) == pytest.approx((hi - lo) / 2 / point)
    with pytest.raises(ValueError):
        ratio_interval([], CPU_CAND, seed)


def test_noisy_cpu_samples_are_wide_and_tight_gpu_samples_are_narrow():
    wide = half_widths({"candidate": CPU_CAND, "eager-fp32": CPU_FP32}, ["eager-fp32"], P, C)
    narrow = half_widths({"candidate": GPU_CAND, "eager-fp32": GPU_FP32}, ["eager-fp32"], P, C)
    assert wide["eager-fp32"] > 0.05 > narrow["eager-fp32"]
    assert half_widths({"candidate": GPU_CAND}, ["eager-fp32"], P, C) == {}  # baseline not timed
    assert half_widths({"candidate": GPU_CAND[:-1] + [0.0], "eager-fp32": GPU_FP32}, ["eager-fp32"], P, C) == {}


def test_the_stop_agrees_with_the_interval_the_verdict_records():
    """Same samples, same seed: the width the stop judged is the recorded interval's width, less the
    rerun floor the recorded one adds (which no further round narrows)."""
    from kbv.batch.metrics import speedup_interval
    from kbv.model.intervals import interval_seed, ratio_interval
    from tests.verdict_factory import make_verdict
    from kbv.model.records import Measurement
    import dataclasses

    v = make_verdict("PASS", speedup={"eager-fp32": 1.0})
    v = dataclasses.replace(v, timing={"candidate": Measurement("candidate", "cuda", tuple(CPU_CAND), 5),
                                       "eager-fp32": Measurement("eager-fp32", "cuda", tuple(CPU_FP32), 5)},
                            speedup={"eager-fp32": statistics.median(CPU_FP32) / statistics.median(CPU_CAND)})
    lo, hi = speedup_interval(v, "eager-fp32")
    f_lo, f_hi = ratio_interval(CPU_FP32, CPU_CAND, interval_seed(v.problem.sha256, v.candidate.sha256, "eager-fp32"))
    assert lo <= f_lo and hi >= f_hi and hi - lo > f_hi - f_lo
    lo, hi = f_lo, f_hi
    w = half_widths({"candidate": CPU_CAND, "eager-fp32": CPU_FP32}, ["eager-fp32"], v.problem.sha256,
                    v.candidate.sha256)["eager-fp32"]
    assert w == pytest.approx((hi - lo) / 2 / v.speedup["eager-fp32"])


RULE = StopRule(target=0.05, planned_rounds=3, max_rounds=12, budget_s=30.0)


def test_the_planned_rounds_always_run():
    assert decide(RULE, 2, 100.0, 50.0, {"eager-fp32": 0.0}) is None
    assert decide(StopRule(0.0, 3, 12, 30.0), 3, 1.0, 0.1, {"eager-fp32": 0.5}) == "fixed"
    assert decide(RULE, 3, 1.0, 0.1, {}) == "fixed"  # nothing to judge


@pytest.mark.parametrize("rounds, elapsed, last, width, reason", [
    (3, 1.0, 0.1, 0.04, "interval"),
    (3, 1.0, 0.1, 0.05, "interval"),  # at the target is narrow enough
    (12, 1.0, 0.1, 0.2, "rounds"),
    (5, 29.5, 1.0, 0.2, "budget"),  # another round would end past 30 s
    (5, 28.0, 1.0, 0.2, None),
])
def test_each_reason(rounds, elapsed, last, width, reason):
    assert decide(RULE, rounds, elapsed, last, {"eager-fp32": 0.01, "eager-tf32": width}) == reason


def test_no_budget_means_only_the_round_cap():
    assert decide(StopRule(0.05, 3, 12, 0.0), 11, 1e6, 1e6, {"x": 0.5}) is None


def _simulate(cand: list, base: list, rule: StopRule, per_round: int, round_s: float) -> tuple[str, int, dict]:
    """The timing stage's loop on recorded samples: round r adds samples r*k..(r+1)*k of each list
    (cycling), until decide() stops it."""
    samples: dict[str, list] = {"candidate": [], "eager-fp32": []}
    r = 0
    while True:
        for name, src in (("candidate", cand), ("eager-fp32", base)):
            samples[name] += [src[(r * per_round + i) % len(src)] for i in range(per_round)]
        r += 1
        widths = half_widths(samples, ["eager-fp32"], P, C)
        reason = decide(rule, r, r * round_s, round_s, widths)
        if reason:
            return reason, r, widths


def test_recorded_runs_stop_for_the_reason_their_samples_give():
    reason, rounds, widths = _simulate(GPU_CAND, GPU_FP32, RULE, 10, 0.2)
    assert (reason, rounds) == ("interval", 3) and widths["eager-fp32"] <= 0.05
    reason, rounds, widths = _simulate(CPU_CAND, CPU_FP32, RULE, 10, 0.2)
    assert reason in ("interval", "rounds") and rounds > 3  # the noisy run needed more rounds
    if reason == "interval":
        assert widths["eager-fp32"] <= 0.05
    reason, rounds, _ = _simulate(CPU_CAND, CPU_FP32, StopRule(0.001, 3, 12, 1.0), 10, 0.2)
    assert (reason, rounds) == ("budget", 5)  # 5 rounds of 0.2 s: a 6th would end past 1 s
    ev = evidence(reason, RULE, rounds, 1.0, {"eager-fp32": 0.123456789})
    assert ev["reason"] == "budget" and ev["half_width"] == {"eager-fp32": 0.12346} and ev["planned_rounds"] == 3
