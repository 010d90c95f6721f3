"""The bound pass's judged values made again in the trusted process (kbv.pipeline.bound_pass):
on cuda the re-check judges each judged call on values made from the pass's plan, so no copy of
the shared pass sets is held through the pass; they must be the values the candidate's call got."""

from types import SimpleNamespace

import torch

from kbv.pipeline.bound_inputs import PassValues
from kbv.pipeline.bound_pass import BoundStage


def _stage(structured: tuple = (), fresh: str = "", get_inputs=None) -> PassValues:
    """A bound pass's values on cpu; ``fresh``: its passes take fresh draws of ``get_inputs`` (the real
    :meth:`kbv.pipeline.context.Context._fresh_draw`), "seed" or "kept"."""
    from kbv.pipeline.context import Context

    ctx = SimpleNamespace(_structured=lambda: structured, _kinds=lambda: {}, config=SimpleNamespace(precision="fp32"),
                          rp=SimpleNamespace(device=torch.device("cpu"), output_bytes=4 * 33,
                                             module=SimpleNamespace(get_inputs=get_inputs)))
    ctx._fresh_draw = lambda seed: Context._fresh_draw(ctx, seed)
    ctx._fresh_draw_for = lambda sets, seed: Context._fresh_draw_for(ctx, sets, seed)
    values = PassValues(ctx)
    values.fresh = fresh
    return values


def _sets(n: int = 3) -> list:
    g = torch.Generator().manual_seed(7)
    return [[torch.randn(33, 70, generator=g), torch.randn(70, generator=g), 2.5] for _ in range(n)]


def test_a_judged_calls_values_made_again_equal_what_the_pass_wrote():
    stage, sets = _stage(), _sets()
    plan = stage.plan(sets, 4)
    written = [[a.clone() if isinstance(a, torch.Tensor) else a for a in sets[i % 3]] for i in range(4)]
    stage.write(sets, written, plan)
    for call, target in zip(plan, written):
        again = stage.call_inputs(sets, call)
        assert all(torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b for a, b in zip(again, target))
        assert all(a.data_ptr() != b.data_ptr() for a, b in zip(again, target) if isinstance(a, torch.Tensor))
    mixed = [c for c in plan if c[1] is not None]
    assert mixed and any(not torch.equal(stage.call_inputs(sets, c)[0], sets[c[0]][0]) for c in mixed)


def test_made_again_after_the_shared_sets_were_written_by_someone_else():
    """The candidate may write into the shared pass sets (queued GPU work runs on while its process
    is stopped): the values made again come from the trusted timing sets and the plan alone."""
    stage, sets = _stage(), _sets(2)
    plan = stage.plan(sets, 2)
    written = [[a.clone() if isinstance(a, torch.Tensor) else a for a in sets[i % 2]] for i in range(2)]
    stage.write(sets, written, plan)
    expected = [[a.clone() if isinstance(a, torch.Tensor) else a for a in w] for w in written]
    for w in written:
        w[0].fill_(0.0)
    for call, want in zip(plan, expected):
        assert torch.equal(stage.call_inputs(sets, call)[0], want[0])


def test_made_again_with_the_sets_strides():
    """The pass's sets keep a transposed input's strides (inp.shared_clone); the values made again
    for the re-check have them too (red-team helper, seventh session: they were made contiguous)."""
    stage = _stage()
    g = torch.Generator().manual_seed(9)
    sets = [[torch.randn(40, 24, generator=g).t(), torch.randn(24, generator=g)] for _ in range(2)]
    plan = stage.plan(sets, 2)
    written = [[a.clone() for a in sets[i]] for i in range(2)]  # clone keeps the strides, as shared_clone
    stage.write(sets, written, plan)
    for call, target in zip(plan, written):
        again = stage.call_inputs(sets, call)
        assert again[0].stride() == sets[0][0].stride() and not again[0].is_contiguous()
        assert all(torch.equal(a, b) for a, b in zip(again, target))


