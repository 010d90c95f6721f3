"""The state one verification carries from stage to stage, and the calls into its candidate
worker that every stage shares (replies checked, worker failures turned into the pipeline's ends)."""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager

import torch

from kbv.model.records import CandidateRef, Environment, EvalConfig, Finding
from kbv.processes import footprint as fp
from kbv.processes import request_trace
from kbv.processes.candidate import CandidateProcess
from kbv.processes.handles import WorkerDied, WorkerTimeout
from kbv.checks import bound_plan
from kbv.checks import output_rules as out_rule
from kbv.checks import worker_calls as calls_rule
from kbv.checks.probe_rules import output_memory_finding
from kbv.pipeline.outcome import Outcome, Stop  # noqa: F401  (Stop: every stage raises it from here)
from kbv.processes.procfs import caught_signals
from kbv.processes.reply_schema import UnjudgedDtype
from kbv.reference import inputs as inp
from kbv.reference import oracle as orc
from kbv.reference.build import ReferenceProblem, first_line
from kbv.reference.mutation import STRUCTURED_DOMAINS
from kbv.sandbox import numeric_flags as bl
from kbv.sandbox import protocol, rawcopy


class PhaseSeconds(dict):
    """``{phase: seconds}``, the pipeline's own marks; each mark set is also a ``stage`` event of
    the bench's request trace (:mod:`kbv.processes.request_trace`) when one is on."""

    def __setitem__(self, key: str, value: float) -> None:
        super().__setitem__(key, value)
        request_trace.record("stage", name=key, seconds=value)


@dataclass
class State:
    input_sets: list = field(default_factory=list)
    timing: dict = field(default_factory=dict)
    memory: dict = field(default_factory=dict)
    speedup: dict = field(default_factory=dict)
    weight_mismatches: list = field(default_factory=list)
    flag_changes: list = field(default_factory=list)  #: global numeric flags changed (str), first seen first.
    tampering: list = field(default_factory=list)  #: protocol.Tampering reports, first seen first.
    evidence: dict = field(default_factory=dict)
    phase_seconds: dict = field(default_factory=PhaseSeconds)
    summaries: dict = field(default_factory=dict)  #: set name → vetting.OutputSummary of the reference.
    nominal_args: Any = None  #: the first nominal inputs.InputSet (determinism re-run; made again then).
    problem_flags: list = field(default_factory=list)
    findings: list = field(default_factory=list)  #: records.Finding, in the order found.



