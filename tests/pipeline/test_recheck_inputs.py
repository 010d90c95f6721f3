"""A re-check's reference run on the call's own values (``Judging._recheck`` with ``remake``, the
bound pass on cuda): the reference runs on them uncopied, one input set's bytes less held, and they
are written again before the oracle side reads them, so a reference that writes its inputs (through
``.data``: no version counter moves) leaves the oracle the values the candidate got."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from kbv.model.records import InputKind, InputSetResult
from kbv.pipeline import judging as jd
from kbv.pipeline.schedule import Recheck


class _Clamps(torch.nn.Module):
    """Writes its input through ``.data`` and returns a new tensor (or a view, ``alias``)."""

    def __init__(self, alias: bool = False):
        super().__init__()
        self.alias = alias

    def forward(self, x):
        x.data.clamp_(min=0.0)
        return x.view(-1) if self.alias else x * 2


def _judging(monkeypatch, model, *, mutates=False, aliases=False):
    rp = SimpleNamespace(model=model, mutates_inputs=mutates, aliases_inputs=aliases, mutation_checked=True,
                         structure="tensor", device=torch.device("cpu"), output_bytes=0, zero_strides=False)
    ctx = SimpleNamespace(rp=rp, fp32_flags={}, _nominal_rounding=None, name="t")
    j = jd.Judging(ctx)
    seen = {}

    def oracle_side(s, args, ref, rounding=None, defer_rounding=False):
        seen["oracle_args"] = [a.clone() for a in args]
        seen["ref"] = [r.clone() for r in ref]
        return None, None, {}

    def judge(s, outs, structure, ref, oracle, note, baselines, deferred=False):
        return InputSetResult(s.name, s.kind, s.transform, s.seed, passed=True)

    monkeypatch.setattr(jd, "run_reference", lambda rp, args, flags, original=None: (
        seen.setdefault("ran_on", [a.data_ptr() for a in args]), [rp.model(*args)])[1])
    monkeypatch.setattr(j, "exact_result", lambda *a, **k: None)
    monkeypatch.setattr(j, "_oracle_side", oracle_side)
    monkeypatch.setattr(j, "_judge", judge)
    return j, seen


def _run(j, values, remake):
    args = [values.clone()]
    state = Recheck()
    j._recheck([(7, 0, [torch.zeros(values.numel())])], {0: args}, state,
               remake=(lambda a: a[0].copy_(values)) if remake else None)
    return args, state


def test_with_remake_the_reference_runs_on_the_values_and_the_oracle_gets_them_again(monkeypatch):
    values = torch.tensor([-1.0, 2.0, -3.0, 4.0])
    j, seen = _judging(monkeypatch, _Clamps())
    args, state = _run(j, values, remake=True)
    assert seen["ran_on"] == [args[0].data_ptr()]  # no copy of the inputs
    assert torch.equal(seen["oracle_args"][0], values)  # written again before the oracle side
    assert torch.equal(seen["ref"][0], torch.tensor([0.0, 4.0, 0.0, 8.0]))
    assert state.checked == [7]


def test_without_remake_the_reference_runs_on_a_copy(monkeypatch):
    values = torch.tensor([-1.0, 2.0, -3.0, 4.0])
    j, seen = _judging(monkeypatch, _Clamps())
    args, _ = _run(j, values, remake=False)
    assert seen["ran_on"] != [args[0].data_ptr()]
    assert torch.equal(args[0], values) and torch.equal(seen["oracle_args"][0], values)


def test_a_reference_known_to_write_or_alias_its_inputs_runs_on_a_copy(monkeypatch):
    values = torch.tensor([-1.0, 2.0])
    for flags in ({"mutates": True}, {"aliases": True}):
        j, seen = _judging(monkeypatch, _Clamps(), **flags)
        args, _ = _run(j, values, remake=True)
        assert seen["ran_on"] != [args[0].data_ptr()], flags


def test_an_output_that_views_the_inputs_is_kept_apart_from_their_rewrite(monkeypatch):
    """A first-time view of the inputs (not yet known as aliasing): the reference's output keeps
    the values it returned, whatever the rewrite puts back."""
    values = torch.tensor([-1.0, 2.0, -3.0])
    j, seen = _judging(monkeypatch, _Clamps(alias=True))
    _run(j, values, remake=True)
    assert torch.equal(seen["ref"][0], torch.tensor([0.0, 2.0, 0.0]))
    assert torch.equal(seen["oracle_args"][0], values)


def test_a_later_call_on_the_same_set_gets_the_values_again_after_an_exact_one(monkeypatch):
    """Two kept calls on one set, the first equal to the reference (no oracle side, so no rewrite
    then), the second not: the oracle side still reads the values the candidate got (the set's
    values stay marked as run on until written again; red-team helper, 2026-12-06)."""
    values = torch.tensor([-1.0, 2.0, -3.0])
    j, seen = _judging(monkeypatch, _Clamps())
    exact = iter([InputSetResult("x", InputKind.NOMINAL, "", 0, passed=True, exact=True), None])
    monkeypatch.setattr(j, "exact_result", lambda *a, **k: next(exact))
    args = [values.clone()]
    state = Recheck()
    kept = [(1, 0, [torch.zeros(3)]), (2, 0, [torch.zeros(3)])]
    j._recheck(kept, {0: args}, state, remake=lambda a: a[0].copy_(values))
    assert torch.equal(seen["oracle_args"][0], values)
    assert state.checked == [1, 2] and not state.stale
