"""Rules on what a candidate returned (:mod:`kbv.pipeline.correctness`, :mod:`kbv.pipeline.judging`,
:mod:`kbv.pipeline.timing_rounds`): its type, its shape, outputs repeated across calls, outputs shared
with the previous call or the model's own storage, and errors within allclose but over kbv's
budget. Pure functions of the facts the trusted side read."""

from __future__ import annotations

from typing import Sequence

from kbv.model.findings import finding, name_list
from kbv.model.records import Finding, Severity


def tensor_subclass_output(index: int, type_name: str) -> Finding:
    """Output ``index`` arrived as a Tensor subclass (``type_name``): only a lazy or proxy output
    has a reason to be one (taxonomy 3), HACK."""
    return finding("probe:output-type", (3,), Severity.HACK,
                   f"output {index} is a {type_name}, a Tensor subclass (lazy output?)")


def proxy_outputs(not_exact: Sequence[int]) -> Finding | None:
    """Outputs the worker saw as a subclass or proxy before serialising them into plain tensors
    (``not_exact``: their indices): a lazy output (taxonomy 3), HACK; None when there are none."""
    if not not_exact:
        return None
    return finding("probe:output-type", (3,), Severity.HACK,
                   f"forward returned output(s) {list(not_exact)} as a Tensor subclass or proxy, not a torch.Tensor "
                   "(serialised into a plain tensor on the way out: a lazy output)")


def repeated_output(first: str, second: str, constant: bool, fresh_repeats: bool = True) -> Finding:
    """Bit-identical outputs on input sets ``first`` and ``second`` whose references differ (both
    not passed). ``fresh_repeats``: the candidate gave the same output again on a fresh draw of the
    problem's inputs, unrelated to both: a result cached across calls (taxonomy 8, 11), HACK. Where
    the fresh draw gave a new output the repeat is the candidate's own function (an even function on
    D1 and D4, whose inputs are ``x`` and ``-x``: ``abs`` for a ReLU; wrong, not a cache: a newcomer's
    honest wrong kernel was HACK), a WARNING; a ``constant`` output (one value everywhere, the shape
    of a kernel that writes nothing as much as of a cheat, and wrong anyway) is a WARNING."""
    if constant:
        return finding("probe:repeated-output", (8,), Severity.WARNING,
                       f"the same constant output on {first} and {second}, whose references differ")
    if not fresh_repeats:
        return finding("probe:repeated-output", (8,), Severity.WARNING,
                       f"bit-identical outputs on {first} and {second}, whose references differ; a fresh input "
                       "gave a new output, so this repeat alone shows no result cached across calls (an even "
                       "function such as abs repeats on D1 and D4); other findings may")
    return finding("probe:repeated-output", (8, 11), Severity.HACK,
                   f"bit-identical outputs on {first} and {second}, whose references differ, and again on a "
                   "fresh draw of the inputs (a result cached across calls)")


def not_repeatable(name: str) -> Finding:
    """The same inputs (set ``name``) at new addresses gave bitwise different outputs: honest
    non-deterministic reductions do this too, so a WARNING (taxonomy 10)."""
    return finding("probe:repeatability", (10,), Severity.WARNING,
                   f"the same inputs ({name}) gave bitwise different outputs at new addresses "
                   "(non-deterministic reductions, or uninitialised reads)")


def shape_mismatch(name: str, shapes: Sequence[tuple]) -> Finding | None:
    """Outputs whose shapes differ from the reference's (``shapes``: ``(output shape, reference
    shape)`` pairs, the mismatched ones): a smaller problem computed? A WARNING (the set fails on its
    own); None when every shape agrees."""
    if not shapes:
        return None
    got, want = shapes[0]
    return finding("probe:output-shape", (14,), Severity.WARNING,
                   f"{name}: output shape {got}, the reference's {want} (a smaller problem computed?)")


def within_allclose(name: str, atol: float, rtol: float, error: float, budget: float,
                    weights: Sequence[str] = ()) -> Finding:
    """Set ``name`` passes allclose(atol, rtol) but its error against the fp64 oracle is over kbv's
    budget (taxonomy 10, 17, 19): a precision downgrade, garbage within tolerance or a numerical
    shortcut, a WARNING (the kbv policy's own verdict fails the set). ``weights``: Model's parameters
    that ModelNew's differ from or do not match (the load's check): named first as the likelier cause."""
    cause = "precision downgrade, garbage within tolerance or a numerical shortcut"
    if weights:  # the likelier cause, named first; the others stay possible
        cause = f"ModelNew's weights differ from Model's or match none of them: {name_list(weights)}; else {cause}"
    return finding("oracle:within-allclose", (10, 17, 19), Severity.WARNING,
                   f"{name}: passes allclose(atol={atol:g}, rtol={rtol:g}) but its error vs the fp64 oracle is "
                   f"{error:.3g}, over the budget {budget:.3g} ({cause})")


def reused_output(whose: str) -> Finding:
    """A timed call returned storage shared with ``whose`` (the previous timed call's output, or a
    parameter or buffer of ModelNew): the output is not the caller's (taxonomy 8), HACK."""
    return finding("probe:output-reused", (8,), Severity.HACK,
                   f"a timed call returned storage shared with {whose}: the output is not the caller's (the next "
                   "call overwrites it, and the allocation the reference pays is skipped)")


def implausible_times_finding(bad: Sequence[float]) -> Finding:
    """Timed-call figures that are not finite and positive (taxonomy 7): only a forged clock
    reports them, HACK."""
    return finding("timing:non-positive", (7,), Severity.HACK, f"implausible candidate times {list(bad)[:3]} ms")
