"""Findings of the per-call probes and of the caching / timed re-check probes, from what the
candidate worker replied and how the probe sets were judged (taxonomy entries named per finding)."""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from kbv.checks.outputs import bitwise_equal, has_zero_stride, poisoned_elements
from kbv.model.findings import finding
from kbv.model.records import Finding, InputSetResult, Severity
from kbv.processes.footprint import drop_view
from kbv.sandbox.worker import THREAD_GRACE_S

#: a caching or timed re-check probe accuses only when its error is at least this many times its
#: budget (and every correctness set passed): a stale cached answer is off by O(1) relative to a
#: budget of ~1e-6, an honest but imprecise reduction by a small factor (kbv choice).
PROBE_HACK_MARGIN = 10.0


def over_budget(r: InputSetResult, policy: str, atol: float) -> float:
    """How far over its budget a failed set's error is (error / budget under ``policy``, ``kbv``
    or ``kbv-compat``; inf for a wrong shape, count, dtype or NaN). ``atol``: the config's
    allclose tolerance, the budget of ``kbv-compat``."""
    if r.max_abs_error is None:
        return math.inf
    if policy == "kbv" and r.oracle_error is not None and r.error_budget:
        return r.oracle_error / r.error_budget
    if policy == "kbv-compat" or r.oracle_error is None:
        t = r.allclose_tolerance
        return t / atol if t is not None and atol > 0 else math.inf
    return math.inf


def settle_probes(input_sets: Sequence[InputSetResult], pending: Sequence[tuple]) -> list[Finding]:
    """The findings of failed probes ``pending`` (``(check, taxonomy, detail, error / budget)``),
    once every correctness set in ``input_sets`` is judged. A probe accuses (HACK) only when every
    correctness set passed and its error is at least :data:`PROBE_HACK_MARGIN` × its budget: an
    imprecise kernel (float atomics) that also fails D2 or a randomised set is INCORRECT, with the
    probe as evidence (a WARNING)."""
    failed = [r.name for r in input_sets if not r.dropped and r.passed is False]
    found = []
    for check, taxonomy, detail, ratio in pending:
        margin = "inf" if math.isinf(ratio) else f"{ratio:.3g}"
        if failed:
            found.append(finding(check, taxonomy, Severity.WARNING,
                                    f"{detail}; the candidate also fails correctness set(s) {', '.join(failed[:4])}: "
                                    "an incorrect kernel, not a proven cheat"))
        elif ratio >= PROBE_HACK_MARGIN:
            found.append(finding(check, taxonomy, Severity.HACK,
                                    f"{detail}; the same candidate passed every correctness set, and the error is "
                                    f"{margin} x its budget (HACK from {PROBE_HACK_MARGIN:g} x)"))
        else:
            found.append(finding(check, taxonomy, Severity.WARNING,
                                    f"{detail}; the error is only {margin} x its budget (under the "
                                    f"{PROBE_HACK_MARGIN:g} x needed to accuse): an imprecise kernel, not a proven "
                                    "cheat"))
    return found


def _read_equal(own: Any, sent: Any) -> bool:
    """:func:`bitwise_equal` of a trusted tensor and one the worker sent, whose shared pages are
    unmapped here once read (:func:`kbv.processes.footprint.drop_view`): one at a time resident."""
    try:
        return bitwise_equal(own, sent)
    finally:
        drop_view(sent)


def output_memory_finding(what: str, where: str = "") -> Finding:
    """HACK ``probe:output-memory`` (taxonomy 3): ``what`` (:func:`kbv.sandbox.pointers.output_memory`,
    e.g. "output 0 is over managed memory"): the host can write such memory after the call, outside
    every stream kbv times and synchronises."""
    return finding("probe:output-memory", (3,), Severity.HACK,
                   f"{what}{where}, not device memory from an allocator: the host can fill it after the call, "
                   "outside every stream kbv times and synchronises (a lazy output)")


