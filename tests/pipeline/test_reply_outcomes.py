"""What the pipeline makes of a reply that does not decode (kbv.pipeline.context.Context._held): a
forged reply is the reply channel's HACK, a tensor of a dtype kbv cannot judge the candidate's
INCORRECT, never kbv's own EVAL_ERROR. A stand-in worker raises what the decoder would."""

from __future__ import annotations

import pytest

from conftest import problem
from kbv.model.findings import finding
from kbv.model.records import CandidateRef, Environment, EvalConfig, InputKind, Severity, Status
from kbv.pipeline.context import Context
from kbv.pipeline.correctness import Correctness
from kbv.pipeline.judging import Judging
from kbv.pipeline.outcome import Outcome, Stop
from kbv.processes.reply_schema import UnjudgedDtype
from kbv.reference import inputs as inp
from kbv.reference.build import build_reference
from kbv.sandbox import protocol
from verdict_factory import make_verdict


class _Refusing:
    """A candidate worker whose every reply the decoder refuses with ``error``."""

    def __init__(self, error: Exception):
        self.error = error

    def call(self, request, *, phase: str, timeout: float):  # noqa: ARG002
        raise self.error


@pytest.fixture(scope="module")
def rp():
    return build_reference(problem("level1/1_Small_ReLU.py"), EvalConfig(device="cpu"))


def _ctx(rp) -> Context:
    return Context(rp, CandidateRef("/c/x.py", "b" * 64, "torch"), EvalConfig(device="cpu"),
                   Environment("0", "3", "2", "cpu"))


def test_a_forged_reply_is_the_reply_channels_hack(rp):
    ctx = _ctx(rp)
    with pytest.raises(Stop) as stop:
        ctx._call(_Refusing(protocol.ProtocolError("Outputs.tensors: int, not a tuple of anything")),
                  protocol.Ping(), "forward", 1.0)
    assert stop.value.outcome is Outcome.BAD_REPLY
    assert [(f.check, f.severity) for f in ctx.state.findings] == [("probe:reply-channel", Severity.HACK)]


def test_an_unjudged_dtype_outside_a_judged_set_is_incorrect_by_its_finding(rp):
    """A timed call's output, or ModelNew's state at load, of a dtype kbv cannot read: wrong, with no
    set to fail; the finding makes the verdict INCORRECT (not kbv's ValueError, an EVAL_ERROR)."""
    ctx = _ctx(rp)
    with pytest.raises(Stop) as stop:
        ctx._call(_Refusing(UnjudgedDtype("torch.quint8")), protocol.Ping(), "time", 1.0)
    assert stop.value.outcome is Outcome.WRONG and "torch.quint8" in stop.value.message
    assert stop.value.evidence["unjudged_dtype"] == "torch.quint8"
    (f,) = ctx.state.findings
    assert f.check == "probe:output-dtype" and f.severity is Severity.WARNING and "torch.quint8" in f.detail
    v = make_verdict(Status.INCORRECT, findings=[f])
    assert v.status is Status.INCORRECT and v.policy_verdicts["kbv"] is False


def test_an_unjudged_dtype_on_a_correctness_set_fails_that_set_naming_both_dtypes(rp):
    ctx = _ctx(rp)
    s = inp.InputSet("nominal-0", InputKind.NOMINAL, "get_inputs()", 1, inp.draw(rp.module.get_inputs, 1, rp.device))
    r = Correctness(ctx, Judging(ctx))._check_set(_Refusing(UnjudgedDtype("torch.bits16")), s)
    assert r.passed is False and not any(r.policy_passed.values())
    assert "dtype torch.bits16, which kbv does not judge" in r.fault and "reference returns torch.float32" in r.fault


def test_other_warnings_still_need_a_failed_set_for_incorrect():
    with pytest.raises(ValueError, match="INCORRECT needs"):
        make_verdict(Status.INCORRECT, findings=[finding("probe:threads", (2,), Severity.WARNING, "1 thread")])
