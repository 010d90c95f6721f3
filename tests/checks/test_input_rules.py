"""Which hidden test files checked less than they were given for (kbv.checks.input_rules.hidden_file_fault)."""

from __future__ import annotations

from kbv.checks.input_rules import hidden_file_fault
from kbv.model.records import InputKind, InputSetResult

PATH = "/h/level1/1_hidden.py"


def _set(name: str, transform: str, passed: bool | None = True, drop: str | None = None) -> InputSetResult:
    return InputSetResult(name, InputKind.HIDDEN if transform != "nominal" else InputKind.NOMINAL, transform, 1,
                          passed=None if drop else passed, dropped=drop is not None, drop_reason=drop)


def test_a_set_the_reference_raises_on_is_the_files_fault():
    sets = [_set("s0", "nominal"), _set("HT1", "hidden_tests[0]"),
            _set("HT2", "hidden_tests[1]", drop="reference raised TypeError: forward() takes 2 arguments")]
    assert hidden_file_fault(PATH, sets) == f"{PATH}: set HT2: reference raised TypeError: forward() takes 2 arguments"


def test_a_set_whose_outputs_alone_are_not_finite_stays_a_dropped_set():
    sets = [_set("HT1", "hidden_tests[0]"), _set("HT2", "hidden_tests[1]", drop="reference output has NaN/Inf")]
    assert hidden_file_fault(PATH, sets) is None


def test_a_file_none_of_whose_sets_was_judged_is_named():
    """Every set dropped for NaN/Inf: the file checked nothing (red-team helper: PASS, exit 0)."""
    sets = [_set("s0", "nominal"), *(_set(f"HT{k}", f"hidden_tests[{k}]", drop="reference output has NaN/Inf")
                                     for k in range(1, 5))]
    assert hidden_file_fault(PATH, sets) == f"{PATH}: none of its 4 set(s) could be judged (reference output has NaN/Inf)"


def test_other_kinds_of_set_are_passed_over():
    """A D-set the reference raises on is the problem's (a declared domain), not the file's."""
    sets = [_set("D2", "x3", drop="reference raised ValueError: domain"), _set("HT1", "hidden_tests[0]", passed=False)]
    assert hidden_file_fault(PATH, sets) is None
    assert hidden_file_fault(PATH, [_set("s0", "nominal")]) is None