def test_the_null_outputs_are_not_held_through_the_baselines_loops():
    """The trusted loops hold the null's outputs (made once) for the null loop only: an
    output-heavy problem's baselines' loops held them beside the slot and two calls' outputs, 5·O
    (KernelBench-Verified's small-K matmul: 20.2 GiB of a 17.1 GiB bound, H100, 2026-12-07)."""
    import contextlib
    import gc
    import weakref

    from kbv.sandbox import numeric_flags as bl

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = None
            self.alive_later = []

        def forward(self, x):
            out = x * 2.0
            if self.first is None:
                self.first = weakref.ref(out)
            else:
                gc.collect()
                self.alive_later.append(self.first() is not None)
            return out

    model = Model()
    rp = SimpleNamespace(model=model, device=torch.device("cpu"), mutates_inputs=False, output_bytes=1024)
    stage = BoundStage.__new__(BoundStage)
    stage.ctx = SimpleNamespace(rp=rp, fp32_flags=bl.flags_for("eager-fp32"), _slot_bytes=4096 + 1024,
                                _slot_touch=0, config=SimpleNamespace(baselines=("eager-fp32",)))
    worker = SimpleNamespace(paused=contextlib.nullcontext)
    sets = [[torch.randn(256)] for _ in range(3)]
    null, _, floors = stage._trusted_loops(worker, sets, None, 2, 1, lambda: None)
    assert set(floors) == {"eager-fp32"} and null >= 0
    assert model.alive_later and not any(model.alive_later)


def test_the_trusted_loops_slots_hold_the_references_outputs_without_the_workers_slack(monkeypatch):
    """The trusted loops copy each call's outputs as the candidate worker does, into slots sized to
    the reference's outputs alone: the worker's slots carry SLOT_SLACK x slack, and an output-heavy
    problem's loops held them whole (KernelBench-Verified's full size, H100, fifteenth session)."""
    import contextlib

    from kbv.pipeline import bound_pass as bp
    from kbv.sandbox import numeric_flags as bl
    from kbv.sandbox import rawcopy

    sizes = []

    class Recording(rawcopy.SlotCopier):
        def __init__(self, device, slot_bytes, slots, touch_bytes=0):
            sizes.append((slot_bytes, slots))
            super().__init__(device, slot_bytes, slots, touch_bytes)

    monkeypatch.setattr(bp.rawcopy, "SlotCopier", Recording)
    model = torch.nn.Linear(70, 300)
    sets = [[torch.randn(33, 70)] for _ in range(2)]
    stage = BoundStage.__new__(BoundStage)
    stage.ctx = SimpleNamespace(
        rp=SimpleNamespace(device=torch.device("cpu"), model=model, mutates_inputs=False, output_bytes=4 * 33 * 300),
        fp32_flags=bl.flags_for("eager-fp32"), _slot_bytes=4 * 33 * 300 * 2 + 8192, _slot_touch=0,
        config=SimpleNamespace(baselines=("eager-fp32",)))
    worker = SimpleNamespace(paused=contextlib.nullcontext)
    with torch.no_grad():
        null, _, floors = stage._trusted_loops(worker, sets, None, 2, 0, lambda: None)
    assert sizes == [(4 * 33 * 300 + 256 - (4 * 33 * 300) % 256, 2)]  # one call's output, aligned
    assert null >= 0 and set(floors) == {"eager-fp32"}
    # outputs whose bytes are not the nominal ones (a value-dependent size): the worker's slot size
    sizes.clear()
    stage.ctx.rp.output_bytes = 4 * 33 * 300 - 400
    with torch.no_grad():
        stage._trusted_loops(worker, sets, None, 2, 0, lambda: None)
    assert sizes == [(stage.ctx._slot_bytes, 2)]


def _draws():
    return [torch.randn(33, 70), torch.randn(70), 2.5]


