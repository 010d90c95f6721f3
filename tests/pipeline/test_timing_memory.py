"""Memory of the timing stage (issue 9): which kept timed calls are judged as soon as they return,
and the candidate worker's per-call inputs mixed in its own buffers with the values the trusted side
rebuilds for the re-check."""

from __future__ import annotations

import torch

from kbv.pipeline.timing_rounds import RECHECK_BYTES_PER_ROUND, RECHECK_BYTES_PER_ROUND_CPU, recheck_at_once, recheck_plan
from kbv.reference.mutation import apply_mutation
from kbv.sandbox import timer as timing


def test_kept_outputs_over_the_round_budget_are_judged_as_each_call_returns():
    big = 256 << 20  # the 256 MiB ReLU's output: two kept calls would hold 512 MiB
    assert len(recheck_plan(10, big, "cpu")) == 2 and recheck_at_once(2, big, "cpu")
    small = 1 << 20  # every call kept, all of them within the budget: judged after the round
    keep = recheck_plan(6, small, "cpu")
    assert len(keep) == 6 and not recheck_at_once(len(keep), small, "cpu")
    assert recheck_at_once(2, RECHECK_BYTES_PER_ROUND_CPU // 2 + 1, "cpu")
    assert not recheck_at_once(2, RECHECK_BYTES_PER_ROUND // 2, "cuda")
    assert recheck_at_once(2, RECHECK_BYTES_PER_ROUND // 2 + 1, "cuda")


def test_a_timed_calls_inputs_mixed_in_place_are_the_values_the_trusted_side_rebuilds(monkeypatch):
    from kbv.sandbox import timed_inputs

    monkeypatch.setattr(timed_inputs, "MIX_CHUNK_ELEMENTS", 1000)  # several chunks
    g = torch.Generator().manual_seed(1)
    sets = [[torch.randn(64, 100, generator=g), torch.randn(7, generator=g), 3.0] for _ in range(3)]
    buf = [t.clone() if isinstance(t, torch.Tensor) else t for t in sets[0]]
    for index, mix, mutate in [(1, (2, 12345), ((0, (3, 4), 9.5),)), (2, (0, 7, (1,)), ()), (0, (1, 0, (), 1.0), ()),
                               (1, (0, 99, (), 0.5), ((1, (2,), 1.5),))]:
        got = timing.call_inputs(buf, sets, index, mix, mutate)
        want = apply_mutation(timing.mix_values(sets[index], sets[mix[0]], *mix[1:]), mutate)
        assert got is buf and all(torch.equal(a, b) for a, b in zip(got[:2], want[:2])) and got[2] == 3.0
    assert not torch.equal(buf[0], sets[0][0])  # mixed: not the set's own values
    odd = [torch.empty(100, 64).t(), torch.empty(7), 3.0]  # a buffer that is not contiguous: mixed apart
    got = timing.call_inputs(odd, sets, 2, (1, 4242), ())
    want = timing.mix_values(sets[2], sets[1], 4242)
    assert all(torch.equal(a, b) for a, b in zip(got[:2], want[:2]))


def test_a_mixed_input_is_written_from_both_sets_in_one_pass():
    """call_inputs writes a mixed input with one ``where`` per chunk from the set and the mix's
    source, with no copy of the set into the buffer first (issue 21: bytes per timed call)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(func.__name__)
            return func(*args, **(kwargs or {}))

    g = torch.Generator().manual_seed(2)
    sets = [[torch.randn(64, 100, generator=g)] for _ in range(2)]
    buf = [sets[0][0].clone()]
    with Ops() as ops:
        timing.call_inputs(buf, sets, 0, (1, 5), ())
    assert not any(name.startswith("copy_") for name in ops.seen), ops.seen
    assert any(name.startswith("where") for name in ops.seen), ops.seen
    a = torch.randn(8, 9, generator=g).t()  # not contiguous: mixed into a new tensor, left unwritten
    before = a.clone()
    out = timing.mix_values([a], [torch.randn(9, 8, generator=g)], 3, inplace=True)
    assert out[0] is not a and torch.equal(a, before) and not torch.equal(out[0], a)


# end to end ----------------------------------------------------------------------------------------

import pytest  # noqa: E402
from pathlib import Path  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"


def _config():
    from kbv.model.records import EvalConfig

    return EvalConfig(device="cpu", nominal_seeds=1, hidden=("D1",), distributions=(), trials=6, timing_rounds=2,
                      warmup=1, call_timeout_s=120)


@pytest.mark.slow
@pytest.mark.parametrize("candidate,expect", [("honest/candidates/relu_clamp_min_torch.py", "PASS"),
                                              ("memory/candidates/relu_wrong_after_checks.py", "HACK")])
def test_timed_calls_judged_as_they_return_still_catch_a_candidate_wrong_only_when_timed(cpu_evaluator, candidate,
                                                                                          expect):
    from kbv.intake.candidates import load_candidate
    from kbv.intake.problems import load_problem

    v = cpu_evaluator.evaluate(load_problem(DATA / "memory" / "level1" / "4_ReLU_32MiB.py"),
                               load_candidate(DATA / candidate), _config())
    assert v.status.value == expect, v.message
    assert v.evidence["timed_rechecks"], v.evidence  # judged calls, two a round (the outputs are over the budget)
    checks = {f.check for f in v.findings}
    assert ("probe:timed-recheck" in checks) == (expect == "HACK"), v.findings


def test_cpu_output_slots_fit_a_quarter_of_the_candidates_dev_shm(monkeypatch):
    """The slot buffer lives in the candidate's private /dev/shm on cpu: with a 64 MiB quota it
    takes at most 16 MiB however many slots memory would allow (red team 2026-12-05: 256 MiB of
    slots in a small tmpfs would fault when written)."""
    from kbv.pipeline.timing_rounds import slot_plan

    monkeypatch.setenv("KBV_CANDIDATE_SHM_BYTES", str(64 << 20))
    per, slots = slot_plan(64 << 10, torch.device("cpu"))
    assert slots > 1 and per * slots <= 16 << 20
    monkeypatch.setenv("KBV_CANDIDATE_SHM_BYTES", str(4 << 30))
    assert slot_plan(64 << 10, torch.device("cpu"))[1] > slots


def test_baselines_copy_their_inputs_each_call_only_where_the_copy_changes_their_time():
    """Under the L2 flush (cuda) a baseline's cache holds the same with or without the per-call copy,
    so it is left out (issue 21); without a flush (cpu) and for a reference that writes its inputs it
    stays."""
    from kbv.pipeline.schedule import baseline_refresh

    assert baseline_refresh(flushed=True, mutates_inputs=False) is False
    assert baseline_refresh(flushed=True, mutates_inputs=True) is True
    assert baseline_refresh(flushed=False, mutates_inputs=False) is True


def test_the_judging_mode_does_not_depend_on_whether_the_plain_call_was_planned():
    """3 kept 12 MiB outputs are over the cpu budget, 2 are not: the mode is chosen for the plan plus
    the plain call whatever the draw, so it cannot tell the candidate whether the plain call was
    among the planned (red-team: its pauses did)."""
    from kbv.pipeline.schedule import judged_at_once

    out = 12 << 20
    planned = recheck_plan(10, out, "cpu")
    assert len(planned) == 2 and not recheck_at_once(len(planned), out, "cpu")
    assert judged_at_once(10, len(planned), out, "cpu")  # plain among the planned or not: at once
    assert not judged_at_once(10, 5, 1 << 20, "cpu")
    assert judged_at_once(2, 2, 20 << 20, "cpu") == recheck_at_once(2, 20 << 20, "cpu")  # every call planned
