"""Unit tests of the pure pieces: records, flags, timing loop, hidden transforms."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from kbv.checks.outputs import fingerprint, poisoned_elements
from kbv.sandbox import numeric_flags as baselines
from kbv.reference import inputs
from kbv.sandbox import timer as timing
from kbv.model.records import (CandidateRef, Environment, EvalConfig, InputKind, InputSetResult, Measurement,
    ProblemRef, Status, Verdict, to_json, verdict_from_json)


def _verdict(**kw):
    base = dict(
        status=Status.PASS, message="ok",
        problem=ProblemRef("/p/level1/1_ReLU.py", "ReLU", 1, 1, "a" * 64),
        candidate=CandidateRef("/c/x.py", "b" * 64, "cuda"),
        config=EvalConfig(), environment=Environment("0.1.0", "3.11", "2.13", "cpu"),
        input_sets=(InputSetResult("nominal-0", InputKind.NOMINAL, "get_inputs()", 7, True, max_abs_error=0.0),),
        timing={"candidate": Measurement("candidate", "cpu", (1.0, 2.0, 3.0), 1)},
        speedup={"eager-fp32": 2.0},
    )
    base.update(kw)
    return Verdict(**base)


def test_json_roundtrip_keeps_non_finite_floats():
    v = _verdict(input_sets=(
        InputSetResult("nominal-0", InputKind.NOMINAL, "get_inputs()", 1, True, max_abs_error=0.0),
        InputSetResult("D4", InputKind.HIDDEN, "x-1", 2, passed=None, dropped=True, drop_reason="NaN"),
    ), evidence={"nan": math.nan, "inf": math.inf, "ninf": -math.inf})
    text = to_json(v)
    assert "NaN" in text and "Infinity" in text
    back = verdict_from_json(text)
    assert back.status is Status.PASS and back.input_sets[1].dropped
    assert math.isnan(back.evidence["nan"]) and back.evidence["ninf"] == -math.inf
    assert back.timing["candidate"].median_ms == 2.0


@pytest.mark.parametrize("kw, match", [
    (dict(status=Status.PASS, timing={}), "candidate timing"),
    (dict(status=Status.INCORRECT), "failed input set"),
    (dict(status=Status.CRASH, message=""), "needs a message"),
    (dict(status=Status.TIMEOUT, message="t"), "cannot carry a speedup"),
    (dict(speedup={"eager-fp32": 0.0}), "finite and positive"),
])
def test_impossible_verdicts_cannot_be_built(kw, match):
    with pytest.raises(ValueError, match=match):
        _verdict(**kw)


def test_measurement_statistics_and_noise():
    m = Measurement("x", "cpu", (1.0, 1.0, 1.0, 1.0, 2.0), 0)
    assert m.median_ms == 1.0 and m.trials == 5 and not m.noisy
    assert Measurement("x", "cpu", (1.0, 2.0, 3.0, 4.0), 0).noisy
    with pytest.raises(ValueError):
        Measurement("x", "cpu", (1.0, 0.0), 0)


def test_baseline_flags_roundtrip():
    before = baselines.numeric_flags()
    try:
        baselines.apply_flags(baselines.flags_for("eager-tf32"))
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        assert baselines.flag_changes(baselines.flags_for("eager-fp32"))
        baselines.apply_flags(baselines.flags_for("eager-fp32"))
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
        assert baselines.flag_changes(baselines.flags_for("eager-fp32")) == []
    finally:
        baselines.apply_flags(before)
    with pytest.raises(ValueError):
        baselines.flags_for("eager-fp64")


def test_time_calls_cpu_rotates_sets_and_returns_every_sample():
    seen = []
    times, clock = timing.time_calls(lambda x: seen.append(int(x)), [[0], [1], [2]], device="cpu",
                                     warmup=2, trials=7, first_set=1)
    assert clock == "perf_counter" and len(times) == 7 and all(t >= 0 for t in times)
    assert seen == [1, 2, 0, 1, 2, 0, 1, 2, 0]  # 2 warmup + 7 timed, rotating from set 1
    assert timing.l2_flush_bytes("cpu") is None


def test_timing_callables_survive_monkeypatching(monkeypatch):
    import time

    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    assert "time.perf_counter" in timing.captured_changed()
    times, _ = timing.time_calls(lambda: sum(range(1000)), [[]], device="cpu", warmup=0, trials=3)
    assert all(t > 0 for t in times)  # the loop kept the real clock


def test_hidden_transforms_scale_floats_only():
    def get_inputs():
        return [torch.rand(8), torch.randint(0, 5, (8,)), 3, torch.rand(2) > 0.5]

    sets = inputs.hidden_sets(get_inputs, ["D1", "D2", "D3", "D4"])
    base = sets[0].args
    for s, f in zip(sets, (1.0, 3.0, 0.01, -1.0)):
        assert torch.allclose(s.args[0], base[0] * f)
        assert s.args[1].dtype == torch.int64 and torch.equal(s.args[1], base[1])
        assert s.args[2] == 3 and s.args[3].dtype == torch.bool
    assert len({s.seed for s in sets}) == 1
    with pytest.raises(ValueError, match="unknown hidden"):
        inputs.hidden_sets(get_inputs, ["D9"])


def test_precision_cast_leaves_integers_alone():
    out = inputs.to_device([torch.rand(2), torch.arange(3)], "cpu", "bf16")
    assert out[0].dtype == torch.bfloat16 and out[1].dtype == torch.int64


def test_nominal_seeds_are_fresh_and_reproduce_the_draw():
    def get_inputs():
        return [torch.rand(4)]

    a, b = inputs.nominal_sets(get_inputs, 2)
    assert a.seed != b.seed
    assert torch.equal(inputs.draw(get_inputs, a.seed)[0], a.args[0])


def test_demo_table_marks_noisy_speedups():
    from rich.console import Console

    from kbv.demo import CASES, demo_table

    noisy = _verdict(timing={"candidate": Measurement("candidate", "cpu", (1.0, 2.0, 3.0, 4.0), 1)},
                     speedup={"eager-fp32": 2.0, "eager-tf32": 1.5})
    quiet = _verdict(timing={"candidate": Measurement("candidate", "cpu", (1.0, 1.0, 1.0), 1)},
                     speedup={"eager-fp32": 3.0, "eager-tf32": 1.25})
    console = Console(width=160, record=True)
    console.print(demo_table([(CASES[0], noisy), (CASES[5], quiet)], "cpu"))
    text = console.export_text()
    assert "2.00x ~" in text and "1.50x ~" in text
    assert "3.00x ~" not in text and "3.00x" in text
    assert "randomised distributions" in demo_table([(CASES[0], quiet)], "cpu").caption  # the kbv policy's
    compat = demo_table([(CASES[0], quiet)], "cpu", "kbv-compat").caption
    assert "verified = kbv-compat" in compat and "randomised" not in compat  # kbv-compat runs none


def test_demo_table_shows_a_shortcut_speed_outside_the_geomean():
    from rich.console import Console

    from kbv.demo import CASES, demo_table
    from verdict_factory import make_verdict

    passed = make_verdict("PASS", speedup={"eager-fp32": 3.0, "eager-tf32": 1.25})
    shortcut = make_verdict("SHORTCUT", speedup={"eager-fp32": 7.0, "eager-tf32": 4.0})
    console = Console(width=200, record=True)
    console.print(demo_table([(CASES[0], passed), (CASES[3], shortcut)], "cpu"))
    text = console.export_text()
    assert "(4.00x)" in text  # shown, marked as torch's own
    assert "1.25x of 1" in text  # the verified geomean holds the PASS alone


def test_fingerprint_indices_stay_in_range_for_large_outputs():
    """Sample positions of a 2**25-element output stay inside it (a float32 linspace of positions
    rounds past the last element and trips a device-side index assert)."""
    import torch
    n = (1 << 25) + 3
    t = torch.arange(n, dtype=torch.float64)
    fp = fingerprint([t], samples=4096)
    values = torch.frombuffer(bytearray(fp[0][2]), dtype=torch.float64)
    assert values[-1].item() == n - 1 and values[0].item() == 0


def test_recheck_plan_checks_short_rounds_whole_and_half_of_longer_ones():
    """Rounds of up to RECHECK_ALL_UP_TO timed calls are re-checked whole (with 2 secret re-checks out of
    3 calls a round, a candidate that skipped every other timed call escaped about once in 36
    verifies); longer rounds a secret half (issue 21), as many as the outputs' budget allows, never
    fewer than RECHECKS_PER_ROUND."""
    from kbv.pipeline.schedule import RECHECK_ALL_UP_TO
    from kbv.pipeline.timing_rounds import (RECHECK_BYTES_PER_ROUND, RECHECK_BYTES_PER_ROUND_CPU, RECHECKS_PER_ROUND,
        recheck_plan)

    assert recheck_plan(3, 4096) == (0, 1, 2)
    assert recheck_plan(RECHECK_ALL_UP_TO, 4096) == tuple(range(RECHECK_ALL_UP_TO))
    assert recheck_plan(0, 4096) == ()

    def valid(p, n):
        return list(p) == sorted(set(p)) and 0 <= p[0] and p[-1] < n

    halves = {recheck_plan(10, 4096) for _ in range(50)}
    assert all(len(p) == 5 and valid(p, 10) for p in halves) and len(halves) > 1  # secret, not a fixed pattern
    assert all(len(recheck_plan(7, 4096)) == 4 for _ in range(5))  # ceil(7 / 2)
    # large outputs: as many as fit, at least RECHECKS_PER_ROUND, distinct, sorted, in range
    big = RECHECK_BYTES_PER_ROUND // 4
    plans = {recheck_plan(10, big) for _ in range(50)}
    assert all(len(p) == 4 and valid(p, 10) for p in plans)
    assert len(plans) > 1
    huge = RECHECK_BYTES_PER_ROUND * 8
    assert all(len(recheck_plan(10, huge)) == RECHECKS_PER_ROUND for _ in range(20))
    assert recheck_plan(1, huge) == (0,)
    # cpu: kept outputs pass through /dev/shm, so the budget is smaller
    assert len(recheck_plan(10, RECHECK_BYTES_PER_ROUND_CPU // 3, "cpu")) == 3
    assert recheck_plan(5, 4096, "cpu") == tuple(range(5))


def test_a_skipped_half_of_the_timed_calls_is_caught_in_every_round_of_ten_but_one_in_252():
    """RECHECK_SHARE's figure: m = 5 secret re-checks of 10 calls miss the 5 calls a candidate skipped
    only when they are exactly the 5 it did not skip."""
    import itertools

    from kbv.pipeline.timing_rounds import recheck_plan

    skipped = set(range(0, 10, 2))
    plans = list(itertools.combinations(range(10), 5))
    assert sum(1 for p in plans if not skipped & set(p)) / len(plans) == 1 / 252
    assert len(recheck_plan(10, 4096)) == 5


def test_thread_work_does_not_count_multiprocessings_fd_sharer(monkeypatch):
    """The fd-sharing thread multiprocessing starts to send a shared tensor is no candidate thread:
    counted, it made every probed forward wait THREAD_SETTLE_S (issue 21's profile). A thread of
    another class with the same target is counted."""
    import threading
    from multiprocessing import resource_sharer

    from kbv.sandbox.call_probes import ThreadWork

    seen = []
    # the serve loop stood in for by one that asks the question and returns (the class's function,
    # as the real thread's bound method holds it)
    monkeypatch.setattr(resource_sharer._ResourceSharer, "_serve", lambda self: seen.append(tw._harness_thread()))
    tw = ThreadWork()
    tw.install()
    try:
        sharer = threading.Thread(target=resource_sharer._resource_sharer._serve, daemon=True)
        sharer.start()
        sharer.join()
        assert seen == [True] and tw.threads == 0

        class Disguised(threading.Thread):
            pass

        for t in (Disguised(target=resource_sharer._resource_sharer._serve), threading.Thread(target=seen.clear)):
            t.start()
            t.join()
        assert tw.threads == 2
    finally:
        threading.setprofile(None)


def test_thread_work_tells_waited_pools_from_work_after_return():
    """kbv.sandbox.call_probes.ThreadWork: threads whose work forward waited for stay quiet, and so does a worker loop polling through its
    own helpers; work queued or running after the return and a torch function handed straight to
    a pool are seen."""
    import concurrent.futures
    import queue
    import threading
    import time

    from kbv.sandbox.call_probes import ThreadWork

    def rows(x):
        return torch.exp(x - x.amax(dim=1, keepdim=True)).sum()

    x = torch.randn(256, 256)
    tw = ThreadWork()
    tw.install()
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            for _ in range(3):  # waited for: quiet
                [f.result() for f in [pool.submit(rows, x) for _ in range(4)]]
                mark = tw.mark()
                time.sleep(0.02)
                assert tw.since(mark) == ""
            list(pool.map(rows, [x] * 4))
            mark = tw.mark()
            time.sleep(0.02)
            assert tw.since(mark) == ""
            helper = threading.Thread(target=rows, args=(x,))
            helper.start()
            helper.join()
            mark = tw.mark()
            time.sleep(0.02)
            assert tw.since(mark) == ""
            assert tw.threads >= 3
            # not waited for: the candidate's function (or a torch function) runs after the mark
            # both pool threads are held at a gate while the work is queued, so the work cannot
            # finish before the mark (a race the CI machine lost)
            for work in (rows, torch.exp):
                gate = threading.Event()
                held = [pool.submit(gate.wait, 5) for _ in range(2)]
                futures = [pool.submit(work, x) for _ in range(4)]
                mark = tw.mark()
                gate.set()
                concurrent.futures.wait(held + futures)
                assert ("in rows" if work is rows else "exp") in tw.since(mark), tw.since(mark)
        # a persistent worker loop (candidate code) polling its queue through a helper of its
        # own between jobs is quiet
        jobs, done = queue.Queue(), threading.Event()

        def next_job():
            try:
                return jobs.get(timeout=0.002)
            except queue.Empty:
                return False

        def loop():
            while True:
                job = next_job()
                if job is False:
                    continue
                if job is None:
                    return
                rows(job)
                done.set()

        worker = threading.Thread(target=loop, daemon=True)
        worker.start()
        for _ in range(3):
            done.clear()
            jobs.put(x)
            done.wait()
            mark = tw.mark()
            time.sleep(0.02)
            assert tw.since(mark) == ""
        jobs.put(None)
        worker.join()
    finally:
        threading.setprofile(None)


def test_malloc_perturb_marks_cpu_memory_a_temporary_left_behind():
    """kbv.sandbox.call_probes.malloc_perturb: an output allocated on cpu right after a same-size temporary
    was freed holds glibc's fill pattern where it was never written, and poisoned_elements counts
    exactly those elements (pre-filled free blocks alone are taken by the candidate's own temporaries
    first: red-team row t09-partial-write). Off again on exit."""
    from kbv.sandbox import call_probes as ig

    x = torch.randn(16, 300)
    with ig.malloc_perturb() as perturb:
        if not perturb.active:
            pytest.skip("the C library is not glibc")
        hits = 0
        for _ in range(10):
            s = torch.exp(x - x.amax(dim=1, keepdim=True)).sum(dim=1, keepdim=True)
            out = torch.empty_like(x)
            out[:, :256] = torch.exp(x[:, :256]) / s
            hits += poisoned_elements(out) == 16 * 44
    assert hits == 10
    assert not perturb.active
    assert poisoned_elements(torch.softmax(x, dim=1)) == 0
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        filled = torch.full((8,), ig.PERTURB_FILL_BYTE, dtype=torch.uint8).view(dtype)
        assert poisoned_elements(filled) == filled.numel()


def test_op_count_replies_are_checked_before_the_trusted_side_reads_them():
    """kbv.checks.probe_rules.op_counts_ok: the op counts a worker really
    sends pass; a forged reply whose dicts or kernel rows have other shapes is refused."""
    from kbv.sandbox import profiling
    from kbv.sandbox import protocol
    from kbv.checks.probe_rules import op_counts_ok as _op_counts_ok

    model, args = torch.nn.Softmax(dim=1), [torch.randn(4, 8)]
    ops, recorded = profiling.compute_ops(model, args), profiling.recorded_ops(model, args)
    good = protocol.OpCounts(ops=dict(ops.ops), recorded=dict(recorded.ops),
                             kernels=(("k", 1.5, True),), own_share=0.5)
    assert good.ops and _op_counts_ok(good)
    for bad in (dict(ops={("aten", "mm"): 1}), dict(recorded={"aten::mm": "1"}), dict(recorded=[1]),
                dict(kernels=(("k", 1.0),)), dict(kernels=((1, 1.0, True),)), dict(own_share="1"),
                dict(error=3)):
        assert not _op_counts_ok(dataclasses.replace(good, **bad)), bad


def test_trials_within_budget_cuts_slow_subjects_only():
    """kbv.pipeline.timing_rounds.trials_within_budget (EvalConfig.time_budget_ms): fast subjects keep every
    planned call; slow ones get budget / cost, never fewer than the minimum; an unknown cost or no
    budget changes nothing."""
    from kbv.pipeline.timing_rounds import trials_within_budget

    assert trials_within_budget(10, 0.05, 2000.0) == 10
    assert trials_within_budget(10, 400.0, 2000.0) == 5
    assert trials_within_budget(10, 5000.0, 2000.0) == 3
    assert trials_within_budget(2, 5000.0, 2000.0) == 2  # never above planned
    assert trials_within_budget(10, 5000.0, 2000.0, minimum=4) == 4
    assert trials_within_budget(10, float("nan"), 2000.0) == 10
    assert trials_within_budget(10, 400.0, 0.0) == 10
    with pytest.raises(ValueError, match="time_budget_ms"):
        EvalConfig(time_budget_ms=-1.0)


def test_every_timed_call_gets_its_own_values():
    """timing.time_calls(mutate=...) with kbv.reference.mutation.timed_mutation / apply_mutation: each timed
    call's buffer holds its timing set with the changes for that call (warmup calls none), and the
    trusted side rebuilds exactly those values for the re-check."""
    from kbv.reference.mutation import apply_mutation, timed_mutation

    sets = [[torch.zeros(3, 4)], [torch.ones(3, 4)]]
    spare = [torch.full((3, 4), 7.0)]
    g = torch.Generator().manual_seed(0)
    mutate = {i: timed_mutation(sets[(0 + 1 + i) % 2], spare, g) for i in range(4)}
    seen = []
    timing.time_calls(lambda x: seen.append(x.clone()), sets, device="cpu", warmup=1, trials=4, refresh=True,
                      mutate=mutate)
    assert torch.equal(seen[0], sets[0][0])  # warmup: untouched
    for i in range(4):
        expect = apply_mutation(sets[(1 + i) % 2], mutate[i])[0]
        assert torch.equal(seen[1 + i], expect) and int((expect == 7.0).sum()) == 1
    assert torch.equal(sets[0][0], torch.zeros(3, 4))  # the sets themselves are never written
    with pytest.raises(ValueError, match="refresh"):
        timing.time_calls(lambda x: x, sets, device="cpu", warmup=0, trials=1, mutate=mutate)


def test_poison_patterns_do_not_match_honest_bf16_values():
    """kbv.checks.outputs.poisoned_elements: bf16's largest finite value (0x7F7F, the malloc fill) where
    the reference has it too, and bf16's canonical NaN (0x7FC0, half the poison word) alone, are
    not stale memory; the real patterns are."""
    from kbv.sandbox import call_probes as ig

    big = torch.full((6,), torch.finfo(torch.bfloat16).max, dtype=torch.bfloat16)
    assert int(big.view(torch.int16)[0]) == 0x7F7F
    assert poisoned_elements(big, ref=big.clone()) == 0
    assert poisoned_elements(big, ref=torch.zeros(6, dtype=torch.bfloat16)) == 6
    nan = torch.full((6,), float("nan"), dtype=torch.bfloat16)
    assert int(nan.view(torch.int16)[0]) == 0x7FC0 and poisoned_elements(nan) == 0
    words = torch.full((3,), ig.POISON_INT32, dtype=torch.int32).view(torch.bfloat16)
    assert poisoned_elements(words) == 6
    f32 = torch.full((4,), ig.POISON_INT32, dtype=torch.int32).view(torch.float32)
    assert poisoned_elements(f32) == 4 and poisoned_elements(f32, ref=torch.ones(4)) == 4


def test_timed_calls_take_an_eighth_of_their_values_from_another_set():
    """timing.mix_values through time_calls(mix=...): a diff-and-patch matmul cache and a
    tolerance-aware cross-entropy cache beat one changed element per call; each timed call also takes ~1/8 of every tensor's elements from another timing
    set, positions from a per-call seed, rebuilt exactly on the trusted side."""
    from kbv.reference.mutation import apply_mutation

    sets = [[torch.zeros(64, 64), torch.zeros(64, dtype=torch.long)],
            [torch.ones(64, 64), torch.ones(64, dtype=torch.long)]]
    mix = {0: (0, 11), 1: (1, 12), 2: (0, 13)}  # call i uses set (1 + i) % 2: the source is the other
    mutate = {2: ((0, (3, 4), 5.0),)}
    seen = []
    timing.time_calls(lambda x, t: seen.append((x.clone(), t.clone())), sets, device="cpu", warmup=1, trials=3,
                      refresh=True, mix=mix, mutate=mutate)
    for i in range(3):
        k = (1 + i) % 2
        expect = apply_mutation(timing.mix_values(sets[k], sets[mix[i][0]], mix[i][1]), mutate.get(i, ()))
        assert torch.equal(seen[1 + i][0], expect[0]) and torch.equal(seen[1 + i][1], expect[1])
        share = float((seen[1 + i][0] != sets[k][0]).float().mean())
        assert 0.08 < share < 0.17, share
        assert bool((seen[1 + i][0] != sets[k][0]).any(dim=1).all())  # every row changed
    assert not torch.equal(seen[1][0], seen[3][0])  # same set, different calls: different values
    assert torch.equal(sets[1][0], torch.ones(64, 64))


def test_environ_set_nests_without_deadlock():
    """Regression (a newcomer's `kbv run` hung forever): a CPU lane spawns its reference worker inside
    its own ``environ_set``, and the reference worker's spawn sets the OpenMP wait policy with another;
    the lock was not reentrant. The inner block restores the outer environment."""
    import os
    import threading

    from kbv.processes.handles import environ_set

    seen = []

    def nested():
        with environ_set({**os.environ, "KBV_OUTER": "1"}):
            with environ_set({**os.environ, "KBV_INNER": "1"}):
                seen.append((os.environ.get("KBV_OUTER"), os.environ.get("KBV_INNER")))
            seen.append((os.environ.get("KBV_OUTER"), os.environ.get("KBV_INNER")))

    t = threading.Thread(target=nested, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "nested environ_set deadlocked"
    assert seen == [("1", "1"), ("1", None)]
    assert "KBV_OUTER" not in os.environ


def test_a_set_that_raised_fails_the_policies_it_has_no_verdict_from():
    """kbv eval printed "kbv policy: -" under an INCORRECT at a secret shape where the candidate
    raised (that set has no policy verdicts): a failed set fails the policy (newcomer report)."""
    import dataclasses

    from kbv.model.records import InputKind, InputSetResult
    from verdict_factory import make_verdict

    v = make_verdict("INCORRECT", hidden_fail=("D4",))
    raised = InputSetResult("shape-1", InputKind.SHAPE, "sizes dim=257", 0, passed=False, fault="raised")
    v = dataclasses.replace(v, input_sets=(*v.input_sets, raised))
    assert v.policy_verdicts["kbv"] is False
    ok = make_verdict("PASS", speedup=2.0)
    assert ok.policy_verdicts == {"kbv": True, "kbv-compat": True}


def test_mix_mask_draws_one_byte_an_element_where_the_fraction_allows():
    """The timed calls' mix (kbv.sandbox.timer.mix_values) draws its positions from one random byte an
    element for fractions in 1/256 steps: the same positions from the same seed, about that fraction."""
    import torch

    from kbv.sandbox.timer import _mix_mask

    def mask(fraction, seed):
        g = torch.Generator()
        g.manual_seed(seed)
        return _mix_mask(torch.Size([1 << 16]), fraction, g, torch.device("cpu"))

    m = mask(0.125, 5)
    assert torch.equal(m, mask(0.125, 5)) and not torch.equal(m, mask(0.125, 6))
    assert abs(float(m.float().mean()) - 0.125) < 0.01
    assert abs(float(mask(0.5, 1).float().mean()) - 0.5) < 0.01
    assert abs(float(mask(0.3, 1).float().mean()) - 0.3) < 0.01  # not a multiple of 1/256: float draws
    assert not bool(mask(0.0, 1).any()) and bool(mask(1.0, 1).all())
