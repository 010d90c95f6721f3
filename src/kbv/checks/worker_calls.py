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