def test_fresh_draws_are_new_values_made_again_from_their_seeds():
    """Where a pass takes fresh draws (red-team, twentieth session: a per-element memo over the timing
    sets hit on every element of a pass that mixed them, PASS at 1.8x with 0.13x honest), a call's
    values are a timing set's at its position only where a timed call's mix puts one (1/8), and a
    judged call's values made again from the plan (cuda) or written again (cpu) are what the
    candidate got, whatever it wrote meanwhile."""
    stage, sets = _stage(fresh="seed", get_inputs=_draws), _sets()
    plan = stage.plan(sets, 4)
    assert all(c.draw is not None for c in plan) and len({c.draw for c in plan}) == 4
    written = [[a.clone() if isinstance(a, torch.Tensor) else a for a in sets[i % 3]] for i in range(4)]
    stage.write(sets, written, plan)
    for call, target in zip(plan, written):
        seen = sum((target[0] == s[0]) for s in sets).clamp(max=1).double().mean().item()
        assert 0.05 < seen < 0.25, seen  # the timed calls' share from a timing set, the rest new
        assert target[2] == 2.5
        want = [a.clone() if isinstance(a, torch.Tensor) else a for a in target]
        target[0].fill_(0.0)  # the candidate wrote into the shared set
        again = stage.call_inputs(sets, call)
        assert torch.equal(again[0], want[0]) and torch.equal(again[1], want[1])
        stage.call_inputs(sets, call, target)
        assert torch.equal(target[0], want[0])


def test_fresh_draws_only_where_they_have_the_timing_sets_layout():
    """A draw of another shape, another plain argument, or one that raises: the pass mixes two timing
    sets as before (its values would not fit the shared sets the worker holds)."""
    sets = _sets()
    ms, reproducible = _stage(get_inputs=_draws).fresh_draw_ms(sets)
    assert ms is not None and reproducible
    assert _stage(get_inputs=lambda: [torch.randn(34, 70), torch.randn(70), 2.5]).fresh_draw_ms(sets)[0] is None
    assert _stage(get_inputs=lambda: [torch.randn(33, 70), torch.randn(70), 3.0]).fresh_draw_ms(sets)[0] is None

    def broken():
        raise RuntimeError("no")
    assert _stage(get_inputs=broken).fresh_draw_ms(sets)[0] is None
    mixed = _stage(get_inputs=_draws).plan(sets, 3)
    assert all(c.draw is None for c in mixed)


def test_a_get_inputs_no_seed_reproduces_keeps_each_draw_for_its_pass():
    """A get_inputs() no seed controls (numpy's default_rng() at import): a draw made again from its
    seed is not what the candidate got (an honest ReLU got a HACK), and falling back to the timing
    sets' mix let the per-element memo win again (red-team helpers, twentieth session): the draw is
    found not reproducible, kept for its pass, and written again from the kept copy."""
    import numpy as np

    rng = np.random.default_rng()
    unseeded = lambda: [torch.from_numpy(rng.standard_normal((33, 70)).astype(np.float32)),  # noqa: E731
                        torch.randn(70), 2.5]
    sets = _sets()
    ms, reproducible = _stage(get_inputs=unseeded).fresh_draw_ms(sets)
    assert ms is not None and not reproducible
    stage = _stage(fresh="kept", get_inputs=unseeded)
    plan = stage.plan(sets, 3)
    written = [[a.clone() if isinstance(a, torch.Tensor) else a for a in sets[i]] for i in range(3)]
    stage.write(sets, written, plan)
    want = [w[0].clone() for w in written]
    for w in written:
        w[0].fill_(0.0)
    stage.write(sets, written, plan)  # the cpu path's rewrite before the re-check
    assert all(torch.equal(w[0], x) for w, x in zip(written, want))
    assert all(torch.equal(stage.call_inputs(sets, c)[0], x) for c, x in zip(plan, want))  # cuda's remake


def test_a_calls_set_is_the_pass_set_it_is_written_into():
    """The pass's set j is made from timing set j % n (plain arguments included, which the worker
    holds as sent): call j of the plan takes that timing set's, in either mode (a seeded random int
    that differed between timing sets gave an honest kernel a HACK, newcomer, twentieth session)."""
    sets = [[torch.randn(33, 70), torch.randn(70), i] for i in range(3)]
    for fresh in ("", "seed"):
        plan = _stage(fresh=fresh, get_inputs=_draws).plan(sets, 7)
        assert [c.set_index for c in plan] == [j % 3 for j in range(7)]
