"""Feedback for the next refinement turn, and the scalar reward, built from a :class:`Verdict`.

What the feedback may carry (public facts about the candidate) and what it never carries:

=====================  =========================================================================
status                 the verdict status and what it means
build failures         ``COMPILE_ERROR`` message, traceback tail and build log tail: the build
                       happens before any input exists in the candidate's process
run failures           phase and exception type, the message with every number replaced by ``#``;
                       never the log or the traceback: code that saw the inputs can print them
nominal sets           which ``nominal-k`` sets failed and how (error vs budget, share of
                       mismatched elements, the fault line; numbers in faults masked when
                       input-blind, since shapes are test configuration there)
hidden sets            only how many failed out of how many: D1–D4, kbv's randomised
                       distributions and hidden-test sets are never named, nor their values
findings               severity, check name and taxonomy titles, never the detector's detail
timing                 candidate and baseline medians (ms), speedups, memory efficiency
=====================  =========================================================================

Never: input values, seeds (nominal or secret), reference or oracle outputs. As a last guard
every seed of the verdict that still occurs in the text is masked (:func:`feedback_text`).

Reward (:func:`reward`), one scalar per verdict, meant for RL and for picking the best turn:

==============================================  ==========================================
PASS                                            ``1 + 0.5 * clip(log2(speedup), -1, 3)``
                                                (0.5 at 0.5x, 1 at 1x, 1.5 at 2x, 2.5 at 8x+)
SHORTCUT (correct, speed from PyTorch itself)   0.3
INCORRECT (built and ran, wrong somewhere)      0.1
COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT, CRASH,   0.0
no code block in the answer
HACK (an integrity detector caught a cheat)     -1.0
EVAL_ERROR (kbv's own failure)                  0.0 with ``valid=False``: drop the sample
==============================================  ==========================================

A verdict on a problem that vetting flagged (``Verdict.problem_flags``: a stochastic or
constant-output reference, for example) keeps its score but has ``valid=False`` too: the problem
cannot tell a right kernel from a wrong one, so the sample says nothing about the model.

``speedup`` is against ``eager-tf32`` (kbv's verified baseline), else ``eager-fp32``. A PASS whose
timing carries ``timing:claim-below-bound`` (the candidate's own clock claimed less than the trusted
side measured, unconfirmed as a lie: :mod:`kbv.checks.bound_rules`) earns the least a PASS earns,
0.5, whatever its credited speedup: a forged clock the bound caught never scores above the same
kernel reporting honestly (a forger credited the trusted floor, faster than its true time, scored
1.0 while an honest kernel slower than eager scored 0.5: issue 19's red team), and an honest kernel
so flagged by a disturbed pass loses at most its speed term.

The backend asked for counts (``backend``: ``cuda``, ``triton`` or ``cpp``, as the prompt asked):
an answer of another backend (:func:`kbv.intake.candidates.detect_backend` on the file: plain
PyTorch where C++ was asked, say) did not do the task, whatever its verdict, and scores 0 (a HACK
keeps -1); its feedback says so on the first line after the status. :attr:`Reward.status_score` keeps
what the verdict alone would have scored, so a correct answer of the wrong backend still ranks above
a wrong one when turns tie.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kbv.model.records import TAXONOMY, InputKind, Severity, Status, Verdict

_NUMBER_RE = re.compile(r"(?<![A-Za-z_])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_MAX_LINES = 30
REWARD_BASELINES = ("eager-tf32", "eager-fp32")

_MEANING = {
    Status.PASS: "correct on every check, and timed",
    Status.INCORRECT: "it ran but produced wrong results on some checks",
    Status.HACK: "an integrity check caught behaviour no honest kernel has",
    Status.SHORTCUT: "correct, but the speed comes from PyTorch's own operators, not your kernels",
    Status.COMPILE_ERROR: "importing, building or constructing ModelNew failed",
    Status.RUNTIME_ERROR: "forward raised an error or returned something that is not a tensor",
    Status.TIMEOUT: "a call took longer than allowed",
    Status.CRASH: "the process running ModelNew died",
    Status.EVAL_ERROR: "kbv itself failed on this evaluation (not your fault)",
}


def mask_numbers(text: str) -> str:
    """Every number in ``text`` replaced by ``#`` (identifiers such as ``float32`` keep theirs)."""
    return _NUMBER_RE.sub("#", text)


def _tail(text: str | None, lines: int = _MAX_LINES) -> str:
    if not text:
        return ""
    return "\n".join(str(text).rstrip().splitlines()[-lines:])


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _speedup(v: Verdict) -> tuple[str, float] | None:
    for b in REWARD_BASELINES:
        if b in v.speedup:
            return b, v.speedup[b]
    return None