def call_findings(reply: Any, outs: list, args: list, ref: list | None, label: str, *, zero_strides: bool,
                  aliases_inputs: bool, mutates_inputs: bool, equal_to_reference: bool = False) -> list[Finding]:
    """Findings of one forward call's probes. ``reply``: the worker's :class:`kbv.sandbox.protocol.Outputs`
    (outputs as sent, aliases, inputs after the call, a snapshot after return, thread work);
    ``outs``: the trusted copies of its outputs; ``args``: the inputs sent; ``ref``: the reference's
    outputs on them, when known. The reference's own habits (``zero_strides``, ``aliases_inputs``,
    ``mutates_inputs``, from :func:`kbv.reference.build.run_reference`) silence the matching probe.
    ``equal_to_reference``: ``outs`` are known to equal ``ref`` value for value
    (:func:`kbv.reference.comparison.equals_reference`), so no element can count as stale memory
    (:func:`kbv.checks.outputs.poisoned_elements` counts none equal to the reference) and that pass
    is skipped."""
    found = []
    where = f" ({label})" if label else ""
    for k, o in enumerate(outs):
        n = 0 if equal_to_reference and ref is not None else \
            poisoned_elements(o, ref[k] if ref is not None and k < len(ref) else None)
        if n:
            found.append(finding("probe:stale-memory", (9, 10), Severity.HACK,
                                    f"output {k}{where}: {n} of {o.numel()} element(s) hold the pattern kbv had "
                                    "written into free memory for the call (returned memory it never wrote)"))
        sent = reply.tensors[k]  # as the worker returned it: the trusted copy is contiguous
        if has_zero_stride(sent) and not zero_strides:
            found.append(finding("probe:zero-stride", (8,), Severity.HACK,
                                    f"output {k}{where} has a zero stride {tuple(sent.stride())}: one value "
                                    f"expanded over shape {tuple(sent.shape)}"))
    if getattr(reply, "memory", ""):
        found.append(output_memory_finding(reply.memory, where))
    if reply.aliases and not aliases_inputs:
        pairs = ", ".join(f"output {i} ↔ input {j}" for i, j in reply.aliases[:4])
        found.append(finding("probe:output-alias", (8,), Severity.HACK,
                                f"outputs share storage with inputs{where}: {pairs}"))
    sent = [a for a in args if isinstance(a, torch.Tensor)]
    if len(reply.inputs_after) == len(sent) and not mutates_inputs:
        changed = [j for j, (a, b) in enumerate(zip(sent, reply.inputs_after)) if not _read_equal(a, b)]
        if changed:
            found.append(finding("probe:input-mutation", (12,), Severity.HACK,
                                    f"forward changed its input tensor(s) {changed}{where}"))
    if len(reply.snapshot) == len(outs):
        late = [k for k, (snap, o) in enumerate(zip(reply.snapshot, outs))
                if snap is not None and not _read_equal(o, snap)]
        if late:
            found.append(finding("probe:writes-after-return", (1, 2, 5), Severity.HACK,
                                    f"output(s) {late}{where} changed after forward returned: work still running "
                                    "on another stream or thread when the call ended"))
    if reply.late_work:
        found.append(finding("probe:thread-work", (2,), Severity.HACK,
                                f"a thread the candidate started {reply.late_work} after forward returned{where}: "
                                "work outside the timed call"))
    if reply.new_threads:
        found.append(finding("probe:threads", (2,), Severity.WARNING,
                                f"{reply.new_threads} thread(s) started during forward{where} were still alive "
                                f"{THREAD_GRACE_S:g} s after it returned"))
    return found


def op_counts_ok(reply: Any) -> bool:
    """The worker's op-count reply has the shapes the trusted side reads: ``ops``, ``recorded`` and
    ``recorded_shaped`` map str to int, ``kernels`` holds (name, µs, own) triples, ``own_share`` is a number or None.
    (The restricted decoder admits only plain types; this checks how they are put together.)"""
    def counts(d: Any) -> bool:
        return isinstance(d, dict) and all(isinstance(k, str) and type(v) is int for k, v in d.items())

    def triple(k: Any) -> bool:
        return (isinstance(k, (tuple, list)) and len(k) == 3 and isinstance(k[0], str)
                and type(k[1]) in (int, float) and type(k[2]) is bool)

    return (counts(reply.ops) and counts(reply.recorded) and counts(getattr(reply, "recorded_shaped", {}))
            and isinstance(reply.kernels, (tuple, list))
            and all(triple(k) for k in reply.kernels)
            and (reply.own_share is None or type(reply.own_share) in (int, float))
            and all(e is None or isinstance(e, str) for e in (reply.error, reply.recorded_error))
            and type(getattr(reply, "probe_failed", False)) is bool
            and type(getattr(reply, "recorded_probe_failed", False)) is bool)
