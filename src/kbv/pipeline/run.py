"""The pipeline of one verification, run inside the (trusted) reference worker.

build candidate (in a fresh candidate worker) → same-weights check → nominal correctness
(``nominal_seeds`` fresh secret seeds) → hidden distributions D1–D4 → kbv's randomised
distributions, with a secret shape judged in a worker of its own before the build or after these
(a secret coin, ``kbv.pipeline.secret_shapes``) → inline problem vetting → timing of the candidate and the baselines on identical
inputs, interleaved in rounds → peak memory → verdict.

On every input set the reference runs under the eager-fp32 flags (and, on cuda, the eager-tf32
flags), the float64 oracle runs on the upcast inputs, and the candidate's outputs are judged by
both correctness policies (``kbv.reference.oracle``); ``passed`` follows the config's policy. Seeds
are drawn only after the candidate is loaded. Reference outputs, oracle outputs and seeds never
leave this process; only inputs go to the candidate, as fresh copies.

Each stage is a class of its own module holding the shared :class:`kbv.pipeline.context.Context`
and the stages it calls (no inheritance between them); :class:`Verification` builds them and
:meth:`Verification.run` calls them in order.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable, ContextManager

from kbv.intake.candidates import backend_modules, build_dir
from kbv.model.records import CandidateRef, Environment, EvalConfig, InputKind, Verdict
from kbv.pipeline.bound_pass import BoundStage
from kbv.pipeline.context import Context
from kbv.pipeline.correctness import Correctness
from kbv.pipeline.diagnostics import Diagnostics
from kbv.pipeline.judging import Judging
from kbv.pipeline.load import Load
from kbv.pipeline.memory_stage import MemoryStage
from kbv.pipeline.outcome import Outcome, Stop, failed_sets_phrase
from kbv.pipeline.profile_stage import ProfileCheck
from kbv.processes import elf
from kbv.pipeline.repeat import RepeatGain
from kbv.pipeline.roofline import Roofline
from kbv.pipeline.secret_shapes import SecretShapes
from kbv.pipeline.sync import SyncChecks
from kbv.pipeline.timing_rounds import Timing
from kbv.pipeline.verdict import VerdictStage
from kbv.pipeline.vetting_stage import Vetting
from kbv.pipeline.workload_runs import verify_workloads
from kbv.processes import footprint as fp
from kbv.processes import request_trace
from kbv.processes.candidate import CandidateProcess
from kbv.processes.procfs import FAULT_SIGNALS, caught_signals
from kbv.reference.build import ReferenceProblem, first_line
from kbv.sandbox import numeric_flags as bl


class Verification:
    """One (problem, candidate, config) verification: the stages of :mod:`kbv.pipeline` over one
    shared :class:`kbv.pipeline.context.Context`, each given the stages it calls. Call :meth:`run`
    once."""

    def __init__(self, rp: ReferenceProblem, candidate: CandidateRef, config: EvalConfig, env: Environment,
                 hidden_tests: str | None = None, *, worker: CandidateProcess | None = None,
                 shape_worker: CandidateProcess | None = None,
                 quiet: Callable[[], ContextManager] | None = None, on_loaded: Callable[[], None] | None = None):
        ctx = self.ctx = Context(rp, candidate, config, env, hidden_tests, worker=worker, quiet=quiet,
                                 on_loaded=on_loaded)
        judge = Judging(ctx)
        self.loader = Load(ctx)
        self.correctness = Correctness(ctx, judge)
        self.shapes = SecretShapes(ctx, self.loader, self.correctness, worker=shape_worker)
        self.correctness.between_sets = self.shapes._poll_load  # the shape's load read once it has come
        self.vetting = Vetting(ctx)
        self.diagnostics = Diagnostics(ctx)
        self.timing = Timing(ctx, judge, BoundStage(ctx, judge), RepeatGain(ctx), SyncChecks(ctx), Roofline(ctx),
                             ProfileCheck(ctx), MemoryStage(ctx))
        self.verdict = VerdictStage(ctx, judge)

    # the whole pipeline --------------------------------------------------------------------
    def run(self) -> Verdict:
        ctx = self.ctx
        state = ctx.state
        outcome, message = Outcome.CORRECT, ""
        if ctx.config.integrity:
            self.loader._scan()
        bd = build_dir(ctx.candidate, ctx.config.device)
        fp.reset_host_peak()
        if ctx.rp.device.type == "cuda":
            fp.reset_process_peak(ctx.rp.device)
        cand_peak = None
        # ``held`` closes after the worker: the secret shape's worker and lock (a workload's verification
        # too), and this worker's load sent ahead (its build lock released once nothing builds)
        with contextlib.ExitStack() as held, ctx.worker or CandidateProcess(
                device=ctx.config.device, build_dir=bd, preload=backend_modules(ctx.candidate.backend)) as worker:
            held.callback(self.shapes.release)
            try:
                self.loader._preflight()
                if worker.proc.pid is not None:
                    ctx._signals_at_spawn = caught_signals(worker.proc.pid) & FAULT_SIGNALS
                    ctx.state.evidence["signals_at_spawn"] = sorted(int(x) for x in ctx._signals_at_spawn)
                ctx.state.evidence["worker_started_early"] = ctx.worker is not None
                ctx.state.evidence["worker_start"] = worker.started_by  # zygote or spawn
                shape_first = self.shapes._shape_first()  # a secret coin: before this worker's load, or after its sets
                pending = None  # this worker's load, sent once the shape's worker has built (the loads keep their order)
                if shape_first:
                    def send_load() -> None:
                        nonlocal pending
                        pending = held.enter_context(contextlib.closing(self.loader._load_ahead(worker, ctx.rp.init_args)))
                    self.shapes._secret_shapes(after_load=send_load)  # in a worker of its own
                self.loader._load(worker, pending)
                if ctx.config.integrity and (nm := elf.reader()) is not None:  # its objects' imports, read meanwhile
                    ctx.elf_prefetch = elf.Prefetched([worker.setup.build_dir, str(worker.workdir)], nm)
                if shape_first:
                    self.shapes._shape_built_nominally()
                if ctx.on_loaded is not None:
                    ctx.on_loaded()
                if not shape_first:  # the shape's worker builds while this one's sets are judged
                    self.shapes._begin_shape()
                self.correctness._correctness(worker)
                if not shape_first and all(r.passed for r in state.input_sets if not r.dropped):
                    self.shapes._judge_shape()
                self.shapes.release()  # wrong already: the shape's worker closed unjudged, now
                self.shapes._shape_finding()
                self.diagnostics._diagnose(already_wrong=any(r.passed is False for r in state.input_sets
                                                             if not r.dropped))
                self.vetting._vet()
                judged = [r for r in state.input_sets if not r.dropped]
                nominal_ok = all(r.passed for r in judged if r.kind is InputKind.NOMINAL) and any(
                    r.kind is InputKind.NOMINAL for r in judged)
                if nominal_ok:  # one more set at the secret shape once the timed calls are over
                    self.timing._timing(worker, after_timed=lambda: self.shapes._late_shape(worker))
                wrong = self._wrong()
                if wrong:
                    outcome, message = Outcome.WRONG, wrong
                else:
                    message = f"{ctx.name}: correct on {sum(not r.dropped for r in state.input_sets)} input set(s)"
            except Stop as stop:
                outcome, message = stop.outcome, stop.message
                state.evidence.update(stop.evidence)
                self.shapes._shape_finding()  # what the secret shape found stays on the record
            except Exception as exc:  # the reference worker's own allocation failed: kbv's limit
                if not fp.is_memory_error(exc):
                    raise
                outcome, message = self._memory_failure(exc)
            finally:
                bl.apply_flags(ctx.fp32_flags)
                if ctx.elf_prefetch is not None:  # nothing of this job's reads runs on into the next job
                    ctx.elf_prefetch.stop()
                if worker.proc.pid is not None:
                    cand_peak = fp.host_peak_bytes(worker.proc.pid)
        return self.verdict._verdict(outcome, message, cand_peak)


    def _memory_failure(self, exc: BaseException) -> tuple[Outcome, str]:
        """The outcome once the reference worker's own allocation failed with ``exc``: kbv's failure
        (KBV_FAILED; "does not fit this machine" where :meth:`Context._trusted_oom_fit` says so),
        unless a judged set, the secret shape's included, already failed: that set's WRONG stands,
        so a wrong kernel cannot fill the device to end as kbv's failure (red-team helper)."""
        read = self.ctx._oom_fit
        fit = read[1] if read is not None and read[0] is exc else self.ctx._trusted_oom_fit(exc)
        self.shapes._shape_finding()  # the shape's sets count among the judged ones
        wrong = self._wrong()
        if wrong:
            return Outcome.WRONG, f"{wrong} (then kbv ran out of memory in the reference worker, which ended the verification)"
        if fit:
            return Outcome.KBV_FAILED, f"{self.ctx.name}: the problem does not fit this machine: {fit}"
        return Outcome.KBV_FAILED, (f"{self.ctx.name}: kbv ran out of memory in the reference worker "
                                    f"({type(exc).__name__}: {first_line(exc)}); not the candidate's fault")

    def _wrong(self) -> str:
        """The WRONG message where a judged set failed ("" where none did); the failed sets' names
        are kept as ``evidence["failed_sets"]``."""
        judged = [r for r in self.ctx.state.input_sets if not r.dropped]
        failed = [r for r in judged if not r.passed]
        if not failed:
            return ""
        self.ctx.state.evidence["failed_sets"] = [r.name for r in failed]
        return (f"{self.ctx.name}: wrong on {failed_sets_phrase([r.name for r in failed], len(judged))}: "
                f"{failed[0].fault}")


