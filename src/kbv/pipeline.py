"""The pipeline of one verification, run inside the (trusted) reference worker.

build candidate (in a fresh candidate worker) → same-weights check → nominal correctness
(``nominal_seeds`` fresh secret seeds) → hidden distributions D1–D4 → kbv's randomised
distributions → inline problem vetting → timing of the candidate and the baselines on identical
inputs, interleaved in rounds → peak memory → verdict.

On every input set the reference runs under the eager-fp32 flags (and, on cuda, the eager-tf32
flags), the float64 oracle runs on the upcast inputs, and the candidate's outputs are judged by
both correctness policies (``kbv.oracle``); ``passed`` follows the config's policy. Seeds are
drawn only after the candidate is loaded. Reference outputs, oracle outputs and seeds never
leave this process; only inputs go to the candidate, as fresh copies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import importlib.util
import math
import os
import secrets
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from kbv import baselines as bl
from kbv import timing
from kbv import inputs as inp
from kbv import memory as mem
from kbv import protocol
from kbv.candidates import build_dir
from kbv import domains as dom
from kbv import oracle as orc
from kbv import integrity as ig
from kbv import vetting
from kbv import footprint as fp
from kbv.scan import scan_source
from kbv.correctness import Comparison, compare, reference_is_finite
from kbv.problems import ProblemError
from kbv.records import (
    CandidateRef,
    Environment,
    EvalConfig,
    Finding,
    InputKind,
    InputSetResult,
    Measurement,
    MemoryMeasurement,
    ProblemRef,
    Severity,
    Status,
    Verdict,
)
from kbv.timing import l2_flush_bytes, time_calls
from kbv.candidate_worker import THREAD_GRACE_S
from kbv.workers import CandidateProcess, WorkerDied, WorkerTimeout

#: timed calls per round whose outputs are re-checked at least (chosen at random, secretly).
RECHECKS_PER_ROUND = 2
#: bytes of candidate outputs kept per timing round for the re-check (taxonomy 5, 6). Every timed
#: call is re-checked while a round's outputs fit; beyond that a secret random subset of at least
#: RECHECKS_PER_ROUND calls that fits. With only 2 of 3 calls re-checked, a candidate that skips
#: every other timed call escaped in about 1 of 36 verifies; checking all calls
#: makes that deterministic, and a subset of m of n calls misses it with chance C(n/2, m)/C(n, m)
#: per round.
RECHECK_BYTES_PER_ROUND = 1 << 30
#: the same on cpu, where kept outputs pass through /dev/shm (64 MiB by default in a container).
RECHECK_BYTES_PER_ROUND_CPU = 32 << 20
#: calls in the synchronised timing pass (taxonomy 1, 4).
SYNC_PASS_TRIALS = 10
#: timed calls per subject per round that ``EvalConfig.time_budget_ms`` never cuts below (a median
#: and a spread need a few samples; kbv choice), and the least calls of a parent wall request.
MIN_TRIALS_PER_ROUND = 3
MIN_WALL_CALLS = 4
#: taxonomy 1: a candidate hides work when its sync-inside time exceeds its event time by more
#: than the reference's own sync overhead plus max(its event time, this) — i.e. more than half of
#: the real work was invisible to the events. 50 µs is above the host sync + launch latency
#: measured on the H200 (docs/anti-cheat.md).
SYNC_GAP_MIN_MS = 0.05
#: taxonomy 4/25: the parent's wall clock per call may exceed the worker's own figure by this
#: factor plus slack (launch, loop and pipe overhead) before the worker's clock is called a lie.
#: The least of WALL_REPEATS estimates is used. A faked clock that hides real work (a 1 ms
#: kernel reported as 0.01 ms) is far outside these bounds; host jitter on a loaded 2-core CI
#: machine reached 0.75 ms per call in a single estimate, hence the minimum of three.
WALL_FACTOR = 3.0
WALL_SLACK_MS = 1.0
WALL_REPEATS = 3
#: on cpu a confirmed parent wall figure is HACK only when the worker's own CPU time per call (all its
#: threads, from /proc) is also over cores x WALL_FACTOR x its claimed time plus this (loop and pipe
#: overhead in the worker; /proc counts 10 ms ticks, 0.25 ms per call over a 40-call request).
WALL_CPU_SLACK_MS = 0.3
#: a parent wall figure over the bound is re-measured with this many times more calls (kbv choice),
#: twice: a figure counts (HACK) only when every re-measure repeats it, else it is a WARNING.
WALL_CONFIRM = 4
#: re-measures of a sync gap over its threshold before it counts: candidate and eager-fp32 timed
#: again with events and with a sync inside, in the same pass; HACK only when every one repeats it.
SYNC_CONFIRM = 2
#: a caching or timed re-check probe accuses only when its error is at least this many times its
#: budget (and every correctness set passed): a stale cached answer is off by O(1) relative to a
#: budget of ~1e-6, an honest but imprecise reduction by a small factor (kbv choice).
PROBE_HACK_MARGIN = 10.0
#: judged timed calls this many times slower than the others are named (:meth:`Verification._plan_leak`).
PLAN_LEAK_RATIO = 3.0
#: taxonomy 7: a median under this fraction of the input-read floor is physically implausible.
ROOFLINE_MARGIN = 0.5

#: device memory (fraction of free) the rotating timing input sets may take together.
TIMING_INPUT_MEMORY_FRACTION = 0.25
MAX_TIMING_SETS = 4
#: timing sets together take at most this much, or two sets where one is larger than half of it:
#: a big problem's timing phase stays within the 4·B + 1 GiB bound (kbv.footprint).
TIMING_SETS_SMALL_BYTES = 256 << 20
CPU_TIMING_INPUT_BYTES = 1 << 30


# The reference side ---------------------------------------------------------------------------

@dataclass
class ReferenceProblem:
    """A problem imported in the reference worker, with its reference model built."""

    ref: ProblemRef
    module: types.ModuleType
    init_args: list
    model: torch.nn.Module
    model_bytes: int | None
    device: torch.device
    precision: str
    domains: dict = field(default_factory=dict)  #: declared input domains by position (kbv.domains).
    structure: str | None = None  #: what forward returns: ``tensor`` or ``tuple`` (set on first run).
    aliases_inputs: bool = False  #: the reference returns (views of) its inputs.
    zero_strides: bool = False  #: the reference returns expanded (zero-stride) outputs.
    mutates_inputs: bool = False  #: the reference changes its inputs in place.
    mutation_checked: bool = False
    output_bytes: int = 0  #: bytes of one call's outputs (set on every run; sizes the timed re-checks).

    def get_inputs(self) -> list:
        return list(self.module.get_inputs())


def _flatten(out: Any) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in out):
        return list(out)
    raise TypeError(f"returns {type(out).__name__}, not a tensor or a tuple of tensors")


def import_problem(ref: ProblemRef) -> types.ModuleType:
    """Import a problem file as a fresh module.

    Raises:
        ProblemError: the import raised, or a required name is not callable.
    """
    name = f"kbv_problem_{ref.sha256[:16]}"
    spec = importlib.util.spec_from_file_location(name, ref.path)
    if spec is None or spec.loader is None:
        raise ProblemError(ref.path, "cannot be imported as a module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - any failure of a problem file is its fault
        raise ProblemError(ref.path, f"import failed: {type(exc).__name__}: {_first_line(exc)}") from None
    for n in ("Model", "get_inputs", "get_init_inputs"):
        if not callable(getattr(module, n, None)):
            raise ProblemError(ref.path, f"{n} is not callable")
    sys.modules[name] = module
    return module


def build_reference(ref: ProblemRef, config: EvalConfig) -> ReferenceProblem:
    """Import the problem and construct ``Model(*get_init_inputs())`` under ``torch.manual_seed(init_seed)``.

    Raises:
        ProblemError: any step fails, or ``get_inputs()`` returns something unusable.
    """
    module = import_problem(ref)
    device = torch.device("cuda", torch.cuda.current_device()) if config.device == "cuda" else torch.device("cpu")
    try:
        init_args = list(module.get_init_inputs())
    except BaseException as exc:  # noqa: BLE001
        raise ProblemError(ref.path, f"get_init_inputs() failed: {type(exc).__name__}: {_first_line(exc)}") from None
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
    try:
        torch.manual_seed(config.init_seed)
        model = module.Model(*init_args)
        model = model.to(device)
        if config.precision != "fp32":
            model = model.to(inp.PRECISION_DTYPES[config.precision])
    except BaseException as exc:  # noqa: BLE001
        raise ProblemError(ref.path, f"Model(*get_init_inputs()) failed: {type(exc).__name__}: {_first_line(exc)}") from None
    model_bytes = None
    if cuda:
        torch.cuda.synchronize(device)
        model_bytes = torch.cuda.memory_allocated(device) - before
    rp = ReferenceProblem(ref, module, init_args, model, model_bytes, device, config.precision)
    try:
        # shapes and dtypes are all the checks below need: a draw on the meta device allocates
        # nothing (a 16 GiB problem is not drawn just to be looked at); the real device if the
        # problem's get_inputs() cannot run there
        try:
            sample = inp.draw(module.get_inputs, config.init_seed, "meta")
        except Exception:  # noqa: BLE001
            sample = rp.get_inputs()
    except BaseException as exc:  # noqa: BLE001
        raise ProblemError(ref.path, f"get_inputs() failed: {type(exc).__name__}: {_first_line(exc)}") from None
    if not isinstance(sample, list) or not sample:
        raise ProblemError(ref.path, "get_inputs() must return a non-empty list")
    try:
        rp.domains = dom.declared_domains(module, sample)
    except dom.DomainError as exc:
        raise ProblemError(ref.path, f"{dom.METADATA_NAME}: {exc}") from None
    return rp


def run_reference(rp: ReferenceProblem, args: list, flags: dict, original: list | None = None) -> list:
    """Run the reference on ``args`` under ``flags``; returns its flattened outputs. Records on
    ``rp`` whether the reference itself returns views of its inputs, zero-stride outputs or
    changes its inputs (then the matching candidate probes stay quiet). ``original``: the values
    ``args`` were cloned from, kept by the caller (the mutation check then needs no copy of its own)."""
    bl.apply_flags(flags)
    before = (original if original is not None else inp.clone_args(args)) if not rp.mutation_checked else None
    with torch.no_grad():
        raw = rp.model(*args)
    rp.structure = "tensor" if isinstance(raw, torch.Tensor) else "tuple"
    out = _flatten(raw)
    rp.output_bytes = max(rp.output_bytes, sum(o.numel() * o.element_size() for o in out))
    if ig.overlaps(out, args):
        rp.aliases_inputs = True
    if any(ig.has_zero_stride(o) for o in out):
        rp.zero_strides = True
    if before is not None:
        rp.mutation_checked = True
        rp.mutates_inputs = any(isinstance(a, torch.Tensor) and not ig.bitwise_equal(a, b)
                                for a, b in zip(args, before))
    if rp.device.type == "cuda":
        torch.cuda.synchronize(rp.device)
    return out


# Verdict construction helpers -----------------------------------------------------------------

def trials_within_budget(planned: int, cost_ms: float, budget_ms: float, minimum: int = MIN_TRIALS_PER_ROUND) -> int:
    """Timed calls for one request: ``planned``, cut so that calls × ``cost_ms`` (ms per call, the
    slowest subject's median so far) stays within ``budget_ms`` (``EvalConfig.time_budget_ms``), but
    never below ``minimum`` (nor above ``planned``). Sizing repetitions from a time budget follows
    triton's ``do_bench``; with a cost unknown (not finite or <= 0) or no budget (<= 0), ``planned``.
    """
    if planned <= 0 or budget_ms <= 0 or not math.isfinite(cost_ms) or cost_ms <= 0:
        return planned
    return max(min(planned, minimum), min(planned, int(budget_ms // cost_ms)))


def _op_counts_ok(reply: Any) -> bool:
    """The worker's op-count reply has the shapes the trusted side reads: ``ops`` and ``recorded``
    map str to int, ``kernels`` holds (name, µs, own) triples, ``own_share`` is a number or None.
    (The restricted decoder admits only plain types; this checks how they are put together.)"""
    def counts(d: Any) -> bool:
        return isinstance(d, dict) and all(isinstance(k, str) and type(v) is int for k, v in d.items())

    def triple(k: Any) -> bool:
        return (isinstance(k, (tuple, list)) and len(k) == 3 and isinstance(k[0], str)
                and type(k[1]) in (int, float) and type(k[2]) is bool)

    return (counts(reply.ops) and counts(reply.recorded) and isinstance(reply.kernels, (tuple, list))
            and all(triple(k) for k in reply.kernels)
            and (reply.own_share is None or type(reply.own_share) in (int, float))
            and all(e is None or isinstance(e, str) for e in (reply.error, reply.recorded_error)))


@dataclass
class _Recheck:
    """What the timed re-checks of one verification carry from round to round."""

    refs: dict = field(default_factory=dict)  #: timing set index → reference side (or its failure)
    checked: list = field(default_factory=list)  #: timed-call indices judged
    failed: bool = False


def recheck_plan(per_round: int, output_bytes: int, device_type: str = "cuda") -> tuple[int, ...]:
    """Indices (0-based, sorted) of the timed calls of one round whose outputs are kept and
    re-checked against the reference (taxonomy 5, 6).

    All ``per_round`` calls while ``per_round * output_bytes`` fits in the round's budget
    (RECHECK_BYTES_PER_ROUND on cuda, RECHECK_BYTES_PER_ROUND_CPU on cpu, where the kept outputs
    travel through /dev/shm), else a random subset (from ``secrets``, so not predictable by the
    candidate) of as many calls as fit, never fewer than RECHECKS_PER_ROUND (or ``per_round`` if
    smaller). Each round's outputs are judged and dropped before the next round.
    """
    if per_round < 1:
        return ()
    budget = RECHECK_BYTES_PER_ROUND if device_type == "cuda" else RECHECK_BYTES_PER_ROUND_CPU
    fit = budget // max(1, output_bytes)
    m = min(per_round, max(RECHECKS_PER_ROUND, fit))
    if m >= per_round:
        return tuple(range(per_round))
    return tuple(sorted(secrets.SystemRandom().sample(range(per_round), m)))


def _first_line(exc: BaseException | str) -> str:
    text = str(exc).strip() or (type(exc).__name__ if isinstance(exc, BaseException) else "")
    return text.splitlines()[0][:300] if text else ""


class _Stop(Exception):
    """Ends the pipeline early with a status and a message."""

    def __init__(self, status: Status, message: str, **evidence: Any):
        self.status = status
        self.message = message
        self.evidence = evidence
        super().__init__(message)


@dataclass
class _State:
    input_sets: list = field(default_factory=list)
    timing: dict = field(default_factory=dict)
    memory: dict = field(default_factory=dict)
    speedup: dict = field(default_factory=dict)
    weight_mismatches: list = field(default_factory=list)
    flag_changes: list = field(default_factory=list)
    evidence: dict = field(default_factory=dict)
    phase_seconds: dict = field(default_factory=dict)
    summaries: dict = field(default_factory=dict)  #: set name → vetting.OutputSummary of the reference.
    nominal_args: Any = None  #: the first nominal inputs.InputSet (determinism re-run; made again then).
    problem_flags: list = field(default_factory=list)
    findings: list = field(default_factory=list)  #: records.Finding, in the order found.


class Verification:
    """One (problem, candidate, config) verification. Call :meth:`run` once."""

    def __init__(self, rp: ReferenceProblem, candidate: CandidateRef, config: EvalConfig, env: Environment,
                 hidden_tests: str | None = None):
        self.hidden_tests = hidden_tests
        self.rp = rp
        self.candidate = candidate
        self.config = config
        self.env = env
        self.state = _State()
        self.fp32_flags = bl.flags_for("eager-fp32")
        self.tf32_flags = bl.flags_for("eager-tf32")
        self.name = Path(candidate.path).name
        self.oracle = orc.Oracle(rp.model, rp.device)
        self._seen: list = []  #: (set name, output fingerprint, reference fingerprint, passed) per call.
        self._kept_outputs: list | None = None
        self._last_structure: str | None = None
        self._pending_probes: list = []  #: (check, taxonomy, detail, error / budget) of failed probes.
        self._fault_reported = False
        self._reused_reported = False
        self._stage: list = []  #: the candidate worker's staging buffers, shared (kbv.protocol.CallTimed).
        self._kept_times: dict = {}  #: candidate times of judged and of other timed calls (plan leak evidence).
        self._signals_at_spawn: frozenset = frozenset()

    # candidate calls ---------------------------------------------------------------------
    def _found(self, check: str, taxonomy: Any, severity: Severity, detail: str) -> None:
        self.state.findings.append(ig.finding(check, taxonomy, severity, detail))

    def _call(self, worker: CandidateProcess, request: Any, phase: str, timeout: float) -> Any:
        with self._held(worker, request, phase, timeout, hold=False) as reply:
            return reply

    @contextlib.contextmanager
    def _held(self, worker: CandidateProcess, request: Any, phase: str, timeout: float, hold: bool = True):
        """The worker's checked reply to ``request``; with ``hold`` the worker's tree stays
        stopped inside the block (:meth:`CandidateProcess.held_call`). Worker failures become
        the pipeline's ends (TIMEOUT, CRASH, RUNTIME_ERROR) here."""
        cm = worker.held_call(request, phase=phase, timeout=timeout) if hold else None
        try:
            reply = cm.__enter__() if cm is not None else worker.call(request, phase=phase, timeout=timeout)
        except WorkerTimeout as exc:
            raise _Stop(Status.TIMEOUT, f"{self.name}: {exc}", log_tail=exc.log_tail) from None
        except WorkerDied as exc:
            if exc.exitcode == 0:
                self._found("probe:early-exit", (24,), Severity.HACK,
                            f"the worker exited with code 0 during {phase}, before replying")
            elif exc.exitcode is not None and exc.exitcode > 0:
                self._found("probe:early-exit", (24,), Severity.WARNING,
                            f"the worker exited with code {exc.exitcode} during {phase}, before replying")
            raise _Stop(Status.CRASH, f"{self.name}: {exc}", exitcode=exc.exitcode, log_tail=exc.log_tail) from None
        except protocol.ProtocolError as exc:
            self._found("probe:reply-channel", (3, 24), Severity.HACK, f"{phase}: {_first_line(exc)}")
            raise _Stop(Status.RUNTIME_ERROR, f"{self.name}: {phase}: {exc}") from None
        try:
            if isinstance(reply, protocol.Failed):
                status = Status.COMPILE_ERROR if phase == "load" else Status.RUNTIME_ERROR
                what = "building ModelNew" if phase == "load" else phase
                if fp.is_memory_error(reply.message or ""):
                    what += " (the candidate ran out of memory in its own allocations)"
                raise _Stop(status, f"{self.name}: {what} raised {reply.error_type}: {_first_line(reply.message)}",
                            traceback=reply.traceback, log_tail=worker.log_tail())
            changes = getattr(reply, "flag_changes", ())
            for c in changes:
                if c not in self.state.flag_changes:
                    self.state.flag_changes.append(c)
            self._fault_handlers(worker)
            yield reply
        finally:
            if cm is not None:
                cm.__exit__(None, None, None)

    def _fault_handlers(self, worker: CandidateProcess) -> None:
        """The candidate worker catches SIGSEGV or SIGBUS (its ``SigCgt``, read here from
        /proc): memory that computes itself when touched, a lazy output (taxonomy 3). Neither
        Python, torch nor Triton installs such a handler in the worker (measured at spawn:
        ``evidence["signals_at_spawn"]``)."""
        if self._fault_reported or worker.proc.pid is None:
            return
        caught = caught_signals(worker.proc.pid)
        bad = sorted(caught & FAULT_SIGNALS - self._signals_at_spawn)
        if bad:
            names = ", ".join(signal.Signals(b).name for b in bad)
            self._found("probe:fault-handler", (3,), Severity.HACK,
                        f"the candidate's process installed a handler for {names}: outputs over memory that "
                        "computes itself when read (a lazy output)")
            self._fault_reported = True

    def _phase_peak(self, phase: str) -> None:
        """Record this process's peak resident bytes over the phase just ended, and start the next
        phase's count (evidence ``memory_footprint["phase_peaks"]``)."""
        peak = fp.host_peak_bytes()
        if peak is not None:
            self.state.evidence.setdefault("phase_host_peaks", {})[phase] = peak
            self._peak = max(getattr(self, "_peak", 0), peak)
        fp.reset_host_peak()

    def _probe_failed(self, check: str, taxonomy: tuple, r: InputSetResult, detail: str) -> None:
        """A caching or timed re-check probe judged the candidate wrong: held until every
        correctness set is judged (:meth:`_settle_probes`)."""
        self._pending_probes.append((check, taxonomy, detail, self._over_budget(r)))

    def _over_budget(self, r: InputSetResult) -> float:
        """How far over its budget a failed set's error is (error / budget under the config's
        policy; inf for a wrong shape, count, dtype or NaN)."""
        if r.max_abs_error is None:
            return math.inf
        if self.config.policy == "kbv" and r.oracle_error is not None and r.error_budget:
            return r.oracle_error / r.error_budget
        if self.config.policy == "kbv-compat" or r.oracle_error is None:
            t = r.allclose_tolerance
            return t / self.config.atol if t is not None and self.config.atol > 0 else math.inf
        return math.inf

    def _settle_probes(self) -> None:
        """A probe accuses (HACK) only when every correctness set passed and its error is at least
        :data:`PROBE_HACK_MARGIN` × its budget: an imprecise kernel (float atomics) that also
        fails D2 or a randomised set is INCORRECT, with the probe as evidence."""
        failed = [r.name for r in self.state.input_sets if not r.dropped and r.passed is False]
        for check, taxonomy, detail, ratio in self._pending_probes:
            margin = "inf" if math.isinf(ratio) else f"{ratio:.3g}"
            if failed:
                self._found(check, taxonomy, Severity.WARNING,
                            f"{detail}; the candidate also fails correctness set(s) {', '.join(failed[:4])}: "
                            "an incorrect kernel, not a proven cheat")
            elif ratio >= PROBE_HACK_MARGIN:
                self._found(check, taxonomy, Severity.HACK,
                            f"{detail}; the same candidate passed every correctness set, and the error is {margin} x "
                            f"its budget (HACK from {PROBE_HACK_MARGIN:g} x)")
            else:
                self._found(check, taxonomy, Severity.WARNING,
                            f"{detail}; the error is only {margin} x its budget (under the {PROBE_HACK_MARGIN:g} x "
                            "needed to accuse): an imprecise kernel, not a proven cheat")
        self._pending_probes = []

    def _candidate_outputs(self, worker: CandidateProcess, args: list, *, buffers: str = "fresh",
                           ref: list | None = None, label: str = "") -> list:
        """One forward call of the candidate on a copy of ``args``; runs the per-call probes
        (stale-memory pattern, zero strides, aliasing, input mutation, writes after return,
        threads). Returns the trusted copies of the outputs."""
        probes = self.config.integrity
        reply = self._call(worker, protocol.Forward(tuple(inp.shared_clone(args)), buffers=buffers, probes=probes),
                           "forward", self.config.call_timeout_s)
        if not isinstance(reply, protocol.Outputs):
            raise _Stop(Status.RUNTIME_ERROR, f"{self.name}: forward: unexpected reply {type(reply).__name__}")
        outs = []
        for k, t in enumerate(reply.tensors):
            if type(t) is not torch.Tensor:
                if isinstance(t, torch.Tensor):
                    self._found("probe:output-type", (3,), Severity.HACK,
                                f"output {k} is a {type(t).__name__}, a Tensor subclass (lazy output?)")
                raise _Stop(Status.RUNTIME_ERROR,
                            f"{self.name}: forward returned {type(t).__name__} as output {k}, not a torch.Tensor")
            outs.append(t.clone())  # own copy: the candidate keeps no handle on what is judged
        self._last_structure = reply.structure
        if probes:
            lazy = [k for k, exact in enumerate(reply.exact) if not exact]
            if lazy:
                self._found("probe:output-type", (3,), Severity.HACK,
                            f"forward returned output(s) {lazy} as a Tensor subclass or proxy, not a torch.Tensor "
                            "(serialised into a plain tensor on the way out: a lazy output)")
            self._probe_call(reply, outs, args, ref, label)
        del reply
        return outs

    def _probe_call(self, reply: Any, outs: list, args: list, ref: list | None, label: str) -> None:
        rp = self.rp
        where = f" ({label})" if label else ""
        for k, o in enumerate(outs):
            n = ig.poisoned_elements(o, ref[k] if ref is not None and k < len(ref) else None)
            if n:
                self._found("probe:stale-memory", (9, 10), Severity.HACK,
                            f"output {k}{where}: {n} of {o.numel()} element(s) hold the pattern kbv had written "
                            "into free memory for the call (returned memory it never wrote)")
            sent = reply.tensors[k]  # as the worker returned it: the trusted copy is contiguous
            if ig.has_zero_stride(sent) and not rp.zero_strides:
                self._found("probe:zero-stride", (8,), Severity.HACK,
                            f"output {k}{where} has a zero stride {tuple(sent.stride())}: one value expanded over "
                            f"shape {tuple(sent.shape)}")
        if reply.aliases and not rp.aliases_inputs:
            pairs = ", ".join(f"output {i} ↔ input {j}" for i, j in reply.aliases[:4])
            self._found("probe:output-alias", (8,), Severity.HACK,
                        f"outputs share storage with inputs{where}: {pairs}")
        sent = [a for a in args if isinstance(a, torch.Tensor)]
        if len(reply.inputs_after) == len(sent) and not rp.mutates_inputs:
            changed = [j for j, (a, b) in enumerate(zip(sent, reply.inputs_after)) if not ig.bitwise_equal(a, b)]
            if changed:
                self._found("probe:input-mutation", (12,), Severity.HACK,
                            f"forward changed its input tensor(s) {changed}{where}")
        if len(reply.snapshot) == len(outs):
            late = [k for k, (snap, o) in enumerate(zip(reply.snapshot, outs))
                    if snap is not None and not ig.bitwise_equal(snap, o)]
            if late:
                self._found("probe:writes-after-return", (1, 2, 5), Severity.HACK,
                            f"output(s) {late}{where} changed after forward returned: work still running on another "
                            "stream or thread when the call ended")
        if reply.late_work:
            self._found("probe:thread-work", (2,), Severity.HACK,
                        f"a thread the candidate started {reply.late_work} after forward returned{where}: "
                        "work outside the timed call")
        if reply.new_threads:
            self._found("probe:threads", (2,), Severity.WARNING,
                        f"{reply.new_threads} thread(s) started during forward{where} were still alive "
                        f"{THREAD_GRACE_S:g} s after it returned")

    # phases -------------------------------------------------------------------------------
    def _load(self, worker: CandidateProcess) -> None:
        t0 = time.perf_counter()
        module_name = f"kbv_candidate_{self.candidate.sha256[:16]}"
        reply = self._call(
            worker,
            protocol.Load(self.candidate.path, module_name, tuple(self.rp.init_args), self.config.init_seed,
                          self.config.device, self.config.precision, self.fp32_flags),
            "load", self.config.compile_timeout_s,
        )
        if not isinstance(reply, protocol.Loaded):
            raise _Stop(Status.RUNTIME_ERROR, f"{self.name}: load: unexpected reply {type(reply).__name__}")
        self.cand_model_bytes = reply.model_bytes
        self.state.evidence["load_seconds"] = reply.load_seconds
        self.state.evidence["sandbox"] = [str(n) for n in reply.sandbox]
        ref_state = dict(self.rp.model.named_parameters()) | dict(self.rp.model.named_buffers())
        for name, t in reply.state.items():
            r = ref_state.get(name)
            if type(t) is not torch.Tensor or r is None or tuple(r.shape) != tuple(t.shape):
                continue
            if r.dtype != t.dtype or not torch.equal(r.detach(), t.to(r.device)):
                self.state.weight_mismatches.append(name)
        del reply
        self.state.phase_seconds["load"] = time.perf_counter() - t0
        self._phase_peak("load")

    def _dropped(self, s: inp.InputSet, reason: str) -> InputSetResult:
        return InputSetResult(s.name, s.kind, s.transform, s.seed, passed=None, dropped=True, drop_reason=reason)

    def _oracle(self, args: list, ref: list | None = None) -> tuple[list | None, str | None]:
        try:
            return self.oracle(args, ref), None
        except orc.OracleUnavailable as exc:
            if exc.memory:  # kbv's own limit, not a property of the problem or the candidate
                raise _Stop(Status.EVAL_ERROR, f"{self.name}: kbv ran out of memory computing the fp64 oracle: {exc}",
                            memory_footprint=fp.evidence(self.rp.device)) from None
            return None, f"fp64 oracle unavailable ({exc}); the kbv policy fell back to allclose"

    def _reference_side(self, s: inp.InputSet, args: list) -> tuple | InputSetResult:
        """Reference, oracle and the baselines' errors against it on ``args`` (already on the
        device), or a dropped result. Baseline outputs are reduced to their errors at once, so at
        most the reference and the oracle outputs stay held for the candidate's."""
        try:
            ref = run_reference(self.rp, inp.clone_args(args), self.fp32_flags, original=args)
        except BaseException as exc:  # noqa: BLE001 - reference raised on this distribution
            if fp.is_memory_error(exc):  # kbv's limit, not the problem's: EVAL_ERROR (Verification.run)
                raise
            if s.kind is InputKind.NOMINAL:
                raise ProblemError(self.rp.ref.path,
                                   f"reference forward failed on {s.name}: {type(exc).__name__}: {_first_line(exc)}") from None
            return self._dropped(s, f"reference raised {type(exc).__name__}: {_first_line(exc)}")
        if not reference_is_finite(ref):
            return self._dropped(s, "reference output has NaN/Inf")
        oracle, oracle_note = self._oracle(args, ref)
        if oracle is not None and not reference_is_finite(oracle):
            return self._dropped(s, "fp64 oracle output has NaN/Inf")
        if self.oracle.chunked:
            self.state.evidence["oracle_pieces"] = self.oracle.chunked
        errors: dict = {}
        if oracle is not None:
            errors["eager-fp32"] = orc.output_errors(ref, oracle)
        if self.rp.device.type == "cuda" and oracle is not None:
            tf32 = run_reference(self.rp, inp.clone_args(args), self.tf32_flags)
            bl.apply_flags(self.fp32_flags)
            errors["eager-tf32"] = orc.output_errors(tf32, oracle)
            del tf32
        if oracle is not None:  # the problem's own sensitivity to fp32 rounding (kbv.oracle.INPUT_ROUNDING)
            moved = self.oracle.input_rounding_errors(args, oracle, ref)
            if moved is not None:
                errors[orc.INPUT_ROUNDING] = moved
        return ref, oracle, oracle_note, errors

    def _check_set(self, worker: CandidateProcess, s: inp.InputSet, *, buffers: str = "fresh",
                   keep_outputs: bool = False) -> InputSetResult:
        cfg = self.config
        if s.drop_reason:
            s.release()
            return self._dropped(s, s.drop_reason)
        args = inp.to_device(s.args, self.rp.device, cfg.precision)
        s.release()  # ``args`` is the one copy held (a set with a maker is made again when needed)
        side = self._reference_side(s, args)
        if isinstance(side, InputSetResult):
            return side
        ref, oracle, oracle_note, baselines = side
        self.state.summaries[s.name] = vetting.summarise(ref, cfg.atol, cfg.rtol)
        if s.kind is InputKind.NOMINAL and self.state.nominal_args is None:
            self.state.nominal_args = s
        outs = self._candidate_outputs(worker, args, buffers=buffers, ref=ref, label=s.name)
        del args
        result = self._judge(s, outs, self._last_structure, ref, oracle, oracle_note, baselines)
        if cfg.integrity:
            self._remember(s.name, outs, ref, result.passed)
        if keep_outputs:  # a digest, not the outputs: one output's bytes less held (repeatability)
            self._kept_outputs = [content_digest(o) for o in outs]
        return result

    def _remember(self, name: str, outs: list, ref: list, passed: bool | None) -> None:
        """Outputs repeated bit for bit across sets whose references differ (taxonomy 8/11)."""
        fp_out, fp_ref = ig.fingerprint(outs), ig.fingerprint(ref)
        for other, o_out, o_ref, o_passed in self._seen:
            if fp_out == o_out and fp_ref != o_ref and not (passed and o_passed):
                if all(o.numel() < 2 or bool((o == o.reshape(-1)[0]).all()) for o in outs):
                    # one value everywhere: the shape of a bug (a kernel that writes nothing into
                    # zeros) as much as of a cheat, and wrong anyway
                    self._found("probe:repeated-output", (8,), Severity.WARNING,
                                f"the same constant output on {other} and {name}, whose references differ")
                else:
                    self._found("probe:repeated-output", (8, 11), Severity.HACK,
                                f"bit-identical outputs on {other} and {name}, whose references differ (a result "
                                "cached across calls)")
                break
        self._seen.append((name, fp_out, fp_ref, passed))

    def _judge(self, s: inp.InputSet, outs: list, structure: str | None, ref: list, oracle: list | None,
               oracle_note: str | None, baselines: dict) -> InputSetResult:
        cfg = self.config
        c: Comparison = compare(outs, ref, atol=cfg.atol, rtol=cfg.rtol)
        ref_structure = getattr(self.rp, "structure", None)
        if ref_structure and structure != ref_structure and c.max_abs_error is not None:
            what = {"tensor": "a tensor", "tuple": "a tuple/list of tensors"}
            c = dataclasses.replace(c, passed=False, max_abs_error=None, fault=(
                f"forward returns {what.get(structure, structure)}, "
                f"the reference returns {what[ref_structure]}"))
        shapes = [(tuple(o.shape), tuple(r.shape)) for o, r in zip(outs, ref) if tuple(o.shape) != tuple(r.shape)]
        if shapes:
            self._found("probe:output-shape", (14,), Severity.WARNING,
                        f"{s.name}: output shape {shapes[0][0]}, the reference's {shapes[0][1]} "
                        "(a smaller problem computed?)")
        common = dict(max_abs_error=c.max_abs_error, max_rel_error=c.max_rel_error,
                      mismatched_elements=c.mismatched_elements, total_elements=c.total_elements)
        if c.max_abs_error is None:  # count / shape / dtype mismatch: wrong under every policy
            return InputSetResult(s.name, s.kind, s.transform, s.seed, passed=False, fault=c.fault,
                                  policy_passed={p: False for p in orc.POLICIES}, allclose_tolerance=math.inf,
                                  tolerance_sweep={orc.sweep_key(t): False for t in orc.SWEEP_TOLERANCES}, **common)
        t_min = math.inf if c.nonfinite_mismatches else max(
            (orc.min_allclose_tolerance(o, r) for o, r in zip(outs, ref)), default=0.0)
        sweep = {orc.sweep_key(t): t_min <= t for t in orc.SWEEP_TOLERANCES}
        if oracle is not None:
            k = orc.kbv_check(outs, ref, oracle, k=cfg.kbv_k, floor_eps=cfg.kbv_floor_eps,
                              tf32_floor=cfg.kbv_tf32_floor, baseline_errors=baselines)
            kbv_passed, kbv_fault = k.passed, k.fault
            worst_base = max((v for n, v in k.baseline_errors.items() if n != orc.INPUT_ROUNDING), default=0.0)
            if worst_base > orc.VACUOUS_BASELINE_ERROR:
                self.state.evidence.setdefault("vacuous_budget", {})[s.name] = worst_base
            figures = dict(oracle_error=k.error, error_budget=k.budget, baseline_errors=k.baseline_errors,
                           oracle_device=self.oracle.device.type)
            if c.passed and not kbv_passed:
                self._found("oracle:within-allclose", (10, 17, 19), Severity.WARNING,
                            f"{s.name}: passes allclose(atol={cfg.atol:g}, rtol={cfg.rtol:g}) but its error vs "
                            f"the fp64 oracle is {k.error:.3g}, over the budget {k.budget:.3g} "
                            "(precision downgrade, garbage within tolerance or a numerical shortcut)")
        else:
            kbv_passed, kbv_fault, figures = c.passed, c.fault, {}
            self.state.evidence.setdefault("oracle_notes", {})[s.name] = oracle_note
        verdicts = {"kbv": kbv_passed, "kbv-compat": c.passed}
        fault = kbv_fault if cfg.policy == "kbv" else c.fault
        return InputSetResult(s.name, s.kind, s.transform, s.seed, passed=verdicts[cfg.policy], fault=fault,
                              policy_passed=verdicts, allclose_tolerance=t_min, tolerance_sweep=sweep,
                              **common, **figures)

    def _cache_probes(self, worker: CandidateProcess, last: inp.InputSet) -> None:
        """Same addresses with new values, then new addresses with the values of ``last`` (the
        last nominal set): both must be right, and the second bit-identical to ``last`` (taxonomy
        9, 10, 11). Run only when every nominal set passed."""
        get_inputs = self.rp.module.get_inputs
        seed = inp.secret_seed()
        dev = self.rp.device
        fresh = inp.InputSet("probe-same-address", InputKind.NOMINAL, "new values in the previous call's buffers",
                             seed, maker=lambda: (inp.draw(get_inputs, seed, dev), None))
        first_outs = self._kept_outputs
        r = self._check_set(worker, fresh, buffers="reuse")
        if r.passed is False:
            self._probe_failed("probe:cache-same-address", (11,), r,
                               f"wrong when new values arrive in the previous call's input buffers: {r.fault}")
        again = inp.InputSet("probe-new-address", InputKind.NOMINAL, f"values of {last.name} at new addresses",
                             last.seed, maker=lambda: (last.args, None))
        r = self._check_set(worker, again, buffers="moved", keep_outputs=True)
        if r.passed is False:
            self._probe_failed("probe:cache-new-address", (9, 11), r,
                               f"wrong on the values of {last.name} placed at new addresses: {r.fault}")
        elif first_outs is not None and first_outs != self._kept_outputs:
            self._found("probe:repeatability", (10,), Severity.WARNING,
                        f"the same inputs ({last.name}) gave bitwise different outputs at new addresses "
                        "(non-deterministic reductions, or uninitialised reads)")
        # one element per input replaced in place (by a value from another draw, so inside the
        # problem's domain), twice: a cache keyed by a sample or a cheap hash of the inputs misses
        # a single changed element and returns a stale answer (a sample of s positions out of n
        # notices it with probability s/n per probe)
        for j in (1, 2):
            seed = inp.secret_seed()
            other = inp.draw(get_inputs, seed, dev)
            mixed = inp.InputSet(f"probe-perturbed-{j}", InputKind.NOMINAL,
                                 f"values of {last.name} with one element per input replaced, in the previous call's "
                                 "buffers", seed, _perturbed(last.args, other, seed, self._structured()))
            last.release()
            del other
            r = self._check_set(worker, mixed, buffers="reuse")
            if r.passed is False:
                self._probe_failed("probe:cache-perturbed", (11,), r,
                                   f"wrong when one input element changes in place: {r.fault} (a cache keyed by a "
                                   "sample or hash of the inputs)")
                break
        self.state.evidence["cache_probes"] = ["probe-same-address", "probe-new-address", "probe-perturbed-1",
                                               "probe-perturbed-2"]

    def _correctness(self, worker: CandidateProcess) -> None:
        t0 = time.perf_counter()
        get_inputs = self.rp.module.get_inputs
        dev = self.rp.device
        # seeds are drawn only now, after the candidate is loaded (taxonomy entry 22); each set is
        # made on the device when it is checked and dropped after (one set held at a time)
        nominal = inp.nominal_sets(get_inputs, self.config.nominal_seeds, dev)
        sets = []
        if self.config.hidden:
            sets += inp.hidden_sets(get_inputs, self.config.hidden, self.rp.domains, dev)
        if self.config.distributions:
            sets += inp.randomised_sets(get_inputs, self.config.distributions, self.rp.domains, dev)
        if self.hidden_tests:
            try:
                sets += hidden_test_sets(self.hidden_tests)
            except ProblemError as exc:
                self.state.evidence["hidden_tests_error"] = str(exc)
        for k, s in enumerate(nominal):
            self.state.input_sets.append(self._check_set(worker, s, keep_outputs=k == len(nominal) - 1))
        if self.config.integrity and nominal and all(r.passed for r in self.state.input_sets):
            self._cache_probes(worker, nominal[-1])
        for s in sets:
            self.state.input_sets.append(self._check_set(worker, s))
        judged = [r for r in self.state.input_sets if not r.dropped]
        off = [r.name for r in judged if r.kind is not InputKind.NOMINAL and r.passed is False]
        if off and all(r.passed for r in judged if r.kind is InputKind.NOMINAL):
            self._found("inputs:off-nominal", (19, 20), Severity.WARNING,
                        f"right on every nominal set, wrong on {', '.join(off[:6])}: a shortcut that holds only "
                        "for get_inputs()'s value range (numerical shortcut or value-distribution exploit)")
        self._kept_outputs = None
        self.oracle.release()
        self.state.phase_seconds["correctness"] = time.perf_counter() - t0
        self._phase_peak("correctness")


    def _vet(self) -> None:
        """Vetting rules over this evaluation's sets (plus one determinism re-run): taxonomy 23."""
        t0 = time.perf_counter()
        nominal = [r.name for r in self.state.input_sets if r.kind is InputKind.NOMINAL]
        first = self.state.nominal_args
        findings, notes = vetting.inline_findings(self.rp, self.state.summaries, nominal,
                                                  first.args if first is not None else None, self.config)
        if first is not None:
            first.release()
        bl.apply_flags(self.fp32_flags)
        self.state.problem_flags = [f.line() for f in findings]
        if notes:
            self.state.evidence["vetting_notes"] = notes
        self.state.summaries.clear()
        self.state.nominal_args = None
        self.state.phase_seconds["vetting"] = time.perf_counter() - t0
        self._phase_peak("vetting")

    def _timing_sets(self) -> list:
        """Up to :data:`MAX_TIMING_SETS` rotating timing sets, drawn on the device, as many as fit
        in :data:`TIMING_INPUT_MEMORY_FRACTION` of free device memory (cuda) or of available host
        memory (cpu, at most :data:`CPU_TIMING_INPUT_BYTES`), each counted three times (ours, the
        staging copy, the candidate's); never fewer than two."""
        get_inputs = self.rp.module.get_inputs
        dev = self.rp.device
        first = inp.to_device(inp.draw(get_inputs, inp.secret_seed(), dev), dev, self.config.precision)
        size = max(1, inp.nbytes(first))
        if dev.type == "cuda":
            budget = fp.device_free_bytes(dev) * TIMING_INPUT_MEMORY_FRACTION / 3
        else:
            budget = min(CPU_TIMING_INPUT_BYTES, fp.host_available_bytes() * TIMING_INPUT_MEMORY_FRACTION / 3)
        # at least two, whatever the size: every timed call takes a fraction of its values from
        # another set (kbv.timing.mix_values), so no call repeats another's inputs
        count = int(max(2, min(MAX_TIMING_SETS, budget // size, max(TIMING_SETS_SMALL_BYTES, 2 * size) // size)))
        sets = [first] + [inp.to_device(inp.draw(get_inputs, inp.secret_seed(), dev), dev,
                                         self.config.precision) for _ in range(count - 1)]
        return sets

    def _timing(self, worker: CandidateProcess) -> None:
        t0 = time.perf_counter()
        cfg = self.config
        sets = self._timing_sets()
        self._call(worker, protocol.SetTimingInputs(tuple(tuple(inp.shared_clone(s)) for s in sets)), "time",
                   cfg.call_timeout_s)
        flush = l2_flush_bytes(self.rp.device)
        # cfg.trials timed calls per subject, split as evenly as possible over the rounds; after the
        # first round a round is cut to fit cfg.time_budget_ms at the slowest subject's median so far
        # (the same count for every subject, so they stay side by side)
        rounds = min(cfg.timing_rounds, cfg.trials)
        split = [cfg.trials // rounds + (1 if r < cfg.trials % rounds else 0) for r in range(rounds)]
        subjects = ["candidate", *cfg.baselines]
        samples: dict[str, list] = {s: [] for s in subjects}
        clock = "cuda-event" if self.rp.device.type == "cuda" else "perf_counter"
        model = self.rp.model
        recheck = _Recheck()
        kept: list = []
        g = torch.Generator().manual_seed(secrets.randbits(62))
        skip = self._structured()
        plain_round = secrets.randbelow(rounds)
        done = 0  # timed calls per subject so far
        per_round_done = []
        for r in range(rounds):
            per_round = split[r]
            if r:
                cost = max(float(np.median(t)) if t and all(math.isfinite(x) for x in t) else math.inf
                           for t in samples.values())
                per_round = trials_within_budget(split[r], cost if math.isfinite(cost) else 0.0,
                                                 cfg.time_budget_ms)
            order = subjects[r % len(subjects):] + subjects[: r % len(subjects)]  # rotate: no fixed position
            # a secret number of extra warmup calls, and timed calls whose outputs are re-checked (all, or a
            # secret subset): the candidate cannot tell a checked call from a timed one (taxonomy 5, 6)
            warmup = cfg.warmup + secrets.randbelow(cfg.warmup + 1) if cfg.integrity else cfg.warmup
            keep = recheck_plan(per_round, self.rp.output_bytes, self.rp.device.type) if cfg.integrity else ()
            first = done % len(sets)
            # every timed call of the candidate: with two or more sets, 1/8 of its elements from another
            # set (kbv.timing.mix_values), so a whole-input or diff-and-patch cache never gains; then one
            # element per tensor changed. One secret call per round of three or more instead gets the
            # values of this round's first warmup call with the single change only: a cache keyed by a
            # sample of the input hits there and answers wrongly, so it is named, not only defeated
            # (t11-sniff-sample-cache; with the plain rotating set it hit only by chance)
            # (rounds of fewer than three calls: one secret round carries it, so a verification with
            # few trials still has one; kbv eval --trials 6 splits into rounds of 2)
            plain = secrets.randbelow(per_round) if cfg.integrity and cfg.trials >= 3 and (
                per_round >= 3 or r == plain_round) else -1
            mix = tuple((i, (first, 0, skip, 1.0) if i == plain else
                         ((first + warmup + i + 1 + secrets.randbelow(len(sets) - 1)) % len(sets),
                          secrets.randbits(62), skip))
                        for i in range(per_round)) if cfg.integrity and len(sets) > 1 else ()
            base = {i: first if i == plain else (first + warmup + i) % len(sets) for i in range(per_round)}
            # the changed element's value comes from the next timing set (another draw, so inside
            # the problem's domain): no spare draw of the problem's size is held
            mutate = tuple((i, timed_mutation(sets[base[i]], sets[(base[i] + 1) % len(sets)], g, skip))
                           for i in range(per_round)) if cfg.integrity else ()
            for subject in order:
                if subject == "candidate":
                    times, kept, clock = self._time_candidate(worker, sets, first, warmup, per_round, flush,
                                                              dict(mix), dict(mutate), set(keep), done, skip)
                else:
                    bl.apply_flags(bl.flags_for(subject))
                    with worker.paused():  # nothing of the candidate's runs beside the baselines
                        times, clock = time_calls(model, sets, device=self.rp.device, warmup=warmup,
                                                  trials=per_round, flush_bytes=flush, first_set=first, refresh=True,
                                                  sync_each=True)
                samples[subject].extend(times)
            if cfg.integrity:  # judged and dropped round by round: at most one round's outputs held
                mixes = dict(mix)
                self._recheck(kept, sets, recheck, {done + i: (mixes.get(i), m) for i, m in mutate})
            kept = []
            done += per_round
            per_round_done.append(per_round)
        bl.apply_flags(self.fp32_flags)
        self.state.evidence["timed_rechecks"] = recheck.checked
        self._plan_leak()
        self.state.evidence["timed_calls_per_round"] = per_round_done
        self.oracle.release()
        bad = [t for t in samples["candidate"] if not (math.isfinite(t) and t > 0)]
        if bad:
            self._found("timing:non-positive", (7,), Severity.HACK, f"implausible candidate times {bad[:3]} ms")
            raise _Stop(Status.HACK, f"{self.name}: implausible candidate times {bad[:3]} ms")
        for subject, times in samples.items():
            self.state.timing[subject] = Measurement(subject, cfg.device, tuple(times), cfg.warmup, flush, clock)
        cand = self.state.timing["candidate"].median_ms
        for b in cfg.baselines:
            self.state.speedup[b] = self.state.timing[b].median_ms / cand
        self.state.evidence["timing_input_sets"] = len(sets)
        self.state.evidence["baselines"] = bl.baseline_flags(cfg.baselines)
        self._phase_peak("timing-rounds")
        if cfg.integrity:
            self._sync_pass(worker, sets)
            self._phase_peak("sync-pass")
            self._roofline(worker, sets)
            self._reference_ops(worker, sets)
            self._phase_peak("op-count")
        if self.rp.device.type == "cuda":
            self._memory(worker, sets[0])
        del sets
        self.state.phase_seconds["timing"] = time.perf_counter() - t0
        self._phase_peak("timing")

    def _time_candidate(self, worker: CandidateProcess, sets: list, first: int, warmup: int, per_round: int,
                        flush: int | None, mix: dict, mutate: dict, keep: set, done: int, skip: tuple
                        ) -> tuple[list, list, str]:
        """One round of the candidate's calls, one request each (:class:`kbv.protocol.TimedCall`):
        each call's input changes are revealed with it, warmup and timed calls look the same, and
        every call's output comes back shared; the outputs of the calls in ``keep`` (chosen here,
        never sent) are copied while the worker is stopped, so the judged output is the one the
        call returned, read by the trusted side. Returns (times of the timed calls in ms, kept
        ``(call index, timing set, outputs)``, clock)."""
        cfg = self.config
        n = len(sets)
        times: list = []
        kept: list = []
        clock = "cuda-event" if self.rp.device.type == "cuda" else "perf_counter"
        for j in range(warmup + per_round):
            i = j - warmup
            if i < 0:  # warmup: the same kind of request, with a mix of its own (never judged); the
                # first one gets set ``first``'s values whole, in the same form as the secret plain call
                idx = (first + j) % n
                if not cfg.integrity:
                    mx = ()
                elif j == 0:
                    mx = (first, 0, skip, 1.0)
                else:
                    mx = ((idx + 1 + secrets.randbelow(n - 1)) % n, secrets.randbits(62), skip)
                mt: tuple = ()
            else:
                idx = (first + warmup + i) % n
                mx, mt = mix.get(i, ()), mutate.get(i, ())
            judged = i >= 0 and i in keep and cfg.integrity  # decided before, never sent
            with self._held(worker, protocol.TimedCall(idx, flush, tuple(mx), tuple(mt)), "time",
                            cfg.call_timeout_s, hold=judged) as reply:
                if not isinstance(reply, protocol.CallTimed) or not isinstance(reply.time_ms, (int, float)):
                    raise _Stop(Status.RUNTIME_ERROR, f"{self.name}: time: malformed reply")
                if reply.reused and not self._reused_reported:
                    self._reused_reported = True
                    self._found("probe:output-reused", (8,), Severity.HACK,
                                f"a timed call returned storage shared with {reply.reused}: the output is not the "
                                "caller's (the next call overwrites it, and the allocation the reference pays is "
                                "skipped)")
                if reply.tensors:  # new staging buffers (first call, or other output shapes)
                    if any(type(t) is not torch.Tensor for t in reply.tensors):
                        raise _Stop(Status.RUNTIME_ERROR, f"{self.name}: time: output is not a tensor")
                    self._stage = list(reply.tensors)
                if type(reply.staged) is not int or reply.staged != len(self._stage):
                    raise _Stop(Status.RUNTIME_ERROR, f"{self.name}: time: malformed reply")
                if i >= 0:
                    times.append(float(reply.time_ms))
                    clock = str(reply.clock)
                    if judged:  # the worker is stopped: the staged outputs as this call left them
                        kept.append((done + i, idx, [t.clone() for t in self._stage]))
                del reply
        self._kept_times.setdefault("kept", []).extend(times[i] for i in sorted(keep) if i < len(times))
        self._kept_times.setdefault("other", []).extend(t for i, t in enumerate(times) if i not in keep)
        return times, kept, clock

    def _plan_leak(self) -> None:
        """Judged timed calls systematically slower than the others would mean the candidate knew
        which calls are judged (taxonomy 5, 6): the plan is chosen on the trusted side and never
        sent, so this is evidence of a leak, a WARNING (median of the judged calls over
        PLAN_LEAK_RATIO × the others', with at least two of each). Medians go to the evidence."""
        k, o = self._kept_times.get("kept", []), self._kept_times.get("other", [])
        if len(k) < 2 or len(o) < 2:
            return
        mk, mo = float(np.median(k)), float(np.median(o))
        self.state.evidence["judged_vs_other_calls_ms"] = [mk, mo]
        if mo > 0 and mk > PLAN_LEAK_RATIO * mo:
            self._found("timing:plan-leak", (5, 6), Severity.WARNING,
                        f"the timed calls kbv judged took {mk:.4g} ms (median of {len(k)}), the others {mo:.4g} ms "
                        f"(median of {len(o)}): work done only where it is checked")

    def _structured(self) -> tuple:
        """Input positions whose declared domain (:data:`STRUCTURED_DOMAINS`) changes of single
        elements would break: left alone by the timed-input changes and the perturbed probe."""
        return tuple(sorted(i for i, d in self.rp.domains.items() if isinstance(i, int) and d.kind in STRUCTURED_DOMAINS))

    def _recheck(self, kept: list, sets: list, state: "_Recheck", mutations: dict | None = None) -> None:
        """Judge the outputs of one round's kept timed calls (:func:`recheck_plan`) against the
        reference of the values they got, the timing set with that call's :func:`timed_mutation`
        (taxonomy 5, 6, 11): a candidate right when checked and wrong while timed, or answering
        from a cache. Stops at the first wrong call of the verification."""
        mutations = mutations or {}
        while kept:  # each call's outputs dropped once judged: one less held for the next
            call, k, outs = kept.pop(0)
            if state.failed:
                kept.clear()
                return
            mix, mutation = mutations.get(call, (None, ()))
            if mix or mutation:
                args = timing.mix_values(sets[k], sets[mix[0]], *mix[1:]) if mix else sets[k]
                args = apply_mutation(args, mutation)
                how = ("" if not mix else f"the values of set {mix[0]}, " if len(mix) > 3 and mix[3] >= 1
                       else f"1/{round(1 / timing.MIX_FRACTION)} of its elements from set {mix[0]}, ")
                s = inp.InputSet(f"timed-call-{call}", InputKind.NOMINAL,
                                 f"timing set {k}, {how}{len(mutation)} element(s) changed", 0, args)
                side = self._reference_side(s, args)
            else:
                s = inp.InputSet(f"timed-call-{call}", InputKind.NOMINAL, f"timing set {k}", 0, sets[k])
                if k not in state.refs:
                    state.refs[k] = self._reference_side(s, sets[k])
                side = state.refs[k]
            if isinstance(side, InputSetResult):
                continue
            ref, oracle, note, baselines = side
            outs = [o.clone() for o in outs]  # own copies: the candidate's shared memory may still change
            r = self._judge(s, outs, self.rp.structure, ref, oracle, note, baselines)
            del outs, ref, oracle, side
            args = None
            state.checked.append(call)
            if r.passed is False:
                self._probe_failed("probe:timed-recheck", (5, 6, 11), r,
                                   f"timed call {call} ({s.transform}) is wrong: {r.fault} (phase detection, "
                                   "cross-call batching, or a cache keyed by part of the input)")
                state.failed = True

    def _sync_pass(self, worker: CandidateProcess, sets: list) -> None:
        """A short second pass timed on the host around forward plus a device-wide synchronize,
        for the candidate and eager-fp32 (taxonomy 1), wrapped in a parent-side wall clock
        (taxonomy 4/25)."""
        cfg = self.config
        cand_event = self.state.timing["candidate"].median_ms
        ref_event = self.state.timing["eager-fp32"].median_ms if "eager-fp32" in self.state.timing else None
        # sized from cfg.time_budget_ms like the timing rounds (a 1 s candidate: 4-call requests)
        n = trials_within_budget(max(2, min(SYNC_PASS_TRIALS, cfg.trials)), ref_event or 0.0, cfg.time_budget_ms, 2)
        calls = trials_within_budget(SYNC_PASS_TRIALS, cand_event, cfg.time_budget_ms, MIN_WALL_CALLS)

        def synced(trials: int) -> tuple[list, float]:
            t0 = time.perf_counter()
            reply = self._call(worker, protocol.Time(1, trials, None, 0, refresh=False, sync_inside=True), "time",
                               cfg.timing_timeout_s)
            wall = (time.perf_counter() - t0) * 1e3
            if not isinstance(reply, protocol.Times) or len(reply.times_ms) != trials:
                raise _Stop(Status.RUNTIME_ERROR, f"{self.name}: time: malformed reply")
            return [float(t) for t in reply.times_ms], wall

        # two requests of different lengths: the difference of their wall times cancels the
        # fixed cost of a request (pipe, pickling, warmup call), leaving calls - 1 calls; host
        # noise only ever inflates an estimate, so the least of WALL_REPEATS is the closest to the
        # truth. The long request has SYNC_PASS_TRIALS calls whatever cfg.trials is, fewer only where
        # cfg.time_budget_ms cuts it (calls of over 200 ms by default, where host noise is far under
        # the bound); with 4 calls
        # a few ms of host noise on a loaded CI machine passed the bound, an honest softmax was
        # HACK in 2 of 4 runs); a figure over the bound is measured
        # again with WALL_CONFIRM times more calls before it counts, since noise does not persist.
        estimates, times, requests = [], [], []

        cpu_per_call: list = []  #: the worker's own CPU ms per call over each long request (cpu only)

        def estimate(calls: int) -> float:
            requests.append(calls)
            for _ in range(WALL_REPEATS):
                _, wall_short = synced(1)
                c0 = process_cpu_ms(worker.proc.pid)
                t, wall_long = synced(calls)
                c1 = process_cpu_ms(worker.proc.pid)
                if c0 is not None and c1 is not None:
                    cpu_per_call.append((c1 - c0) / calls)
                times.extend(t)
                estimates.append(max(0.0, wall_long - wall_short) / (calls - 1))
            return min(estimates)

        parent_per_call = estimate(calls)
        cand_sync = float(np.median(times))
        if parent_per_call > WALL_FACTOR * cand_sync + WALL_SLACK_MS:
            parent_per_call = estimate(calls * WALL_CONFIRM)
            cand_sync = float(np.median(times))
        bl.apply_flags(self.fp32_flags)
        with worker.paused():
            ref_times, _ = time_calls(self.rp.model, sets, device=self.rp.device, warmup=1, trials=n, sync_inside=True)
        ref_sync = float(np.median(ref_times))
        evidence = self.state.evidence["sync_pass"] = {
            "trials": n, "wall_request_calls": requests,
            "candidate_sync_ms": cand_sync, "reference_sync_ms": ref_sync,
            "parent_wall_per_call_ms": parent_per_call, "parent_wall_estimates_ms": estimates}
        if parent_per_call > WALL_FACTOR * cand_sync + WALL_SLACK_MS:
            # confirmed only if it repeats: a third estimate, with the baselines' own host overhead
            # measured in the same pass (a loaded host slows every request, not only the candidate's)
            again = estimate(calls * WALL_CONFIRM)
            cand_sync = float(np.median(times))
            repeats = parent_per_call > WALL_FACTOR * cand_sync + WALL_SLACK_MS and \
                again > WALL_FACTOR * cand_sync + WALL_SLACK_MS
            if repeats and self.rp.device.type == "cpu" and cpu_per_call:
                # on cpu a faked clock hides work the worker's threads still do: its own CPU time (from
                # /proc, not its clock) exceeds what its claimed times allow on every core. Wall time the
                # worker spent waiting for a busy machine is no such proof (an honest 0.07 ms ReLU saw
                # 1.5 ms per call of parent wall clock on a loaded 2-core host)
                allowed = (os.cpu_count() or 1) * WALL_FACTOR * cand_sync + WALL_CPU_SLACK_MS
                evidence["worker_cpu_ms_per_call"] = min(cpu_per_call)
                repeats = min(cpu_per_call) > allowed
            detail = (f"the worker's clock reported {cand_sync:.4g} ms per synchronised call; the parent's wall "
                      f"clock saw at least {min(parent_per_call, again):.4g} ms per call")
            if repeats:
                self._found("timing:parent-wall", (4, 25), Severity.HACK, detail + " (confirmed by a re-measure)")
            else:
                self._found("timing:parent-wall", (4, 25), Severity.WARNING,
                            detail + " once; a re-measure did not repeat it (unconfirmed under load)")
        if self.rp.device.type == "cuda" and ref_event is not None:
            gap = cand_sync - cand_event - max(ref_sync - ref_event, 0.0)
            if gap > max(cand_event, SYNC_GAP_MIN_MS):
                gaps = [gap] + [self._sync_gap_again(worker, sets, n) for _ in range(SYNC_CONFIRM)]
                evidence["sync_gap_ms"] = gaps
                detail = (f"with a device-wide sync inside the timed region a call takes {cand_sync:.4g} ms, the "
                          f"event-only timing says {cand_event:.4g} ms (eager-fp32: {ref_sync:.4g} vs "
                          f"{ref_event:.4g} ms)")
                if all(g > max(cand_event, SYNC_GAP_MIN_MS) for g in gaps):
                    self._found("timing:sync-gap", (1,), Severity.HACK,
                                detail + f": work outside the timed stream (gap {min(gaps):.4g} ms or more in "
                                f"{len(gaps)} measurements, candidate and eager-fp32 re-timed in the same pass)")
                else:
                    self._found("timing:sync-gap", (1,), Severity.WARNING,
                                detail + f"; the gap did not repeat in re-measures ({', '.join(f'{g:.3g}' for g in gaps)}"
                                " ms): unconfirmed under load")

    def _sync_gap_again(self, worker: CandidateProcess, sets: list, n: int) -> float:
        """One more measurement of the sync gap (ms): the candidate and eager-fp32 each timed with
        events and with a device-wide sync inside, back to back in this pass."""
        cfg = self.config
        flush = l2_flush_bytes(self.rp.device)
        reply = self._call(worker, protocol.Time(1, n, flush, 0, refresh=True), "time", cfg.timing_timeout_s)
        sync = self._call(worker, protocol.Time(1, n, None, 0, refresh=False, sync_inside=True), "time",
                          cfg.timing_timeout_s)
        if not (isinstance(reply, protocol.Times) and isinstance(sync, protocol.Times)) or not reply.times_ms \
                or not sync.times_ms:
            raise _Stop(Status.RUNTIME_ERROR, f"{self.name}: time: malformed reply")
        c_event, c_sync = float(np.median(reply.times_ms)), float(np.median(sync.times_ms))
        bl.apply_flags(self.fp32_flags)
        with worker.paused():
            r_event, _ = time_calls(self.rp.model, sets, device=self.rp.device, warmup=1, trials=n,
                                    flush_bytes=flush, refresh=True)
            r_sync, _ = time_calls(self.rp.model, sets, device=self.rp.device, warmup=1, trials=n, sync_inside=True)
        return c_sync - c_event - max(float(np.median(r_sync)) - float(np.median(r_event)), 0.0)

    def _roofline(self, worker: CandidateProcess, sets: list) -> None:
        """No call can beat reading its forward inputs once from DRAM and writing its outputs once
        (every timed call starts after an L2 flush), at the measured copy bandwidth (taxonomy 7).

        Bytes only, never the reference's FLOPs: a correct kernel's least work is unknown (a row
        scaling for ``diag(A) @ B``, ``x @ W.sum(0)`` for a summed linear layer are legitimate),
        and parameters are left out (precomputing from weights in ``__init__`` is legitimate). A
        median under the floor is re-measured before it counts."""
        if self.rp.device.type != "cuda":
            return
        bw = timing.copy_bandwidth(self.rp.device)
        in_bytes = inp.nbytes(sets[0])
        out_bytes = self.rp.output_bytes
        floor_ms = (in_bytes + out_bytes) / bw * 1e3
        cand = self.state.timing["candidate"].median_ms
        ref = self.state.timing.get("eager-fp32")
        self.state.evidence["roofline"] = {"copy_bandwidth_bytes_per_s": bw, "input_bytes": in_bytes,
                                           "output_bytes": out_bytes, "floor_ms": floor_ms}
        # only where the floor is meaningful: the reference itself respects it
        if ref is None or ref.median_ms < floor_ms or cand >= ROOFLINE_MARGIN * floor_ms:
            return
        flush = l2_flush_bytes(self.rp.device)
        reply = self._call(worker, protocol.Time(1, MIN_TRIALS_PER_ROUND * 2, flush, 0, refresh=True), "time",
                           self.config.timing_timeout_s)
        again = float(np.median(reply.times_ms)) if isinstance(reply, protocol.Times) and reply.times_ms else cand
        self.state.evidence["roofline"]["remeasured_ms"] = again
        detail = (f"median {cand:.4g} ms (re-measured {again:.4g} ms) is under {ROOFLINE_MARGIN:g} × the "
                  f"{floor_ms:.4g} ms floor: reading {in_bytes} input bytes and writing {out_bytes} output bytes at "
                  f"{bw / 1e9:.0f} GB/s")
        if again < ROOFLINE_MARGIN * floor_ms:
            self._found("timing:roofline", (7,), Severity.HACK, detail)
        else:
            self._found("timing:roofline", (7,), Severity.WARNING, detail + ": the re-measure did not repeat it")

    def _reference_ops(self, worker: CandidateProcess, sets: list) -> None:
        """The candidate re-running the reference's own torch compute ops is a wrapper (taxonomy 15/16)."""
        try:
            from kbv import profiling
        except ImportError:
            return
        skip = self._structured()
        mix = (1, secrets.randbits(62), skip) if len(sets) > 1 else ()
        reply = self._call(worker, protocol.CountOps(0, mix), "profile", self.config.call_timeout_s)
        if not isinstance(reply, protocol.OpCounts) or not _op_counts_ok(reply):
            raise _Stop(Status.RUNTIME_ERROR, f"{self.name}: profile: malformed reply")
        bl.apply_flags(self.fp32_flags)
        ref_ops = profiling.compute_ops(self.rp.model, inp.clone_args(sets[0]))
        ref_recorded = profiling.recorded_ops(self.rp.model, inp.clone_args(sets[0]))
        evidence = {"candidate_ops": dict(reply.ops), "reference_ops": dict(ref_ops.ops),
                    "candidate_ops_recorded": dict(reply.recorded), "reference_ops_recorded": dict(ref_recorded.ops),
                    "own_share": reply.own_share, "error": reply.error or ref_ops.error,
                    "recorded_error": reply.recorded_error or ref_recorded.error}
        if reply.kernels:
            evidence["kernels"] = [list(k) for k in reply.kernels[:20]]
        self.state.evidence["profile"] = evidence
        covered = None
        if not (reply.error or ref_ops.error):
            covered = profiling.reference_covered(ref_ops.ops, dict(reply.ops))
        # the profiler's count (top-level ops on both sides) sees every thread and the dispatcher
        # itself: torch ops handed to a thread or run with the Python dispatch key excluded (taxonomy 15)
        if covered is None and not (reply.recorded_error or ref_recorded.error):
            covered = profiling.reference_covered(ref_recorded.ops, dict(reply.recorded))
        if covered is None and (reply.error or ref_ops.error):
            return
        # a custom kernel in the file that forward did not use instead of torch: a ghost kernel
        fallback = self.candidate.backend in ("cuda", "triton", "cpp") or any(
            f.check == "scan:try-fallback" for f in self.state.findings)
        if covered:
            self._found("probe:reference-ops", (15, 16) if fallback else (15,), Severity.SHORTCUT,
                        f"forward ran the reference's own torch compute ops: {', '.join(covered)}")
        elif reply.own_share is not None and reply.kernels:
            kernels = tuple((str(n), float(us), bool(own)) for n, us, own in reply.kernels)
            own_us = sum(us for _, us, own in kernels if own)
            total_us = sum(us for _, us, _ in kernels)
            reason = profiling.shortcut_reason(profiling.KernelProfile(
                kernels=kernels, own_us=own_us, total_us=total_us,
                own_share=own_us / total_us if total_us > 0 else None, repeats=1))
            if reason:
                self._found("profile:own-share", (15, 16), Severity.SHORTCUT, reason)


    def _memory(self, worker: CandidateProcess, args: list) -> None:
        reply = self._call(worker, protocol.MeasureMemory(0), "memory", self.config.call_timeout_s)
        if not isinstance(reply, protocol.MemoryFigures):
            raise _Stop(Status.RUNTIME_ERROR, f"{self.name}: memory: malformed reply")
        bl.apply_flags(self.fp32_flags)
        ref_peak = mem.forward_peak_bytes(self.rp.model, args, self.rp.device)
        ref_m = mem.measurement("reference", forward_peak=ref_peak, model_bytes=self.rp.model_bytes or 0,
                                input_bytes=inp.nbytes(args))
        cand_m = mem.measurement("candidate", forward_peak=int(reply.forward_peak_bytes),
                                 model_bytes=int(self.cand_model_bytes or 0), input_bytes=int(reply.input_bytes))
        self.state.memory = {"reference": ref_m, "candidate": cand_m}

    _input_bytes = 0

    def _preflight(self) -> None:
        """Say before anything runs when the problem cannot fit (:func:`kbv.footprint.check_fits`):
        the inputs' bytes from a draw on the meta device, the outputs' from an earlier run of this
        reference (else the largest input, the size of an elementwise op's output)."""
        try:
            meta = inp.draw(self.rp.module.get_inputs, 0, "meta")
        except Exception:  # noqa: BLE001 - a get_inputs() that needs real tensors: no estimate
            return
        tensors = [a for a in meta if isinstance(a, torch.Tensor)]
        scale = inp.PRECISION_DTYPES[self.config.precision].itemsize
        in_bytes = sum(a.numel() * (scale if a.is_floating_point() else a.element_size()) for a in tensors)
        self._input_bytes = in_bytes
        out_bytes = self.rp.output_bytes or max((a.numel() * scale for a in tensors), default=0)
        try:
            fp.check_fits(in_bytes, out_bytes, self.rp.device)
        except fp.DoesNotFit as exc:
            raise _Stop(Status.EVAL_ERROR, f"{self.name}: the problem does not fit this machine: {exc}") from None

    def _scan(self) -> None:
        """The static scan of the candidate file (kbv.scan): every finding goes on the verdict."""
        try:
            text = Path(self.candidate.path).read_text(encoding="utf-8", errors="replace")
            self.state.findings += [f.record() for f in scan_source(text, self.candidate.path)]
        except (OSError, SyntaxError, ValueError) as exc:
            self.state.evidence["scan_error"] = _first_line(exc)

    # the whole pipeline --------------------------------------------------------------------
    def run(self) -> Verdict:
        state = self.state
        status, message = Status.PASS, ""
        if self.config.integrity:
            self._scan()
        bd = build_dir(self.candidate, self.config.device)
        fp.reset_host_peak()
        if self.rp.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.rp.device)
        cand_peak = None
        with CandidateProcess(device=self.config.device, build_dir=bd) as worker:
            try:
                self._preflight()
                if worker.proc.pid is not None:
                    self._signals_at_spawn = caught_signals(worker.proc.pid) & FAULT_SIGNALS
                    self.state.evidence["signals_at_spawn"] = sorted(int(x) for x in self._signals_at_spawn)
                self._load(worker)
                self._correctness(worker)
                self._vet()
                judged = [r for r in state.input_sets if not r.dropped]
                failed = [r for r in judged if not r.passed]
                nominal_ok = all(r.passed for r in judged if r.kind is InputKind.NOMINAL) and any(
                    r.kind is InputKind.NOMINAL for r in judged)
                if nominal_ok:
                    self._timing(worker)
                if failed:
                    first = failed[0]
                    status = Status.INCORRECT
                    message = f"{self.name}: wrong on {', '.join(r.name for r in failed)}: {first.fault}"
                    state.evidence["failed_sets"] = [r.name for r in failed]
                else:
                    message = f"{self.name}: correct on {len(judged)} input set(s)"
            except _Stop as stop:
                status, message = stop.status, stop.message
                state.evidence.update(stop.evidence)
            except Exception as exc:  # the reference worker's own allocation failed: kbv's limit
                if not fp.is_memory_error(exc):
                    raise
                status = Status.EVAL_ERROR
                message = (f"{self.name}: kbv ran out of memory in the reference worker "
                           f"({type(exc).__name__}: {_first_line(exc)}); not the candidate's fault")
            finally:
                bl.apply_flags(self.fp32_flags)
                if worker.proc.pid is not None:
                    cand_peak = fp.host_peak_bytes(worker.proc.pid)
        try:
            footprint = fp.evidence(self.rp.device, candidate_peak=cand_peak)
            footprint["reference_host_peak_bytes"] = max(footprint["reference_host_peak_bytes"] or 0,
                                                         getattr(self, "_peak", 0))
            footprint["phase_peaks"] = state.evidence.pop("phase_host_peaks", {})
            footprint["bound_bytes"] = fp.bound_bytes(self._input_bytes, max(self.rp.output_bytes, 0))
            state.evidence["memory_footprint"] = footprint
        except Exception:  # noqa: BLE001 - evidence only
            pass
        self._settle_probes()
        patched = [c for c in state.flag_changes if c.startswith("harness patched")]
        if patched:
            channel = any(k in c for c in patched for k in ("protocol", "Connection", "ForkingPickler"))
            self._found("probe:harness-identity", (4, 24) if channel else (4,), Severity.HACK, "; ".join(patched))
        writes = [c[len("sandbox: "):] for c in state.flag_changes if c.startswith("sandbox: ")]
        if writes:
            self._found("probe:sandbox-writes", (26,), Severity.HACK,
                        f"wrote outside its working and build directories: {'; '.join(writes[:3])}")
        flags = [c for c in state.flag_changes if not c.startswith(("harness patched", "sandbox: "))]
        if flags:
            self._found("probe:global-flags", (18,), Severity.HACK,
                        f"changed global numeric flags (reset to eager-fp32 after every call): {'; '.join(flags[:4])}")
        state.findings = list(ig.ordered(state.findings))
        worst = ig.worst(state.findings)
        if worst is Severity.HACK:
            status = Status.HACK
            message = f"{self.name}: {state.findings[0].describe()}"
        elif worst is Severity.SHORTCUT and status is Status.PASS:
            status = Status.SHORTCUT
            message = f"{self.name}: correct, but {state.findings[0].describe()}"
        unverified = {}
        if status not in (Status.PASS, Status.SHORTCUT):
            # timed but not correct: the original protocol would have credited this speed
            unverified = dict(state.speedup) if status in (Status.INCORRECT, Status.HACK) else {}
            state.speedup.clear()
        if state.flag_changes:
            state.evidence["flag_warning"] = ("candidate changed global numeric flags; they were reset to the "
                                              "eager-fp32 flags after every call")
        memory_eff = None
        if "reference" in state.memory and "candidate" in state.memory:
            memory_eff = mem.efficiency(state.memory["reference"], state.memory["candidate"])
        return Verdict(
            status=status, message=message, problem=self.rp.ref, candidate=self.candidate, config=self.config,
            environment=self.env, input_sets=tuple(state.input_sets), timing=dict(state.timing),
            speedup=dict(state.speedup), unverified_speedup=unverified, memory=dict(state.memory),
            memory_efficiency=memory_eff,
            weight_mismatches=tuple(state.weight_mismatches), flag_changes=tuple(state.flag_changes),
            evidence=dict(state.evidence), phase_seconds=dict(state.phase_seconds),
            problem_flags=tuple(state.problem_flags), findings=tuple(state.findings),
        )


#: declared domains (kbv.domains) that a change of single elements would break: inputs declared so
#: are left alone by the per-call changes of timed inputs.
STRUCTURED_DOMAINS = ("fixed", "probability", "symmetric", "spd")


#: signals whose handler in the candidate's process means memory that fills itself on a fault.
FAULT_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS})


def process_cpu_ms(pid: int | None) -> float | None:
    """User + system CPU time of process ``pid`` (all its threads) in ms, from /proc/<pid>/stat."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1e3 / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def caught_signals(pid: int) -> frozenset:
    """Signals process ``pid`` has a handler for (``SigCgt`` of /proc/<pid>/status)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            mask = next((int(l.split()[1], 16) for l in f if l.startswith("SigCgt:")), 0)
    except (OSError, ValueError):
        return frozenset()
    return frozenset(n for n in range(1, 65) if mask >> (n - 1) & 1)


def content_digest(t: torch.Tensor) -> tuple:
    """Shape, dtype and two position-weighted int64 sums of the tensor's bytes, computed where it
    lies and in chunks: equal for bitwise-equal tensors, and different, but for a deliberate
    collision, for any other pair (stands in for keeping a copy to compare bitwise)."""
    flat = t.detach().contiguous().reshape(-1)
    raw = flat.view(torch.uint8) if flat.numel() else flat.new_empty(0, dtype=torch.uint8)
    words = raw.view(torch.int32) if raw.numel() % 4 == 0 else raw
    a = b = 0
    step = 1 << 22
    for s in range(0, words.numel(), step):
        w = words[s:s + step].to(torch.int64)
        idx = torch.arange(s + 1, s + 1 + w.numel(), device=w.device, dtype=torch.int64)
        a = (a + int(w.sum())) & ((1 << 64) - 1)
        b = (b + int((w * idx).sum())) & ((1 << 64) - 1)
    return tuple(t.shape), str(t.dtype), a, b


def timed_mutation(args: list, spare: list, g: torch.Generator, skip: tuple = ()) -> tuple:
    """The change one timed call's inputs get: for each tensor of ``args`` (a timing set) one
    element at a random position (from ``g``) takes the value ``spare`` (another ``get_inputs()``
    draw, so inside the problem's domain) has there. Returns ``((arg index, index tuple, value),
    ...)``; :func:`apply_mutation` applies it. Every timed call gets its own, so no two timed calls
    see the same values: a cache keyed by the whole input never hits, and one keyed by a sample of
    it returns a stale answer that the timed re-check sees (taxonomy 11; a softmax that computed
    honestly only when it sniffed kbv's checks and answered timed calls from such a cache got PASS
    at 2.8x before, row t11-sniff-sample-cache)."""
    out = []
    for ai, (a, b) in enumerate(zip(args, spare)):
        if ai not in skip and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) \
                and tuple(a.shape) == tuple(b.shape) and a.numel():
            flat = int(torch.randint(a.numel(), (1,), generator=g))
            where = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), a.shape)) if a.dim() else ()
            out.append((ai, where, b[where].to(a.dtype).item()))
    return tuple(out)


