"""kbv.pipeline.run.Verification._memory_failure: the reference worker's own out-of-memory failure
is kbv's (EVAL_ERROR), said as "does not fit this machine" where the device's figures show it,
unless a judged set already failed: then the set's WRONG stands (red-team helper, eighteenth
session: a wrong kernel filling the device after its failed set ended as kbv's failure)."""

from __future__ import annotations

import types

from kbv.model.records import InputKind, InputSetResult
from kbv.pipeline.outcome import Outcome
from kbv.pipeline.run import Verification


def _verification(sets, fit=None):
    v = Verification.__new__(Verification)
    shaped = []
    v.ctx = types.SimpleNamespace(name="c.py", state=types.SimpleNamespace(input_sets=list(sets), evidence={}),
                                  _trusted_oom_fit=lambda exc: fit, _oom_fit=None)
    v.shapes = types.SimpleNamespace(_shape_finding=lambda: shaped.append(1))
    return v, shaped


def _set(name, passed, dropped=False):
    if dropped:  # a dropped set carries no verdict
        return InputSetResult(name, InputKind.NOMINAL, "", 0, passed=None, dropped=True, drop_reason="reference NaN")
    return InputSetResult(name, InputKind.NOMINAL, "", 0, passed=passed, fault="max error 3.1")


def test_a_set_already_wrong_stands_over_kbvs_later_memory_failure():
    v, shaped = _verification([_set("N1", True), _set("N2", False)], fit="device full")
    outcome, message = v._memory_failure(MemoryError())
    assert outcome is Outcome.WRONG and "wrong on" in message and "then kbv ran out of memory" in message
    assert v.ctx.state.evidence["failed_sets"] == ["N2"] and shaped == [1]


def test_otherwise_it_is_kbvs_failure_said_as_the_device_shows_it():
    v, _ = _verification([_set("N1", True), _set("N2", None, dropped=True)], fit="both workers within the bound")
    outcome, message = v._memory_failure(MemoryError())
    assert outcome is Outcome.KBV_FAILED and "does not fit this machine: both workers" in message
    v, _ = _verification([_set("N1", True)])
    outcome, message = v._memory_failure(MemoryError("x"))
    assert outcome is Outcome.KBV_FAILED and "kbv ran out of memory in the reference worker (MemoryError: x)" in message


def test_a_reading_made_at_the_secret_shape_is_the_one_used():
    v, _ = _verification([_set("N1", True)], fit=None)
    oom = MemoryError("x")
    v.ctx._oom_fit = (oom, "read at the shape")
    outcome, message = v._memory_failure(oom)
    assert outcome is Outcome.KBV_FAILED and "does not fit this machine: read at the shape" in message
    outcome, message = v._memory_failure(MemoryError("another"))  # not that failure: read again (None)
    assert "kbv ran out of memory in the reference worker" in message
