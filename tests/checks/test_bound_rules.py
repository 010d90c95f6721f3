"""The trusted bound on the candidate's time (kbv.checks.bound_rules) and the dispatcher-free output copy
(kbv.sandbox.rawcopy): pure rules on made-up figures, and copies checked element by element."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from kbv.checks import bound_rules as rule
from kbv.checks import bound_plan
from kbv.model.records import Severity
from kbv.sandbox import rawcopy


def _pass(**kw) -> rule.BoundPass:
    base = dict(wall_ms=102.0, calls=51, null_ms=0.5, baseline_floor_ms={"eager-fp32": 1.0})
    base.update(kw)
    return rule.BoundPass(**base)


def test_wall_floor_takes_off_the_allowance_the_null_loop_and_the_margin():
    p = _pass()
    # (102 - 2) / 51 - 0.5 = 1.4608; baseline at its rounds' median: no disturbance
    assert rule.floor_ms(p, {"eager-fp32": 1.0}) == pytest.approx((100 / 51 - 0.5) * (1 - rule.BOUND_MARGIN))


def test_a_disturbed_pass_scales_the_wall_floor_down_by_the_baselines_slowdown():
    p = _pass(baseline_floor_ms={"eager-fp32": 3.0, "eager-tf32": 3.0})
    assert rule.disturbance(p, {"eager-fp32": 1.0, "eager-tf32": 1.0}) == 3.0
    # cuda: whole calls over whole calls, (0.5 + 3) / (0.5 + 1), then the null loop taken off
    slow = (0.5 + 3.0) / (0.5 + 1.0)
    assert rule.floor_ms(p, {"eager-fp32": 1.0, "eager-tf32": 1.0}) == pytest.approx(
        (100 / 51 / slow - 0.5) * (1 - rule.BOUND_MARGIN))
    # a pass quicker than the rounds never raises the floor
    assert rule.disturbance(_pass(baseline_floor_ms={"eager-fp32": 0.5}), {"eager-fp32": 1.0}) == 1.0


def test_a_pass_whose_loop_charges_the_baseline_more_scales_the_cpu_floor_down():
    # eager-fp32's loop in the pass: 5 ms busiest-thread CPU per call against a 1 ms median
    p = _pass(busiest_thread_ms=52.0, all_threads_ms=60.0, null_cpu_ms=0.1, null_all_cpu_ms=0.2, cores=2,
              baseline_cpu_ms={"eager-fp32": (5.2, 5.4)})
    assert rule.disturbance(p, {"eager-fp32": 1.0}, cpu=True) == pytest.approx(5.0)
    assert rule.floor_ms(p, {"eager-fp32": 1.0}) == pytest.approx(((50 / 51) - 0.2) / 5 * (1 - rule.BOUND_MARGIN))


def test_cpu_floor_is_the_busiest_thread_or_all_threads_over_the_cores():
    p = _pass(busiest_thread_ms=52.0, all_threads_ms=80.0, null_cpu_ms=0.1, null_all_cpu_ms=0.2, cores=2)
    assert rule.floor_ms(p, {}) == pytest.approx(((52 - 2) / 51 - 0.2) * (1 - rule.BOUND_MARGIN))
    spread = _pass(busiest_thread_ms=10.0, all_threads_ms=200.0, null_cpu_ms=0.1, null_all_cpu_ms=0.2, cores=2)
    assert rule.floor_ms(spread, {}) == pytest.approx(((198 / 51) - 0.2) / 2 * (1 - rule.BOUND_MARGIN))


def test_figures_that_allow_nothing_give_a_zero_floor():
    assert rule.floor_ms(_pass(wall_ms=1.0), {}) == 0.0
    assert rule.floor_ms(_pass(calls=0), {}) == 0.0
    assert rule.floor_ms(_pass(wall_ms=float("nan")), {}) == 0.0


def test_a_claim_at_or_over_the_floor_is_credited_as_it_is():
    d = rule.decide(2.0, [1.5], "cpu")
    assert d.credited_ms == 2.0 and d.finding is None


def test_a_claim_under_the_floor_is_credited_the_floor_with_a_warning():
    d = rule.decide(0.2, [1.4], "cuda")
    assert d.credited_ms == 1.4 and d.finding.severity is Severity.WARNING
    assert d.finding.check == "timing:claim-below-bound"
    # an honest 4096^2 ReLU on the H200: a host-bound floor of 7x its 0.03 ms events is no contradiction
    assert rule.decide(0.03, [0.21], "cuda").finding is None


def test_on_cpu_two_floors_over_the_claim_credit_the_lesser_with_a_warning():
    # red-team e01: a ReLU's clock forged to a fixed 0.010 ms, floors 0.025 and 0.021 ms
    d = rule.decide(0.010, [0.025, 0.021], "cpu", [0.0, 0.0], loop_ms=0.02)
    assert d.credited_ms == 0.021 and d.finding.severity is Severity.WARNING
    assert "lesser CPU-time floor" in d.finding.detail
    # one pass is no confirmation; nor a second under the claim; honest claims over their floors
    assert rule.decide(0.010, [0.025], "cpu").finding is None
    assert rule.decide(0.010, [0.025, 0.009], "cpu").finding is None
    assert rule.decide(0.1124, [0.021, 0.019], "cpu", loop_ms=0.07).finding is None
    # under FLOOR_RATIO x the claim the floor is noise, whatever the loop's cost; within half the
    # loop's cost of the claim too, where that is less
    assert rule.FLOOR_RATIO == 2.0
    assert rule.decide(0.010, [0.019, 0.018], "cpu", loop_ms=0.04).finding is None
    assert rule.decide(0.010, [0.016, 0.0155], "cpu", loop_ms=0.012).finding is None
    assert rule.decide(0.010, [0.017, 0.0165], "cpu", loop_ms=0.012).finding is not None
    assert rule.floor_cap(0.010, [0.025, 0.021], 0.02) == 0.021
    assert rule.floor_cap(0.010, [0.019, 0.018], 0.04) == 0.0
    # a red-team helper's ReLU whose clock ran 25x slow (2026-12-06): claim 0.0046 ms, floor 0.012 ms
    assert rule.floor_cap(0.0046, [0.0122, 0.0120], 0.113) == 0.012
    # a large call: a clock forged by 3.5 is credited the floor
    d = rule.decide(1.0, [3.0, 2.9], "cpu")
    assert d.credited_ms == 2.9 and d.finding.severity is Severity.WARNING


def test_on_cpu_a_wall_floor_two_passes_repeat_is_credited_never_proof():
    # work on threads that ended inside the request: the CPU floor sees half of it, the wall all of it
    d = rule.decide(1.0, [1.2, 1.2], "cpu", [3.0, 3.5])
    assert d.credited_ms == 3.0 and d.finding.severity is Severity.WARNING and "wall" in d.finding.detail
    # an honest kernel on a loaded machine: two walls inflated under twice the claim (plus slack) count for nothing
    assert rule.decide(0.38, [0.27, 0.27], "cpu", [1.0, 1.05]).finding is None
    # one pass's wall floor (a busy machine's waits, maybe) counts for nothing
    assert rule.decide(1.0, [0.9], "cpu", [3.4]).finding is None
    # nor a wall within CPU_CAP_SLACK_MS of the claim
    assert rule.decide(1.0, [0.9, 0.9], "cpu", [1.2, 1.25]).finding is None
    # two passes whose wall floors are far over the claim are no HACK
    assert rule.decide(1.0, [0.9, 0.9], "cpu", [9.0, 9.0]).finding.severity is Severity.WARNING


def test_on_cpu_the_slack_grows_with_the_pass_loops_own_cost():
    # a candidate returning its input (0.005 ms) whose floor is the loop's noise: 0.8 ms against a
    # loop of 2.5 ms a call whose two passes' null loops were 3 ms apart
    assert rule.decide(0.005, [0.8, 0.8], "cpu", [0.9, 0.9], loop_ms=2.5, noise_ms=3.0).finding is None
    assert rule.decide(0.005, [0.8, 0.8], "cpu", [0.9, 0.9]).finding is not None
    assert not rule.needs_another_pass(1.0, [0.5], [3.2], "cpu", loop_ms=1.0)
    assert rule.needs_another_pass(1.0, [0.5], [3.4], "cpu", loop_ms=1.0)
    assert not rule.needs_another_pass(0.005, [0.8], [0.0], "cpu", loop_ms=2.5, noise_ms=3.0)


def test_on_cpu_quiet_passes_bound_a_short_call_by_ratio_under_the_loops_share():
    # t24-forged-fixed-claim's figures: a 10 us ReLU claimed at 1 us, floor 10.5 us, a loop of 0.088
    # ms a call (its share, 0.044 ms, is over the floor) and quiet passes (3 us apart)
    assert rule.needs_another_pass(0.001, [0.0105], [0.0], "cpu", loop_ms=0.088, noise_ms=0.003)
    d = rule.decide(0.001, [0.0105, 0.012], "cpu", [0.0, 0.0], loop_ms=0.088, noise_ms=0.003)
    assert d.finding is not None and d.finding.severity is Severity.WARNING and d.credited_ms == 0.0105
    # the same floors under noisy passes are no bound; nor floors under twice the claim
    assert rule.decide(0.001, [0.0105, 0.012], "cpu", loop_ms=0.088, noise_ms=0.02).finding is None
    assert rule.decide(0.007, [0.012, 0.013], "cpu", loop_ms=0.088).finding is None
    assert rule.decide(0.005, [0.012, 0.013], "cpu", loop_ms=0.088).credited_ms == 0.012
    # an honest claim at 0.76x its floor (the most 37 honest kernels showed) is never bounded
    assert rule.decide(0.05, [0.038, 0.038], "cpu", loop_ms=0.0).finding is None


def test_floor_noise_is_the_baselines_excess_and_the_null_loops_spread():
    a = _pass(null_cpu_ms=0.07, null_all_cpu_ms=0.068,
              baseline_cpu_ms={"eager-fp32": (0.081, 0.075)}, busiest_thread_ms=1.0, all_threads_ms=1.0)
    b = dataclasses.replace(a, null_cpu_ms=0.075, null_all_cpu_ms=0.069)
    # one pass, its baseline's floor (0.081 - 0.07 = 0.011) under its median: no noise
    assert rule.floor_noise_ms([a], {"eager-fp32": 0.03}) == 0.0
    # its median under its floor by 0.006 ms
    assert rule.floor_noise_ms([a], {"eager-fp32": 0.005}) == pytest.approx(0.006)
    # two passes: the null loops 0.005 ms apart
    assert rule.floor_noise_ms([a, b], {"eager-fp32": 0.03}) == pytest.approx(0.005)


def test_a_second_pass_follows_a_contradiction_or_a_cpu_wall_over_the_claim():
    assert rule.needs_another_pass(1.0, [4.0], [0.0], "cpu")
    assert rule.needs_another_pass(1.0, [0.5], [2.4], "cpu")
    assert not rule.needs_another_pass(1.0, [0.5], [2.2], "cpu")
    assert not rule.needs_another_pass(1.0, [4.0, 4.0], [0.0, 0.0], "cpu")  # two at most on cpu


def test_on_cuda_passes_repeat_while_every_floor_is_far_over_the_claim():
    # far over: 3 x 1.0 + 0.5 ms, plus 6 ms per GiB of one call's bytes
    assert not rule.needs_another_pass(1.0, [3.4], [3.4], "cuda")
    assert rule.needs_another_pass(1.0, [3.6], [3.6], "cuda")
    assert not rule.needs_another_pass(1.0, [3.6], [3.6], "cuda", call_bytes=2**30)
    # a quiet pass under it ends the repeats: the least floor is then not credited
    assert not rule.needs_another_pass(1.0, [30.0, 1.1], [30.0, 1.1], "cuda")
    assert rule.needs_another_pass(1.0, [30.0, 20.0], [30.0, 20.0], "cuda")
    assert not rule.needs_another_pass(1.0, [30.0, 20.0, 25.0], [0, 0, 0], "cuda")  # three at most
    assert rule.decide(1.0, [30.0, 1.1], "cuda").credited_ms == 1.0
    assert rule.decide(1.0, [30.0, 20.0, 25.0], "cuda").credited_ms == 20.0


def test_on_cuda_a_disturbed_null_loop_does_not_turn_the_baselines_ratio_around():
    # the baselines' walls at their medians plus the null loop: no slowdown, whatever the null loop paid
    p = _pass(wall_ms=32.0, calls=1, null_ms=0.1, baseline_floor_ms={"eager-fp32": 20.0, "eager-tf32": 5.0})
    assert rule.wall_disturbance(p, {"eager-fp32": 20.0, "eager-tf32": 5.0}) == pytest.approx(1.0)
    assert rule.floor_ms(p, {"eager-fp32": 20.0, "eager-tf32": 5.0}) == pytest.approx((30.0 - 0.1) * 0.6)


def test_on_cpu_a_short_call_under_two_floors_is_credited_the_floor_with_a_warning():
    # t24-forged-small-kernel's figures: a 10 us call claimed at 1.2 us, floors 11.5 and 20 us, all
    # under the absolute slacks (0.1 ms + the loop's cost)
    d = rule.decide(0.0012, [0.0115, 0.0204], "cpu", [0.02, 0.03], loop_ms=0.008)
    assert d.finding is not None and d.finding.severity is Severity.WARNING, d
    assert d.finding.check == "timing:claim-below-bound"
    assert d.credited_ms == 0.0115
    # an honest claim near its floor is credited as it is
    assert rule.decide(0.0668, [0.0636, 0.05], "cpu", [0.1, 0.1], loop_ms=0.037).finding is None
    # the first pass asks for the second on cpu, a floor over the claim on cuda does not
    assert rule.needs_another_pass(0.0012, [0.0115], [0.0], "cpu", loop_ms=0.008)
    assert not rule.needs_another_pass(0.0012, [0.0115], [0.0], "cuda")


def test_wall_floor_is_the_whole_loop_over_its_slowdown_less_the_null_loop():
    # the baseline's whole call in the pass (0.5 + 1.5) against its median plus the null loop (0.5 + 0.5)
    p = _pass(baseline_floor_ms={"eager-fp32": 1.5})
    assert rule.wall_disturbance(p, {"eager-fp32": 0.5}) == pytest.approx(2.0)
    assert rule.wall_floor_ms(p, {"eager-fp32": 0.5}) == pytest.approx(100 / 51 / 2 - 0.5)
    assert rule.wall_disturbance(p, {}) == 1.0 and rule.wall_floor_ms(_pass(calls=0), {}) == 0.0


def test_bound_calls_fit_the_budget_and_the_slots():
    assert bound_plan.bound_calls(10.0, 512, "cpu") == 10
    assert bound_plan.bound_calls(1000.0, 512, "cpu") == bound_plan.MIN_BOUND_CALLS
    assert bound_plan.bound_calls(0.001, 64, "cpu") == 64
    assert bound_plan.bound_calls(1000.0, 1, "cpu") == 1


@pytest.mark.parametrize("make", [
    lambda: torch.arange(24.0).reshape(4, 6),
    lambda: torch.arange(24.0).reshape(4, 6).t(),
    lambda: torch.arange(60.0).reshape(6, 10)[1:5:2, ::3],
    lambda: torch.arange(4.0).expand(3, 4),
    lambda: torch.arange(10, dtype=torch.int64),
    lambda: torch.zeros(0, 3),
])
def test_slot_copy_and_view_give_back_every_element(make):
    t = make()
    c = rawcopy.SlotCopier(torch.device("cpu"), 4096, 3)
    entries = c.copy((t, t * 2), 2)
    a, b = rawcopy.view(c.buffer, entries)
    assert a.shape == t.shape and torch.equal(a, t) and torch.equal(b, t * 2)


def test_a_slot_buffer_written_only_in_part_still_takes_outputs_into_its_slack():
    """On cpu the slots are shared memory written up to ``touch_bytes`` when made; an output larger
    than that (a padded or wider one) lands in the slack behind it, whole."""
    c = rawcopy.SlotCopier(torch.device("cpu"), 8192, 2, touch_bytes=512)
    assert c.buffer.is_shared() and c.buffer.numel() == 2 * 8192
    t = torch.arange(1500.0)  # 6000 bytes: past the 512 bytes written when the buffer was made
    a, b = rawcopy.view(c.buffer, c.copy((t, t[:10]), 1))
    assert torch.equal(a, t) and torch.equal(b, t[:10])


def test_an_output_made_inside_the_slot_buffer_is_refused():
    """Regression (red-team helper, 2026-12-06): a candidate found the slot buffer in its memory map
    and computed each output in its own slot, so the copy was a no-op the trusted null loop still
    subtracted (a lower bound-pass floor). An output anywhere in the buffer is refused."""
    c = rawcopy.SlotCopier(torch.device("cpu"), 4096, 2)
    inside = c.buffer[4096:4096 + 64].view(torch.float32)
    with pytest.raises(rawcopy.LayoutError, match="output slots"):
        c.copy((inside,), 1)
    with pytest.raises(rawcopy.LayoutError, match="output slots"):
        c.copy((torch.arange(4.0), c.buffer[:16].view(torch.float32)), 0)
    assert torch.equal(rawcopy.view(c.buffer, c.copy((torch.arange(4.0),), 0))[0], torch.arange(4.0))


def test_the_copy_runs_no_torch_function_override_and_refuses_subclasses():
    calls = []

    class Spy(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            calls.append(func)
            return func(*args, **(kwargs or {}))

    t = torch.arange(8.0)
    c = rawcopy.SlotCopier(torch.device("cpu"), 4096, 1)
    with Spy():
        entries = c.copy((t,), 0)
    assert calls == []
    assert torch.equal(rawcopy.view(c.buffer, entries)[0], t)

    class Sub(torch.Tensor):
        pass

    with pytest.raises(rawcopy.LayoutError):
        c.copy((t.as_subclass(Sub),), 0)
    with pytest.raises(rawcopy.LayoutError, match="more than"):
        c.copy((torch.zeros(2048),), 0)


def test_a_layout_outside_the_buffer_is_refused():
    buf = torch.zeros(1024, dtype=torch.uint8)
    with pytest.raises(ValueError):
        rawcopy.view(buf, [(1000, (100,), (1,), "float32")])
    with pytest.raises(ValueError):
        rawcopy.view(buf, [(2, (4,), (1,), "float32")])  # misaligned
    with pytest.raises(ValueError):
        rawcopy.view(buf, [(0, (4,), (1,), "not_a_dtype")])


def test_sync_gap_is_judged_against_eager_fp32s_overhead_in_the_same_pass():
    from kbv.checks.timing_rules import sync_gap

    # an honest fp16 GEMM beside the cuda suite on the H200: both synchronizes slowed
    assert sync_gap(0.474, 0.035, 0.283, 0.015) < 0.05
    # work on a side stream: the events see 0.01 ms of a 1 ms call
    assert sync_gap(1.0, 0.01, 0.03, 0.02) > 0.9


def test_intervals_widen_by_the_spread_between_rounds_and_the_rerun_floor():
    from kbv.model.intervals import between_rounds_se, ratio_interval

    base = [1.0] * 10 + [2.0] * 10  # the baseline twice as slow in the second round
    cand = [1.0] * 20
    assert between_rounds_se(base, cand, [10, 10]) > 0.3
    assert between_rounds_se(base, cand, [20]) == 0.0 and between_rounds_se(base, cand, [5, 5]) == 0.0
    plain = ratio_interval(base, cand, 1)
    wide = ratio_interval(base, cand, 1, blocks=[10, 10])
    assert wide[0] <= plain[0] and wide[1] >= plain[1] and wide[1] - wide[0] > plain[1] - plain[0]
    steady = [1.0 + 0.001 * (i % 3) for i in range(20)]
    lo, hi = ratio_interval(steady, steady, 1, floor_se=0.03)
    assert lo < 0.95 and hi > 1.05  # +-1.96 x 3 % at least


def test_on_cuda_the_requests_fixed_cost_is_what_a_one_call_request_measured_within_a_cap():
    assert bound_plan.cuda_request_allow(1.0, 0.4) == bound_plan.REQUEST_ALLOW_MS  # never under the fixed allowance
    assert bound_plan.cuda_request_allow(7.4, 0.4) == pytest.approx(7.0)
    assert bound_plan.cuda_request_allow(500.0, 0.0) == bound_plan.CUDA_REQUEST_ALLOW_MAX_MS  # a slowed request gains 10 ms
    assert bound_plan.cuda_request_allow(float("nan"), 0.4) == bound_plan.REQUEST_ALLOW_MS
    # the H200 figures (docs/gpu-runs.md, 2026-12-03): two calls of a 0.43 ms matmul in 13.6 ms, a
    # request of one call in about 11.5 ms: no floor far over the claim
    p = _pass(wall_ms=13.6, calls=2, null_ms=0.08, baseline_floor_ms={},
              request_allow_ms=bound_plan.cuda_request_allow(11.5, 0.43))
    assert not rule.cuda_far_over(0.43, rule.floor_ms(p, {}), 48 << 20)
    # a forged clock on a 20 ms GEMM (t24-forged-reply-cuda) is still far over it with the cap
    p = _pass(wall_ms=62.0, calls=3, null_ms=0.1, baseline_floor_ms={}, request_allow_ms=10.0)
    assert rule.cuda_far_over(1.08, rule.floor_ms(p, {}), 768 << 20)


def test_on_a_shared_gpu_a_floor_far_over_the_claim_is_reported_not_credited():
    d = rule.decide(0.04, [1.2, 1.1, 1.3], "cuda", gpu_shared=True)
    assert d.credited_ms == 0.04 and d.finding.check == "timing:claim-unbounded"
    assert d.finding.severity is Severity.WARNING
    assert rule.decide(0.04, [1.2, 1.1, 1.3], "cuda").credited_ms == 1.1  # alone on the GPU: credited


def test_the_cpu_wall_floor_counts_only_where_a_pass_lacks_the_cgroups_cpu_figure():
    with_group = _pass(busiest_thread_ms=1.0, all_threads_ms=2.0, null_cpu_ms=0.1, cgroup_cpu=True)
    without = dataclasses.replace(with_group, cgroup_cpu=False)
    assert not rule.wall_floor_counts([with_group, with_group])
    assert rule.wall_floor_counts([with_group, without]) and rule.wall_floor_counts([without])


def test_on_cuda_the_main_threads_wait_for_a_cpu_comes_off_the_wall():
    p = _pass(host_wait_ms=51.0)  # (102 - 51 - 2) / 51 - 0.5
    assert rule.floor_ms(p, {"eager-fp32": 1.0}) == pytest.approx((49 / 51 - 0.5) * (1 - rule.BOUND_MARGIN))
    assert rule.floor_ms(_pass(host_wait_ms=100.0), {"eager-fp32": 1.0}) == 0.0


def test_only_a_wait_the_candidates_own_threads_cannot_explain_comes_off():
    assert bound_plan.outside_wait_ms(12.0, 0.5) == 11.5  # the rest of the machine kept it waiting
    # a candidate that starves its own launching thread with its other threads gets nothing off
    assert bound_plan.outside_wait_ms(12.0, 40.0) == 0.0
    assert bound_plan.outside_wait_ms(float("nan"), 0.0) == 0.0
    assert bound_plan.outside_wait_ms(3.0, -1.0) == 3.0
    # a wait the trusted side's own timing thread did not see (a candidate's helper that pins itself
    # to the launching thread's CPU and exits, red-team helper 2026-12-04) is not the host's
    assert bound_plan.outside_wait_ms(60.0, 0.0, trusted_wait_ms=0.1) == pytest.approx(0.2)
    assert bound_plan.outside_wait_ms(12.0, 0.5, trusted_wait_ms=50.0) == 11.5


def test_run_delay_reads_the_main_threads_schedstat():
    import os

    from kbv.processes import procfs

    d = procfs.run_delay_ms(os.getpid())
    assert d is None or d >= 0.0  # None where the kernel keeps no schedstat
    assert procfs.run_delay_ms(None) is None


def test_max_bound_calls_is_one_input_set_per_call_within_the_cap():
    from kbv.checks.bound_plan import BOUND_INPUT_BYTES, max_bound_calls

    assert max_bound_calls(1 << 20, "cpu") == BOUND_INPUT_BYTES["cpu"] >> 20 == 64
    assert max_bound_calls(1 << 20, "cuda") == 256
    assert max_bound_calls(BOUND_INPUT_BYTES["cpu"] * 4, "cpu") == 1  # a large input: one set
    assert max_bound_calls(0, "cpu") == BOUND_INPUT_BYTES["cpu"]  # no tensor input: never zero division


def test_on_cpu_one_pass_over_the_claim_is_not_enough_to_cap_it():
    """An honest Triton matmul (interpreted on cpu) beside the other xdist worker, 2026-12-05: its
    two passes' floors 31.93 and 16.8 ms against its claim of 27.55 ms. One pass over the claim
    caps nothing: the second must repeat it (a pass may run slower than the rounds did)."""
    assert rule.floor_cap(27.55, [31.93, 16.8]) == 0.0
    d = rule.decide(27.55, [31.93, 16.8], "cpu")
    assert d.credited_ms == 27.55 and d.finding is None