def apply_mutation(args: list, mutation: tuple) -> list:
    """``args`` with :func:`timed_mutation`'s changes (touched tensors cloned)."""
    out = list(args)
    for ai, where, value in mutation:
        t = out[ai].clone() if out[ai] is args[ai] else out[ai]
        t[tuple(where)] = value
        out[ai] = t
    return out


def _perturbed(args: list, other: list, seed: int, skip: tuple = ()) -> list:
    """``args`` with one element of each tensor (at a random position) taken from the same-shaped
    tensor of ``other`` (another draw of ``get_inputs()``); inputs at positions in ``skip``
    (declared :data:`STRUCTURED_DOMAINS`) are left as they are."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for ai, (a, b) in enumerate(zip(args, other)):
        if ai not in skip and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape \
                and a.numel():
            a = a.clone()  # same layout as get_inputs() made it
            k = int(torch.randint(a.numel(), (1,), generator=g))
            where = tuple(int(i) for i in torch.unravel_index(torch.tensor(k), a.shape))
            a[where] = b[where].to(a.dtype)
        out.append(a)
    return out


def hidden_test_sets(path: str) -> list:
    """Input sets from a KernelBench-Verified hidden test file (``get_hidden_inputs()`` → list of
    input lists), drawn under one secret seed: ``HT1``, ``HT2``, ... (kind hidden).

    Raises:
        ProblemError: the file fails to import, or ``get_hidden_inputs`` is missing or raises.
    """
    import hashlib

    raw = Path(path).read_bytes()
    name = f"kbv_hidden_{hashlib.sha256(raw).hexdigest()[:16]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(path, "cannot be imported as a module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        fn = getattr(module, "get_hidden_inputs")
        seed = inp.secret_seed()
        inp.seed_everything(seed)
        lists = list(fn())
    except BaseException as exc:  # noqa: BLE001 - a broken hidden test file is the problem's fault
        raise ProblemError(path, f"get_hidden_inputs() failed: {type(exc).__name__}: {_first_line(exc)}") from None
    return [inp.InputSet(f"HT{k + 1}", InputKind.HIDDEN, f"hidden_tests[{k}]", seed, list(args))
            for k, args in enumerate(lists)]


def verify(rp: ReferenceProblem, candidate: CandidateRef, config: EvalConfig, env: Environment, *,
           hidden_tests: str | None = None) -> Verdict:
    """Verify ``candidate`` against the built reference problem ``rp`` (``hidden_tests``: see
    :meth:`kbv.orchestrator.Evaluator.evaluate`).

    Raises:
        ProblemError: the reference itself fails on nominal inputs (the problem is broken).
    """
    return Verification(rp, candidate, config, env, hidden_tests).run()
