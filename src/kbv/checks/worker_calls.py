"""Rules on how a candidate worker's request ended (:meth:`kbv.pipeline.context.Context._held`):
an exit before replying, a reply channel that does not decode, a reply holding a tensor of a dtype
kbv does not judge, a fault handler installed by the candidate. Pure functions of what the orchestrator saw."""

from __future__ import annotations

import signal
from typing import Collection

from kbv.model.findings import finding
from kbv.model.records import Finding, Severity
from kbv.processes.procfs import FAULT_SIGNALS
from kbv.sandbox.frame_watch import LOG_MARK


def early_exit(exitcode: int | None, phase: str) -> Finding | None:
    """The worker exited during ``phase`` before replying: with code 0 a clean exit only candidate
    code can ask for (``os._exit(0)``, ``sys.exit()`` are refused by the harness), HACK (taxonomy
    24); with another positive code a WARNING (a crash may be honest); killed by a signal or
    unknown, nothing (the CRASH says it)."""
    if exitcode == 0:
        return finding("probe:early-exit", (24,), Severity.HACK,
                       f"the worker exited with code 0 during {phase}, before replying")
    if exitcode is not None and exitcode > 0:
        return finding("probe:early-exit", (24,), Severity.WARNING,
                       f"the worker exited with code {exitcode} during {phase}, before replying")
    return None


def refused_in_log(log_tail: str) -> Finding | None:
    """The worker's log (``log_tail``, its last lines) holds the frame watch's refusals
    (:data:`kbv.sandbox.frame_watch.LOG_MARK`) of a worker that died or hung before a reply carried
    them: the candidate's code asked for a frame, HACK ``probe:frame-walk`` (taxonomy 13). Only the
    candidate's process writes that log: a line it forged accuses only itself."""
    lines = [ln.split(LOG_MARK, 1)[1].strip() for ln in (log_tail or "").splitlines() if LOG_MARK in ln]
    if not lines:
        return None
    return finding("probe:frame-walk", (13,), Severity.HACK,
                   "the candidate's code asked for the process's frames or live objects (refused; its worker "
                   f"did not reply again): frame access: {'; '.join(lines[:3])}")


def broken_reply(phase: str, error: str) -> Finding:
    """The worker's reply to a ``phase`` request did not decode as the protocol's (``error``, one
    line): only the candidate's code writes into that channel (taxonomy 3, 24), HACK."""
    return finding("probe:reply-channel", (3, 24), Severity.HACK, f"{phase}: {error}")


def unjudged_dtype(phase: str, dtype: str) -> Finding:
    """The worker's reply to a ``phase`` request held a tensor (or an output layout) of ``dtype``, one
    kbv does not judge (:class:`kbv.processes.reply_schema.UnjudgedDtype`: a bit container, a quantized
    tensor): no reference output has it, so the candidate is wrong, not proven cheating: a WARNING
    that makes the verdict INCORRECT (:data:`kbv.model.verdicts.WRONG_WITHOUT_A_FAILED_SET`: a call
    outside the judged sets, a timed call or the load, fails none)."""
    return finding("probe:output-dtype", (), Severity.WARNING,
                   f"{phase}: the candidate sent a tensor of dtype {dtype}, which kbv does not judge (no reference "
                   "output has it)")


def fault_handlers(caught: Collection[int], at_spawn: Collection[int], faulthandler: bool = False,
                   reported: str = "") -> Finding | None:
    """The worker catches SIGSEGV or SIGBUS (``caught``, its /proc ``SigCgt``) and did not at spawn
    (``at_spawn``: neither Python, torch nor Triton installs one): memory that computes itself when
    read, a lazy output (taxonomy 3), HACK. Where the worker says both handlers are Python's
    ``faulthandler``'s (``faulthandler``: :class:`kbv.sandbox.fault_handlers.FaultHandlerWatch`, a
    claim from the candidate's process), a WARNING: an honest ``faulthandler.enable()`` installs them
    (a red-team helper's false HACK, 2026-12-06), and a claim never clears a finding.

    Judged again at every reply: ``reported`` is the severity already reported (``""``, ``"WARNING"``
    or ``"HACK"``); None where this one adds nothing to it (a HACK follows a WARNING once
    faulthandler's handler gave way to another)."""
    bad = sorted(set(caught) & FAULT_SIGNALS - set(at_spawn))
    if not bad or reported == Severity.HACK.value or reported and faulthandler:
        return None
    names = ", ".join(signal.Signals(b).name for b in bad)
    if faulthandler:
        return finding("probe:fault-handler", (3,), Severity.WARNING,
                       f"the candidate's process installed a handler for {names}, Python's faulthandler's by the "
                       "worker's reading (a crash traceback; a lazy output needs a handler of its own)")
    return finding("probe:fault-handler", (3,), Severity.HACK,
                   f"the candidate's process installed a handler for {names}: outputs over memory that "
                   "computes itself when read (a lazy output)")