def verify(rp: ReferenceProblem, candidate: CandidateRef, config: EvalConfig, env: Environment, *,
           hidden_tests: str | None = None, worker: CandidateProcess | None = None,
           shape_worker: CandidateProcess | None = None, quiet=None, on_loaded=None) -> Verdict:
    """Verify ``candidate`` against the built reference problem ``rp`` (``hidden_tests``: see
    :meth:`kbv.batch.evaluator.Evaluator.evaluate`). ``worker``: a candidate worker started for this
    job ahead of it, idle (:mod:`kbv.pipeline.prestart`; closed at the end like a fresh one);
    ``shape_worker``: one started ahead for its secret shape (closed at the end, used or not);
    ``quiet``: a context factory wrapped round the timed rounds and the sync pass; ``on_loaded``:
    called once the candidate is loaded. A problem that declares workloads (:mod:`kbv.reference.workloads`)
    is verified at each, one verification after the other (:mod:`kbv.pipeline.workload_runs`), and
    gets one verdict over them. The problem's own settings (``KBV_METADATA["config"]``) apply under
    the ones the user set (:meth:`kbv.model.records.EvalConfig.with_problem`); the verdict's config is
    the resolved one and ``evidence["problem_config"]`` says what the problem set.

    Raises:
        ProblemError: the reference itself fails on nominal inputs, or refuses a declared
            workload's sizes (the problem is broken).
    """
    config, applied = config.with_problem(rp.settings)  # kbv's defaults < the problem file < the user
    request_trace.record("verify", what="start", candidate=candidate.path)
    try:
        first = Verification(rp, candidate, config, env, hidden_tests, worker=worker, shape_worker=shape_worker,
                             quiet=quiet, on_loaded=on_loaded)
    except BaseException:
        if shape_worker is not None:
            shape_worker.close()
        raise
    try:
        nominal = first.run()
    finally:
        first.shapes.release()
    if rp.workloads:
        nominal = verify_workloads(rp, nominal, lambda wrp: Verification(wrp, candidate, config, env, quiet=quiet).run())
    if applied:
        nominal = dataclasses.replace(nominal, evidence={**nominal.evidence, "problem_config": applied})
    request_trace.record("verify", what="end", status=nominal.status.value)
    return nominal