class Context:
    """One (problem, candidate, config) verification's shared state and the worker calls every
    stage makes; each stage class of :mod:`kbv.pipeline` holds it (``self.ctx``), and
    :class:`kbv.pipeline.run.Verification` builds the stages and calls them in order."""

    _input_bytes = 0  #: bytes of one call's inputs (set by the preflight; sizes the memory bound).

    def __init__(self, rp: ReferenceProblem, candidate: CandidateRef, config: EvalConfig, env: Environment,
                 hidden_tests: str | None = None, *, worker: CandidateProcess | None = None,
                 quiet: Callable[[], ContextManager] | None = None, on_loaded: Callable[[], None] | None = None):
        self.hidden_tests = hidden_tests
        #: a candidate worker started ahead for this job (kbv.pipeline.prestart), used instead of a spawn
        self.worker = worker
        #: makes the context the timed rounds and the sync pass run in (kbv.pipeline.prestart.quiet)
        self.quiet = quiet
        #: called once the candidate is loaded (the lane's next worker is started then)
        self.on_loaded = on_loaded
        self.rp = rp
        self.candidate = candidate
        self.config = config
        self.env = env
        self.state = State()
        self.fp32_flags = bl.flags_for("eager-fp32")
        self.tf32_flags = bl.flags_for("eager-tf32")
        self.name = Path(candidate.path).name
        self.oracle = orc.Oracle(rp.model, rp.device)
        self._seen: list = []  #: (set name, output fingerprint, reference fingerprint, passed) per call.
        self._kept_outputs: list | None = None
        self._kept_inputs: list | None = None  # the digests of the inputs those outputs came from
        self._last_structure: str | None = None
        self._last_equal: bool | None = None  #: the last forward's outputs equal the reference's (Correctness)
        self._pending_probes: list = []  #: (check, taxonomy, detail, error / budget) of failed probes.
        self._fault_reported = ""  #: the severity of probe:fault-handler found so far, or "".
        self._reused_reported = False
        self._memory_reported = False  #: probe:output-memory found on a timed call already.
        #: costs in ms (:meth:`_call_cost`) of the timed calls on fresh values and
        #: of the repeated calls (kbv.pipeline.repeat).
        self._repeat_costs: dict = {"fresh": [], "repeat": []}
        #: the largest input-rounding errors the nominal sets measured (kbv.pipeline.judging), per output.
        self._nominal_rounding: list | None = None
        #: the candidate's native objects read by ``nm`` while the job goes on (``kbv.processes.elf.Prefetched``,
        #: started once it is loaded; the profile stage reads their imports)
        self.elf_prefetch = None
        self._slots = None  #: the candidate worker's output slot buffer, shared (kbv.sandbox.protocol.TimingReady).
        self._slot_bytes = 0  #: bytes per slot.
        self._slot_touch = 0  #: bytes of each slot written when it is made, on cpu (0: all).
        self._slot_count = 0  #: slots in the buffer.
        #: device bytes kbv placed in the candidate worker for the timing stage
        #: (:func:`kbv.checks.worker_calls.staged_timing_bytes`); 0 before it.
        self._staged_bytes = 0
        #: bytes added to ``_staged_bytes`` at the first timed reply (the kept output,
        #: :func:`kbv.checks.worker_calls.kept_output_bytes`); 0 once added.
        self._staged_kept = 0
        #: the candidate tree's device bytes just before kbv's staging began (None: not read)
        self._held_before_staging: int | None = None
        #: the staging request's reply came back whole: every staged buffer exists
        self._staging_done = False
        #: (a reference worker's memory failure, :meth:`_trusted_oom_fit` of it) read where it was
        #: raised at a secret shape, before the shape's state was left (red-team helper)
        self._oom_fit: tuple[BaseException, str | None] | None = None
        self._views: list = []  #: the last timed call's outputs, views of slot 0 (kbv.sandbox.rawcopy.view).
        self._kept_times: dict = {}  #: candidate times of judged and of other timed calls (plan leak evidence).
        self._signals_at_spawn: frozenset = frozenset()

    # candidate calls ---------------------------------------------------------------------
    def _add(self, found: Finding | None) -> None:
        """Record a rule's finding (:mod:`kbv.checks`); None: the rule found nothing."""
        if found is not None:
            self.state.findings.append(found)

    def _call(self, worker: CandidateProcess, request: Any, phase: str, timeout: float) -> Any:
        with self._held(worker, request, phase, timeout, hold=False) as reply:
            return reply

    def _send(self, worker: CandidateProcess, request: Any, phase: str) -> None:
        """The first half of :meth:`_call`; :meth:`_received` reads the reply (several workers
        then work at once).

        Raises:
            Stop: WORKER_DIED, the worker is gone.
        """
        try:
            worker.send(request, phase=phase)
        except WorkerDied as exc:
            raise self._died(exc, phase) from None

    def _died(self, exc: WorkerDied, phase: str) -> Stop:
        """The findings a dead worker leaves (its exit code, refusals in its log) added; its Stop."""
        self._add(calls_rule.early_exit(exc.exitcode, phase))
        self._add(calls_rule.refused_in_log(exc.log_tail))
        return Stop(Outcome.WORKER_DIED, f"{self.name}: {exc}", exitcode=exc.exitcode, log_tail=exc.log_tail)

    def _received(self, worker: CandidateProcess, phase: str, timeout: float) -> Any:
        """The checked reply to the request :meth:`_send` sent (as :meth:`_call`'s)."""
        with self._held(worker, None, phase, timeout, hold=False) as reply:
            return reply

    @contextlib.contextmanager
    def _held(self, worker: CandidateProcess, request: Any, phase: str, timeout: float, hold: bool = True):
        """The worker's checked reply to ``request`` (None: to the one :meth:`_send` sent); with
        ``hold`` the worker's tree stays stopped inside the block (:meth:`CandidateProcess.held_call`). Worker failures become
        the pipeline's ends (TIMEOUT, CRASH, RUNTIME_ERROR) here; a reply that does not decode a
        HACK (``probe:reply-channel``), one holding a tensor of a dtype kbv does not judge
        (:class:`kbv.processes.reply_schema.UnjudgedDtype`) INCORRECT (``probe:output-dtype``; where
        the call was a correctness set's, the correctness stage fails that set too).

        Raises:
            Stop: as said.
        """
        cm = worker.held_call(request, phase=phase, timeout=timeout) if hold else None
        try:
            if cm is not None:
                reply = cm.__enter__()
            elif request is None:  # sent already (:meth:`_send`)
                reply = worker.receive(phase=phase, timeout=timeout)
            else:
                reply = worker.call(request, phase=phase, timeout=timeout)
        except WorkerTimeout as exc:
            self._add(calls_rule.refused_in_log(exc.log_tail))
            raise Stop(Outcome.TIMED_OUT, f"{self.name}: {exc}", log_tail=exc.log_tail) from None
        except WorkerDied as exc:
            raise self._died(exc, phase) from None
        except UnjudgedDtype as exc:  # the candidate's output (or state): no reference output has that dtype
            self._add(calls_rule.unjudged_dtype(phase, exc.dtype))
            raise Stop(Outcome.WRONG, f"{self.name}: {phase}: {exc}", unjudged_dtype=exc.dtype) from None
        except protocol.ProtocolError as exc:
            self._add(calls_rule.broken_reply(phase, first_line(exc)))
            raise Stop(Outcome.BAD_REPLY, f"{self.name}: {phase}: {exc}") from None
        try:
            # the reports first: a failure the candidate caused (a refused frame access) keeps them
            for seen, reported in ((self.state.flag_changes, getattr(reply, "flag_changes", ())),
                                   (self.state.tampering, getattr(reply, "tampering", ()))):
                for c in reported:
                    if c not in seen:
                        seen.append(c)
            self._fault_handlers(worker, reply)
            if isinstance(reply, protocol.Failed):
                outcome = Outcome.BUILD_RAISED if phase == "load" else Outcome.CALL_RAISED
                what = ("importing the candidate file" if reply.phase == "import" else "building ModelNew") \
                    if phase == "load" else phase
                if reply.kind == protocol.OUT_OF_MEMORY:
                    self._device_capacity()
                    what += " (the candidate ran out of memory in its own allocations)"
                hint = calls_rule.triton_cpu_hint(self.rp.device.type, self.candidate.backend, str(reply.message),
                                                  os.environ.get("TRITON_INTERPRET") == "1")
                raise Stop(outcome, f"{self.name}: {what} raised {reply.error_type}: {first_line(reply.message)}{hint}",
                            traceback=reply.traceback, log_tail=worker.log_tail())
            yield reply
        finally:
            if cm is not None:
                cm.__exit__(None, None, None)

    def _device_capacity(self) -> None:
        """After a candidate's out-of-memory failure on cuda: where the device's own figures show it
        full with the candidate within kbv's bound (:func:`kbv.checks.worker_calls.device_capacity_oom`),
        the problem does not fit this device, kbv's failure (EVAL_ERROR), not the candidate's.

        Raises:
            Stop: KBV_FAILED, as said.
        """
        device = self.rp.device
        if device.type != "cuda":
            return
        try:
            free, total, reserved = fp.device_memory(device)
        except RuntimeError:  # the device does not answer: the candidate's failure stands
            return
        out = max(self.rp.output_bytes, 0)
        # other users' bytes are not subtracted: where NVML lists host PIDs, its fallback counts the
        # candidate (whose /proc fds kbv may not read) among them (red-team, 2026-12-06); the rule is then
        # stricter beside a foreign process, never looser
        bound = fp.bound_bytes(self._input_bytes, out)
        wrong = any(r.passed is False for r in self.state.input_sets)
        reason = calls_rule.device_capacity_oom(free, total, reserved, 0, self._input_bytes + out, bound,
                                                self._staged_bytes, wrong, self._held_before_staging,
                                                self._staging_done)
        # kept whichever way the rule went: a RUNTIME_ERROR's verdict says what the device held then
        self.state.evidence["device_capacity"] = {
            "free_bytes": free, "total_bytes": total, "reference_reserved_bytes": reserved,
            "candidate_at_most_bytes": calls_rule.candidate_at_most(free, total, reserved), "bound_bytes": bound,
            "call_bytes": self._input_bytes + out, "staged_bytes": self._staged_bytes,
            "held_before_staging_bytes": self._held_before_staging, "staging_done": self._staging_done,
            "wrong_already": wrong,
            "does_not_fit": reason is not None}
        if reason is not None:
            raise Stop(Outcome.KBV_FAILED, f"{self.name}: the problem does not fit this machine: {reason}")

    def _trusted_oom_fit(self, exc: BaseException) -> str | None:
        """After the reference worker's own device out-of-memory failure ``exc`` on cuda: the reason
        it is the device's capacity (:func:`kbv.checks.worker_calls.trusted_oom_does_not_fit`), or
        None; the device's figures are kept as ``evidence["trusted_oom"]``. Read inside the handler,
        before anything is released: the failed work's tensors are still held by its traceback, so
        the bytes in use plus the failed request are what the reference worker needed; kbv's staged
        buffers count only once the staging's reply came back (before, they may not exist)."""
        if self.rp.device.type != "cuda" or self._input_bytes <= 0 or not fp.is_device_memory_error(exc):
            return None
        try:
            free, total, reserved = fp.device_memory(self.rp.device)
            need = max(fp.process_peak_bytes(self.rp.device),
                       fp.allocated_bytes(self.rp.device) + fp.requested_bytes(exc))
        except RuntimeError:
            return None
        call = self._input_bytes + max(self.rp.output_bytes, 0)
        bound = fp.bound_bytes(self._input_bytes, max(self.rp.output_bytes, 0))
        staged = self._staged_bytes if self._staging_done else 0
        reason = calls_rule.trusted_oom_does_not_fit(free, total, reserved, need, call, bound, staged)
        self.state.evidence["trusted_oom"] = {"free_bytes": free, "total_bytes": total,
                                              "reference_reserved_bytes": reserved,
                                              "reference_need_bytes": need, "bound_bytes": bound,
                                              "staged_bytes": staged, "does_not_fit": reason is not None}
        return reason

    def _fault_handlers(self, worker: CandidateProcess, reply: object) -> None:
        """The candidate worker catches SIGSEGV or SIGBUS (its ``SigCgt``, read here from
        /proc): memory that computes itself when touched, a lazy output (taxonomy 3). Neither
        Python, torch nor Triton installs such a handler in the worker (measured at spawn:
        ``evidence["signals_at_spawn"]``). Judged at replies that carry the worker's reading of
        whose handlers they are (``reply.faulthandler``); a WARNING for faulthandler's is checked
        again at every later reply, and becomes HACK once another handler took its place (the
        first fault removes a faulthandler chained in front of a handler of the candidate's)."""
        if worker.proc.pid is None or not hasattr(reply, "faulthandler"):
            return
        found = calls_rule.fault_handlers(caught_signals(worker.proc.pid), self._signals_at_spawn,
                                          faulthandler=reply.faulthandler is True, reported=self._fault_reported)
        if found is not None:
            self._add(found)
            self._fault_reported = found.severity.value

    def _phase_peak(self, phase: str) -> None:
        """Record this process's peak resident bytes over the phase just ended, and start the next
        phase's count (evidence ``memory_footprint["phase_peaks"]``); on cuda also the device peak
        so far (``memory_footprint["phase_device_peaks"]``, not reset between phases)."""
        peak = fp.host_peak_bytes()
        if peak is not None:  # a phase marked more than once (each bound pass) keeps its highest
            peaks = self.state.evidence.setdefault("phase_host_peaks", {})
            peaks[phase] = max(peaks.get(phase, 0), peak)
            self._peak = max(getattr(self, "_peak", 0), peak)
        fp.reset_host_peak()
        if self.rp.device.type == "cuda":  # the device peak so far: the phase where it rose past the bound
            self.state.evidence.setdefault("phase_device_peaks", {})[phase] = fp.process_peak_bytes(self.rp.device)

    def _structured(self) -> tuple:
        """Input positions whose declared domain (:data:`STRUCTURED_DOMAINS`) changes of single
        elements would break: left out of the input mix; the per-call changes and the perturbed probe
        keep their structure (:func:`kbv.reference.mutation.structured_change`)."""
        return tuple(sorted(i for i, d in self.rp.domains.items() if isinstance(i, int) and d.kind in STRUCTURED_DOMAINS))

    def _kinds(self) -> dict:
        """The declared domain of each structured input position (:meth:`_structured`): what
        :func:`kbv.reference.mutation.structured_change` keeps."""
        return {i: d.kind for i, d in self.rp.domains.items() if isinstance(i, int) and d.kind in STRUCTURED_DOMAINS}

    def _fresh_draw(self, seed: int) -> list:
        """The problem's ``get_inputs()`` under ``seed``, on the device and in the precision the
        timing sets have (:meth:`kbv.pipeline.timing_rounds.TimingStage._timing_sets`): values no
        request has sent the candidate (the bound pass's calls, the op count's)."""
        dev = self.rp.device
        return inp.to_device(inp.draw(self.rp.module.get_inputs, seed, dev), dev, self.config.precision)

    def _fresh_draw_for(self, sets: list, seed: int) -> list | None:
        """:meth:`_fresh_draw` where one may stand in for a timing set of ``sets``: within kbv's memory
        bound (:func:`kbv.checks.bound_plan.fresh_draws_fit`) and of every timing set's layout
        (:func:`kbv.checks.bound_plan.same_layout`: its plain arguments too); None there, or where ``get_inputs()`` raises (it
        drew the timing sets: the caller keeps its mix of them)."""
        in_bytes = sum(a.numel() * a.element_size() for a in sets[0] if isinstance(a, torch.Tensor))
        if not bound_plan.fresh_draws_fit(in_bytes, self.rp.output_bytes or 0, len(sets)):
            return None
        try:
            args = self._fresh_draw(seed)
        except Exception:  # noqa: BLE001 - a draw that fails here leaves the mix
            return None
        return args if all(bound_plan.same_layout(args, s) for s in sets) else None

    # timed replies ----------------------------------------------------------------------
    def _timed_reply(self, reply: object) -> None:
        """The checks every reply to a :class:`kbv.sandbox.protocol.TimedCall` gets: its form, an
        output that is not the caller's (taxonomy 8) or not over device memory (taxonomy 3, both
        reported once), and the outputs' layouts in the slot buffer (``self._views``)."""
        if not isinstance(reply, protocol.CallTimed) or not isinstance(reply.time_ms, (int, float)):
            raise Stop(Outcome.BAD_REPLY, f"{self.name}: time: malformed reply")
        self._staged_bytes, self._staged_kept = self._staged_bytes + self._staged_kept, 0
        if reply.reused and not self._reused_reported:
            self._reused_reported = True
            self._add(out_rule.reused_output(str(reply.reused)))
        if reply.memory and not self._memory_reported:
            self._memory_reported = True
            self.state.findings.append(output_memory_finding(str(reply.memory), " (a timed call)"))
        try:
            self._views = rawcopy.view(self._slots[:self._slot_bytes], reply.outputs)
        except ValueError as exc:
            raise Stop(Outcome.BAD_REPLY, f"{self.name}: time: {exc}") from None

    def _call_cost(self, reply: object) -> float:
        """What a timed call cost, in ms, for comparing one candidate's calls with each other: the
        event time on cuda; on cpu the lesser of the wall time and the CPU time of the worker's
        calling thread. Noise only adds to either: a loaded machine stretches the wall time, and
        the calling thread spins at torch's pool barrier while a pool thread waits to run."""
        ms = float(reply.time_ms)
        cpu = reply.cpu_ms
        if self.rp.device.type == "cpu" and isinstance(cpu, (int, float)) and math.isfinite(cpu) and cpu > 0:
            return min(ms, float(cpu))
        return ms
