"""The detectors' cost cuts keep the checks (issue 15, issue 4's 2x budget): the probe sets and the
timed re-checks take the input-rounding term of their budget from the nominal sets instead of a
second float64 forward of their own, and ``largest_errors`` combines the nominal sets' figures."""

from __future__ import annotations

from conftest import problem
from kbv.model.records import CandidateRef, Environment, EvalConfig, InputKind
from kbv.pipeline.context import Context
from kbv.pipeline.judging import Judging, largest_errors
from kbv.reference import inputs as inp
from kbv.reference.build import build_reference
from kbv.reference.policy import INPUT_ROUNDING


def test_largest_errors_keeps_the_larger_figure_per_output():
    assert largest_errors(None, [1e-7, None]) == [1e-7, None]
    assert largest_errors([1e-7, None, 3e-7], [2e-7, None, 1e-7]) == [2e-7, None, 3e-7]
    assert largest_errors([None], [4e-7]) == [4e-7]


def _counting_judge():
    """A cpu Judging on the small softmax whose input-rounding runs are counted (one entry each)."""
    cfg = EvalConfig(device="cpu")
    rp = build_reference(problem("level1/5_Small_Softmax.py"), cfg)
    j = Judging(Context(rp, CandidateRef("/c/x.py", "b" * 64, "torch"), cfg, Environment("0", "3", "2", "cpu")))
    forwards: list = []
    real = j.ctx.oracle.input_rounding_errors
    j.ctx.oracle.input_rounding_errors = lambda *a, **k: forwards.append(1) or real(*a, **k)
    return rp, j, forwards


def test_probe_sets_reuse_the_nominal_sets_input_rounding_term():
    rp, j, forwards = _counting_judge()
    sides = []
    for seed in (1, 2):  # nominal sets measure the term and collect the largest
        s = inp.InputSet(f"nominal-{seed}", InputKind.NOMINAL, "get_inputs()", seed,
                         inp.draw(rp.module.get_inputs, seed, rp.device))
        sides.append(j._reference_side(s, s.args))
    assert len(forwards) == 2
    measured = [side[3][INPUT_ROUNDING] for side in sides]
    assert j.ctx._nominal_rounding == largest_errors(measured[0], measured[1])
    probe = inp.InputSet("probe-same-address", InputKind.NOMINAL, "new values", 3,
                         inp.draw(rp.module.get_inputs, 3, rp.device))
    ref, oracle, _, errors = j._reference_side(probe, probe.args, j.ctx._nominal_rounding)
    assert len(forwards) == 2  # no second float64 forward for the probe
    assert errors[INPUT_ROUNDING] == j.ctx._nominal_rounding and "eager-fp32" in errors
    assert ref[0].shape == oracle[0].shape


def test_a_hidden_sets_input_rounding_term_is_measured_only_where_the_set_fails_without_it():
    """A D-set (made again from its seed) defers its term to the judgement (issue 21: the term only
    where a set would fail without it): outputs along a range of errors get, deferred, the same
    verdict, error and, where they fail, the same budget as measured up front; the float64 forwards
    run only for the failing ones."""
    import torch

    rp, j, forwards = _counting_judge()
    (d1,) = inp.hidden_sets(rp.module.get_inputs, ["D1"], device=rp.device)
    assert j.defers_rounding(d1, probe=False) and not j.defers_rounding(d1, probe=True)
    eager = j._reference_side(d1, d1.args)
    ref, oracle, note, errors = eager
    assert INPUT_ROUNDING in errors and len(forwards) == 1
    deferred = j._reference_side(d1, d1.args, defer_rounding=True)
    assert INPUT_ROUNDING not in deferred[3] and len(forwards) == 1
    d1.release()
    outcomes = set()
    for t in (0.0, 1e-7, 1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 1e-3):
        outs = [(o * (1 + t)).to(torch.float32) for o in oracle]
        want = j._judge(d1, outs, rp.structure, ref, oracle, note, errors)
        before = len(forwards)
        got = j._judge(d1, outs, rp.structure, deferred[0], deferred[1], deferred[2], deferred[3], deferred=True)
        assert (got.passed, got.oracle_error) == (want.passed, want.oracle_error), t
        assert len(forwards) == before + (0 if got.passed else 1), t
        if not got.passed:
            assert got.error_budget == want.error_budget and INPUT_ROUNDING in got.baseline_errors, t
        outcomes.add(got.passed)
    assert outcomes == {True, False}  # the range crosses the budget


def test_outputs_equal_to_the_reference_pass_without_the_oracle_and_as_the_oracle_would_judge_them():
    """Issue 21 (one pass over the bytes): a set whose outputs equal the eager-fp32 reference's is
    judged without the float64 oracle, and passes as the oracle path passes it (``k >= 1``); one
    element one float32 ulp away is no longer exact and goes to the oracle path."""
    import torch

    rp, j, forwards = _counting_judge()
    oracle_runs: list = []
    j.ctx.oracle = _Counted(j.ctx.oracle, oracle_runs)
    (d1,) = inp.hidden_sets(rp.module.get_inputs, ["D1"], device=rp.device)
    args = d1.args
    ref = j._reference_run(d1, args)
    assert isinstance(ref, list) and not oracle_runs
    same = [r.clone() for r in ref]
    r = j.exact_result(d1, same, rp.structure, ref, args)
    assert r is not None and r.exact and r.passed and r.policy_passed == {"kbv": True, "kbv-compat": True}
    assert r.oracle_error is None and r.max_abs_error == 0.0 and not oracle_runs and not forwards
    full = j._reference_side(d1, args)  # the oracle path's verdict on the same outputs
    assert j._judge(d1, same, rp.structure, *full).passed
    off = [t.clone() for t in ref]
    flat = off[0].view(-1)
    flat[0] = torch.nextafter(flat[0], torch.tensor(float("inf")))
    assert j.exact_result(d1, off, rp.structure, ref, args) is None
    assert j.exact_result(d1, same, "tuple", ref, args) is None  # another structure is judged in full


class _Counted:
    """An oracle whose forward calls are counted (attributes pass through)."""

    def __init__(self, oracle, runs: list) -> None:
        self._o, self._runs = oracle, runs

    def __call__(self, *a, **k):
        self._runs.append(1)
        return self._o(*a, **k)

    def __getattr__(self, name):
        return getattr(self._o, name)