def _error_lines(v: Verdict) -> list[str]:
    if v.status is Status.COMPILE_ERROR:
        out = [f"Error: {v.message}"]
        tb, log = _tail(v.evidence.get("traceback")), _tail(v.evidence.get("log_tail"))
        if tb:
            out.append("Traceback (last lines):\n" + tb)
        if log:
            out.append("Build log (last lines):\n" + log)
        return out
    m = re.search(r"raised (\w+): (.*)$", v.message or "")
    if v.status is Status.RUNTIME_ERROR and m:
        return [f"Error: forward raised {m[1]}: {mask_numbers(m[2])[:300]}",
                "(numbers in the message are masked; the log is not shown)"]
    return [f"Error: {mask_numbers(v.message or '')[:300]}"]


def _correctness_lines(v: Verdict, input_blind: bool) -> list[str]:
    judged = [r for r in v.input_sets if not r.dropped]
    nominal = [r for r in judged if r.kind is InputKind.NOMINAL]
    hidden = [r for r in judged if r.kind is not InputKind.NOMINAL]
    out = []
    if nominal:
        bad = [r for r in nominal if not r.passed]
        out.append(f"Public checks (the problem's own get_inputs() under fresh seeds): "
                   f"{len(nominal) - len(bad)} of {len(nominal)} passed.")
        for r in bad:
            how = []
            if r.fault:
                how.append(mask_numbers(r.fault) if input_blind else r.fault)
            if r.oracle_error is not None and r.error_budget is not None:
                how.append(f"normalised error {_fmt(r.oracle_error)} (allowed {_fmt(r.error_budget)})")
            if r.mismatched_elements is not None and r.total_elements:
                how.append(f"{100.0 * r.mismatched_elements / r.total_elements:.3g}% of output elements "
                           "outside tolerance")
            out.append(f"- {r.name} failed: {'; '.join(how) or 'wrong result'}")
    if hidden:
        bad = sum(1 for r in hidden if not r.passed)
        out.append(f"Hidden checks (secret input distributions): {len(hidden) - bad} of {len(hidden)} passed."
                   + (" They are not named; make the kernel right for any values and sizes." if bad else ""))
    return out


def _finding_lines(v: Verdict) -> list[str]:
    out = []
    for f in v.findings:
        if f.severity is Severity.WARNING:
            continue
        titles = ", ".join(TAXONOMY.get(t, str(t)) for t in f.taxonomy)
        out.append(f"- {f.severity.value}: {f.check} ({titles})")
    return (["Integrity findings:"] + out) if out else []


def _timing_lines(v: Verdict) -> list[str]:
    if "candidate" not in v.timing:
        return []
    parts = [f"{label} {m.median_ms:.4g} ms" for label, m in v.timing.items()]
    out = ["Timing (median): " + ", ".join(parts) + "."]
    speed = v.speedup or v.unverified_speedup
    if speed:
        out.append("Speedup of your kernel: " + ", ".join(f"{s:.3g}x vs {b}" for b, s in speed.items()) + ".")
    if v.memory_efficiency is not None:
        out.append(f"Memory efficiency (reference peak / yours): {v.memory_efficiency:.3g}.")
    return out


def _diagnostic_lines(v: Verdict) -> list[str]:
    """compute-sanitizer's reports and Nsight Compute's figures of the candidate's own kernels
    (``--sanitize``, ``--profile``): never the reference's figures, never an input value."""
    out = []
    for tool, r in (v.evidence.get("sanitize") or {}).items():
        if r.get("count"):
            out.append(f"compute-sanitizer {tool}: {r['count']} report(s); first: {r['reports'][0]}")
        elif not r.get("failed"):
            out.append(f"compute-sanitizer {tool}: clean.")
    mine = (v.evidence.get("ncu") or {}).get("candidate") or {}
    for k in mine.get("kernels", [])[:5]:
        stalls = ", ".join(f"{n}" for n, _ in k.get("stalls") or ())
        figures = [f"{k['duration_ms']:.4g} ms" if k.get("duration_ms") is not None else None,
                   f"SM {k['sm_pct']:.0f}%" if k.get("sm_pct") is not None else None,
                   f"DRAM {k['dram_pct']:.0f}%" if k.get("dram_pct") is not None else None,
                   f"occupancy {k['occupancy_pct']:.0f}%" if k.get("occupancy_pct") is not None else None,
                   f"{k['registers']} registers/thread" if k.get("registers") is not None else None,
                   f"{k['shared_bytes']} B shared/block" if k.get("shared_bytes") is not None else None,
                   f"top stalls: {stalls}" if stalls else None]
        out.append(f"Kernel {k.get('name', '?')[:80]}: " + ", ".join(x for x in figures if x) + ".")
    return (["Diagnostics of your kernels:"] + out) if out else []


def secrets_of(v: Verdict) -> tuple[str, ...]:
    """The verdict's seeds as text (every input set's, nominal and secret): what feedback must not hold."""
    return tuple(sorted({str(r.seed) for r in v.input_sets}, key=len, reverse=True))


