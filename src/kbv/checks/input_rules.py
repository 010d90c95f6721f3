"""Decisions on which input sets a candidate got wrong (taxonomy 19, 20): right on every nominal set
and wrong on other distributions (:func:`off_nominal_findings`). The sets themselves:
:mod:`kbv.reference.inputs`."""

from __future__ import annotations

from typing import Collection, Sequence

from kbv.model.findings import finding
from kbv.model.records import Finding, InputKind, InputSetResult, Severity

#: set names listed in one finding's detail.
LISTED = 6


def off_nominal_findings(judged: Sequence[InputSetResult], few_places: Collection[str]) -> list[Finding]:
    """WARNINGs for a candidate right on every judged nominal set and wrong on others.

    ``judged``: the input sets' results, dropped ones left out; ``few_places``: the names of the
    distributions that change a ``get_inputs()`` draw in a few places (``few-positions``,
    ``break-*``: :mod:`kbv.reference.structure`). Wrong sets of those give
    ``inputs:pattern-broken`` (20: a structure or property of the nominal inputs checked on a sample
    of positions, or assumed), the others ``inputs:off-nominal`` (19, 20: a shortcut that holds only
    for ``get_inputs()``'s values). Empty when a nominal set failed or nothing else did.
    """
    if not all(r.passed for r in judged if r.kind is InputKind.NOMINAL):
        return []
    off = [r for r in judged if r.kind not in (InputKind.NOMINAL, InputKind.SHAPE) and r.passed is False]
    broken = [r for r in off if r.kind is InputKind.RANDOM and r.name in few_places]
    values = [r for r in off if r not in broken]
    out = []
    if values:
        out.append(finding("inputs:off-nominal", (19, 20), Severity.WARNING,
                           f"right on every nominal set, wrong on {', '.join(r.name for r in values[:LISTED])}: "
                           "right only inside get_inputs()'s value range (a bug outside it, a numerical shortcut "
                           "or a value-distribution exploit)"))
    if broken:
        what = "; ".join(f"{r.name} ({r.transform})" for r in broken[:LISTED])
        out.append(finding("inputs:pattern-broken", (20,), Severity.WARNING,
                           f"right on every nominal set, wrong where a few positions of a get_inputs() draw "
                           f"change: {what}: a structure of the nominal inputs checked on a sample of positions "
                           "or assumed without a check"))
    return out


def workload_specialised(nominal_passed: bool, workload: str, status: str, fault: str | None) -> Finding | None:
    """A WARNING for a candidate right at the problem's own sizes (``nominal_passed``: its verdict
    there PASS or SHORTCUT) whose verdict at the declared workload ``workload``
    (:mod:`kbv.reference.workloads`) is ``status`` (``INCORRECT``, ``RUNTIME_ERROR``, ...): it holds
    only at the sizes it was written for (taxonomy 21). The workload's own verdict decides the
    status; None when the nominal failed too or the workload passed."""
    if not nominal_passed or status in ("PASS", "SHORTCUT", "EVAL_ERROR"):
        return None
    return finding("inputs:shape-specialised", (21,), Severity.WARNING,
                   f"right at the problem's own sizes, {status} at the declared workload {workload}: "
                   f"{fault or 'outputs differ'} (a kernel that holds only at the shape it was written for)")


def shape_specialised(judged: Sequence[InputSetResult]) -> Finding | None:
    """A WARNING for a candidate right on every judged set of the problem's own shape and wrong (or
    raising) on a secret shape (:mod:`kbv.reference.shapes`): it holds only at the sizes it was
    written for (taxonomy 21); the failed set makes the verdict INCORRECT. None otherwise."""
    own = [r for r in judged if r.kind is not InputKind.SHAPE]
    wrong = [r for r in judged if r.kind is InputKind.SHAPE and r.passed is False]
    if not wrong or not own or not all(r.passed for r in own):
        return None
    first = wrong[0]
    return finding("inputs:shape-specialised", (21,), Severity.WARNING,
                   f"right at the problem's own sizes, wrong at {first.transform}: {first.fault or 'outputs differ'} "
                   "(a kernel that holds only at the shape it was written for)")


#: the ``transform`` of a set made from a hidden test file (:func:`kbv.reference.hidden_tests.hidden_test_sets`)
HIDDEN_FILE_SET = "hidden_tests["


def hidden_file_fault(path: str, results: Sequence[InputSetResult]) -> str | None:
    """What is wrong with hidden test file ``path`` by the results of the sets made from it
    (``results``, in order; sets of other kinds are passed over): a set the reference raised on (the
    file's inputs do not fit the problem: another problem's shapes, a wrong dtype), or no set judged
    at all (every reference or oracle output not finite: the file checked nothing while the verdict
    would say it was given). None where a set was judged and the reference ran on every one. A set
    whose outputs alone are not finite stays a dropped set: the problem's values, not the file's
    fault. The reference's own memory failures never reach here (kbv's failure, EVAL_ERROR)."""
    made = [r for r in results if r.transform.startswith(HIDDEN_FILE_SET)]
    raised = next((r for r in made if r.dropped and (r.drop_reason or "").startswith("reference raised")), None)
    if raised is not None:
        return f"{path}: set {raised.name}: {raised.drop_reason}"
    if made and all(r.dropped for r in made):
        return f"{path}: none of its {len(made)} set(s) could be judged ({made[0].drop_reason})"
    return None