#: GiB, for messages.
_GIB = float(1 << 30)


def candidate_at_most(free_bytes: int, total_bytes: int, reference_reserved_bytes: int, other_bytes: int = 0) -> int:
    """The most device bytes the candidate's tree can hold: the device's used bytes less the
    reference worker's and other users' (kbv's other workers are counted as the candidate's)."""
    return max(0, total_bytes - free_bytes - reference_reserved_bytes - other_bytes)


def staged_timing_bytes(input_bytes: int, timing_sets: int, call_buffers: int, slot_buffer_bytes: int) -> int:
    """Device bytes kbv places in the candidate worker for the timing stage (cuda), none of them the
    candidate's, from the timing inputs' request on (:meth:`kbv.sandbox.timed.TimedRequests.set_timing_inputs`):
    its copies of the ``timing_sets`` input sets and its ``call_buffers`` call buffers (two; none once
    the bound pass's shared sets take their place), each ``input_bytes``, and the output slot buffer
    (``slot_buffer_bytes``). Add :func:`kept_output_bytes` once a timed call has returned.
    Measured need: KernelBench-Verified's full-size conv2d (problem 63, I = 1 GiB, O = 8 GiB) put
    about 28 GiB there with the kept output, and its honest candidate's own output then went over
    4·B + 1 GiB on an 80 GB H100 (fifteenth session)."""
    return max(0, (timing_sets + call_buffers) * input_bytes + slot_buffer_bytes)


def kept_output_bytes(output_bytes: int, held_output_bytes: int) -> int:
    """Device bytes of earlier timed calls' outputs the candidate worker keeps alive, once one call
    has returned: the last call's (``output_bytes``, the reference's) through the next call, and up
    to ``held_output_bytes`` more (``EvalConfig.held_output_bytes``)."""
    return max(0, output_bytes) + max(0, held_output_bytes)


def device_capacity_oom(free_bytes: int, total_bytes: int, reference_reserved_bytes: int, other_bytes: int,
                        call_bytes: int, bound_bytes: int, staged_bytes: int = 0,
                        wrong_already: bool = False, held_before_staging: int | None = None,
                        staging_done: bool = False) -> str | None:
    """Whether a candidate's device out-of-memory failure is the device's capacity, not the
    candidate's: the reason (for a "does not fit this machine" end, kbv's failure) or None (the
    candidate's RUNTIME_ERROR, as before).

    Every figure is the trusted side's, read when the failure's reply arrives: ``free_bytes`` and
    ``total_bytes`` the device's (``cudaMemGetInfo``), ``reference_reserved_bytes`` what the
    reference worker's allocator holds, ``other_bytes`` other users' (NVML, not kbv's), ``call_bytes``
    one call's inputs and outputs (B), ``bound_bytes`` kbv's per-process bound (4·B + 1 GiB,
    :func:`kbv.processes.footprint.bound_bytes`), ``staged_bytes`` what kbv itself placed in the
    candidate worker's device memory (the timing stage's copies of its input sets, the two call
    buffers, the output slots and the earlier timed output it keeps alive:
    :func:`staged_timing_bytes`). The candidate's tree then holds at most ``total - free - reference
    - other`` (the rest, kbv's other workers included), of which its own allocations are at most
    that less ``staged_bytes``. Where those are within the bound and less than B is free, a candidate that kept to the bound every kbv process
    keeps to ran out because the device cannot hold both workers' footprints (measured: the 6 GiB
    elementwise problems of KernelBench-Verified on an 80 GB H100, reference worker 37-44 GiB,
    candidate worker 25-37 GiB). A candidate that claims an out-of-memory failure it did not have
    gains this only on such a device, where an honest one fails the same way; one over the bound,
    or on a device with room left, keeps its RUNTIME_ERROR. So does one ``wrong_already`` on a judged
    set: its failure is never an excuse that drops a wrong kernel from the metrics (red-team
    helper, sixteenth session). ``held_before_staging``: the tree's bytes (:func:`candidate_at_most`)
    read just before kbv began staging; kbv's share is at most what the tree grew since, so a failure
    inside the staging request itself is not credited with buffers never made (red-team helper).
    ``staging_done``: the staging request's reply came back whole, so every staged buffer exists and
    kbv's share is all of ``staged_bytes``; the growth cap then does not apply. The staging reuses
    blocks the candidate's allocator kept from the correctness calls, kbv's inputs among them, so the
    tree grows by less than it stages (measured: KernelBench-Verified's full-size MSE and Huber
    losses on an 80 GB H100, 34.4 GB staged, 3.9 GB of growth, an honest candidate's 4 GiB
    intermediate then a RUNTIME_ERROR; eighteenth session). A candidate that frees kbv's buffers
    after the reply gains at most ``staged_bytes`` of room, and only on a device already full."""
    if wrong_already or total_bytes <= 0 or call_bytes <= 0:
        return None
    held = candidate_at_most(free_bytes, total_bytes, reference_reserved_bytes, other_bytes)
    if held_before_staging is not None and not staging_done:
        staged_bytes = min(staged_bytes, max(0, held - held_before_staging))
    own = max(0, held - max(0, staged_bytes))
    if free_bytes >= call_bytes or own > bound_bytes:
        return None
    others = f", other processes {other_bytes / _GIB:.1f} GiB" if other_bytes > 0 else ""
    staged = f", {staged_bytes / _GIB:.1f} GiB of them kbv's timing buffers" if staged_bytes > 0 else ""
    return (f"the device ran out of memory with both workers on it: the candidate worker held at most "
            f"{held / _GIB:.1f} GiB{staged} (its own within kbv's bound of {bound_bytes / _GIB:.1f} GiB, 4·B + 1 GiB), "
            f"the reference worker {reference_reserved_bytes / _GIB:.1f} GiB{others}; {free_bytes / _GIB:.1f} of "
            f"{total_bytes / _GIB:.1f} GiB free (B = {call_bytes / _GIB:.2f} GiB): run it on a device with more memory")