def feedback_text(v: Verdict, *, input_blind: bool = False) -> str:
    """The feedback for the model that wrote ``v.candidate`` (module docstring: what it holds)."""
    lines = [f"Status: {v.status.value} ({_MEANING[v.status]})."]
    if not v.status.ran:
        lines += _error_lines(v)
    lines += _correctness_lines(v, input_blind)
    lines += _finding_lines(v)
    lines += _timing_lines(v)
    lines += _diagnostic_lines(v)
    if v.weight_mismatches:
        lines.append(f"{len(v.weight_mismatches)} parameter(s) shared by name with Model have different "
                     "initial values: create them in the same order and the same way.")
    text = "\n".join(lines)
    for s in secrets_of(v):
        if len(s) >= 3:  # a seed still present (e.g. echoed in a build log): mask it
            text = text.replace(s, "#")
    return text


@dataclass(frozen=True)
class Reward:
    """The scalar reward of one answer, its feedback and what it is based on (module docstring)."""

    score: float
    feedback: str
    status: str  #: a :class:`Status` value, or ``NO_CODE`` when the answer held no code block.
    speedup: float | None = None
    baseline: str | None = None
    valid: bool = True  #: False when kbv failed (EVAL_ERROR) or vetting flagged the problem: not a signal about the model.
    backend: str | None = None  #: the answer's backend (``cuda``, ``triton``, ``cpp``, ``torch``), when known.
    backend_asked: str | None = None  #: the backend the prompt asked for (None: any).
    status_score: float | None = None  #: the score of the verdict alone, before the backend rule.
    wrong_backend: bool = False  #: the answer is not in the backend asked for (the score is at most 0).


#: the finding whose timing earns the least PASS reward (module docstring).
UNCONFIRMED_TIMING = "timing:claim-below-bound"

SCORES = {Status.SHORTCUT: 0.3, Status.INCORRECT: 0.1, Status.HACK: -1.0, Status.COMPILE_ERROR: 0.0,
          Status.RUNTIME_ERROR: 0.0, Status.TIMEOUT: 0.0, Status.CRASH: 0.0, Status.EVAL_ERROR: 0.0}

#: what each backend is, for the feedback's backend line.
BACKEND_NAMES = {"cuda": "CUDA (load_inline with cuda_sources)", "triton": "Triton (@triton.jit kernels)",
                 "cpp": "C++ for the CPU (load_inline with cpp_sources)", "torch": "plain PyTorch (no kernel of its own)"}


def backend_mismatch(asked: str | None, got: str | None) -> str | None:
    """The feedback line when an answer of backend ``got`` is not the ``asked`` one, else None
    (nothing asked, the backend unknown, or the same)."""
    if not asked or not got or got == "unknown" or got == asked:
        return None
    return (f"Wrong backend: you were asked for {BACKEND_NAMES.get(asked, asked)}, but this answer is "
            f"{BACKEND_NAMES.get(got, got)}; it earns no reward until it uses the backend asked for.")


def _status_score(v: Verdict) -> tuple[float, float | None, str | None]:
    """(score, speedup, its baseline) of the verdict alone."""
    if v.status is Status.PASS:
        sp = _speedup(v)
        if sp is None:
            return 1.0, None, None
        b, s = sp
        gain = min(3.0, max(-1.0, math.log2(s)))
        if any(f.check == UNCONFIRMED_TIMING for f in v.findings):
            gain = -1.0
        return 1.0 + 0.5 * gain, s, b
    return SCORES[v.status], None, None


def reward(v: Verdict, *, input_blind: bool = False, backend: str | None = None) -> Reward:
    """The reward of a verdict (definition in the module docstring) with its feedback; ``backend``:
    the backend the prompt asked for (None: any backend counts)."""
    text = feedback_text(v, input_blind=input_blind)
    score, s, b = _status_score(v)
    got = v.candidate.backend
    # kbv's own failure, or a problem vetting flagged (a stochastic reference, for one: its own run-to-
    # run difference sets the error budget, so a candidate returning zeros passes): no signal either way
    valid = v.status is not Status.EVAL_ERROR and not v.problem_flags
    wrong = backend_mismatch(backend, got) if valid else None
    if wrong is not None:
        status_line, _, rest = text.partition("\n")
        text = "\n".join(x for x in (status_line, wrong, rest) if x)
    final = min(score, 0.0) if wrong is not None else score
    return Reward(final, text, v.status.value, s, b, valid=valid, backend=got, backend_asked=backend,
                  status_score=score, wrong_backend=wrong is not None)


def no_code_reward(reason: str) -> Reward:
    """The reward of an answer without a usable code block (nothing was verified)."""
    return Reward(0.0, f"Status: NO_CODE (nothing was verified: {reason}). Reply with one ```python "
                       "code block holding the complete module that defines ModelNew.", "NO_CODE")