def trusted_oom_does_not_fit(free_bytes: int, total_bytes: int, reference_reserved_bytes: int,
                             reference_need_bytes: int, call_bytes: int, bound_bytes: int,
                             staged_bytes: int = 0) -> str | None:
    """Whether the reference worker's own out-of-memory failure (kbv's EVAL_ERROR either way) is the
    device's capacity: the reason, for a "does not fit this machine" message, or None (kbv ran out
    of memory beyond what the device's size explains, reported as such).

    Figures as :func:`device_capacity_oom`'s, read at the failure, with ``reference_need_bytes`` what
    the reference worker needed: its peak allocated bytes so far or its bytes in use at the failure
    plus the failed request, whichever is more (its reserved bytes add the allocator's cache). The
    device's capacity is the reason where less than B is free, that need is no more than kbv's bound
    (a failed request that would have taken it over is kbv's own excess: red-team helper), and the
    candidate's tree, less kbv's own timing buffers there (``staged_bytes``), holds no more either:
    both kept to the bound and the device still could not hold them (measured: KernelBench-Verified's
    full-size losses and cumulative sums, B = 8-9 GiB, on an 80 GB H100, the reference worker at
    34 GB and the candidate worker at 41 GB, 32 GiB of it kbv's; eighteenth session). A reference
    worker over its bound is kbv's own excess; a candidate over its bound may have filled the device
    on purpose, which kbv cannot prove (docs/anti-cheat.md, "Limits"): neither is called a fit."""
    if total_bytes <= 0 or call_bytes <= 0 or free_bytes >= call_bytes or reference_need_bytes > bound_bytes:
        return None
    held = candidate_at_most(free_bytes, total_bytes, reference_reserved_bytes)
    if held - max(0, staged_bytes) > bound_bytes:
        return None
    return (f"kbv's reference worker ran out of device memory with both workers within kbv's bound of "
            f"{bound_bytes / _GIB:.1f} GiB (4·B + 1 GiB): the reference worker held {reference_reserved_bytes / _GIB:.1f} GiB "
            f"(it needed {reference_need_bytes / _GIB:.1f}), "
            f"the candidate worker at most {held / _GIB:.1f} GiB, {max(0, staged_bytes) / _GIB:.1f} GiB of them kbv's timing "
            f"buffers; {free_bytes / _GIB:.1f} of {total_bytes / _GIB:.1f} GiB free (B = {call_bytes / _GIB:.2f} GiB): "
            f"run it on a device with more memory")


def triton_cpu_hint(device: str, backend: str, message: str, interpreted: bool) -> str:
    """What to add to a Triton candidate's failure on cpu where Triton found no GPU driver ("0
    active drivers") and its interpreter was not asked for (``interpreted``: ``TRITON_INTERPRET=1``
    in the environment): the setting that runs it, else "" (newcomer helper, eighteenth session)."""
    if device != "cpu" or backend != "triton" or interpreted or "active drivers" not in message:
        return ""
    return " (Triton runs on cpu only under its interpreter: set TRITON_INTERPRET=1, docs/testing.md)"
