"""The orchestrator's view of verification: jobs out, verdicts back. Imports no candidate code.

:class:`Evaluator` keeps one reference worker per device alive across jobs and restarts it when
it dies. Verdicts arrive as plain JSON and are rebuilt (and validated) with
:func:`kbv.model.records.verdict_from_dict`.
"""

from __future__ import annotations

import hashlib
from typing import Callable
from pathlib import Path

from kbv.batch.baseline_cache import BaselineRun, environment_from_dict, measurement_from_dict
from kbv.intake.problems import ProblemError
from kbv.intake.sizes import workload_runs
from kbv.model.records import (CandidateRef, Environment, EvalConfig, ProblemRef, Status, Verdict,
    verdict_from_dict)
from kbv.model.records import VettingReport, vetting_from_dict
from kbv.model.source import file_sha256
from kbv.pipeline.diagnostics import TOOL_TIMEOUT_S
from kbv.pipeline.reference_worker import reference_main
from kbv.processes.reference import NOT_RUNNING, ReferenceProcess, minimal_environment
from kbv.processes.reference_jobs import BaselinesJob, EnvironmentJob, Job, VerifyJob, VetJob


class EvaluationError(RuntimeError):
    """kbv itself failed on a job (the reference worker died or raised): not a candidate verdict."""


def job_timeout_s(config: EvalConfig, problem: ProblemRef | None = None) -> float:
    """Upper bound of one job's wall time (s): every worker deadline of the pipeline (a build for the
    candidate's own worker and one for the secret shape's), plus slack,
    once per verification the ``problem``'s job makes (its declared workloads,
    :func:`kbv.intake.sizes.workload_runs`; one when None or unreadable), and the diagnostics' tool
    runs that the config asks for."""
    calls = config.nominal_seeds + len(config.hidden) + len(config.distributions) + 4
    rounds = max(config.timing_rounds, config.max_timing_rounds if config.interval_target > 0 else 0)
    runs = 1
    if problem is not None:
        try:
            runs = workload_runs(Path(problem.path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            runs = 1
    builds = 1 + (1 if config.secret_shapes else 0)  # the candidate's own worker and the secret shape's
    # the diagnostics' tool runs (kbv.pipeline.diagnostics), once per job: at the problem's own sizes
    tools = (len(config.sanitize) + 2 * config.ncu_profile) * TOOL_TIMEOUT_S if config.device == "cuda" else 0.0
    return runs * (builds * config.compile_timeout_s + calls * config.call_timeout_s
                   + rounds * config.timing_timeout_s) + tools + 300.0


#: ``CandidateRef.backend`` of a file that failed static vetting (its backend was never detected).
UNVETTED_BACKEND = "unknown"


def rejected_candidate(path: Path | str, *, run: str | None, sample_id: int | None) -> CandidateRef:
    """Identity of a candidate file that failed static vetting: the SHA-256 of its bytes (streamed,
    so a huge file is hashed without being held), or of its path when it cannot be read."""
    path = Path(path).resolve()
    try:
        digest = file_sha256(path)
    except OSError:
        digest = hashlib.sha256(f"unreadable:{path}".encode()).hexdigest()
    return CandidateRef(path=str(path), sha256=digest, backend=UNVETTED_BACKEND, run=run, sample_id=sample_id)


def rejection_verdict(problem: ProblemRef, candidate: CandidateRef, config: EvalConfig, fault: str) -> Verdict:
    """COMPILE_ERROR for a candidate refused by static vetting (unreadable, not UTF-8, over the size
    limit, syntax error, no ``ModelNew``), built here without running anything.

    ``fault`` is the one-line :class:`kbv.intake.candidates.CandidateError` text (it names the file);
    the message names the file as every other verdict's does, by its name (the path is the
    candidate's: source text's is a cache path, fresh helper).
    """
    prefix = f"{candidate.path}: "
    message = f"{Path(candidate.path).name}: {fault[len(prefix):]}" if fault.startswith(prefix) else fault
    return Verdict(status=Status.COMPILE_ERROR, message=message, problem=problem, candidate=candidate,
                   config=config, environment=minimal_environment(config.device),
                   evidence={"phase": "static vetting", "ran": False})


def eval_error_verdict(problem: ProblemRef, candidate: CandidateRef, config: EvalConfig, error: str) -> Verdict:
    """EVAL_ERROR for a job the reference worker failed (raised, sent nothing, timed out): kbv's
    failure, recorded with its first line and the worker's traceback, never the candidate's."""
    first = (error.strip().splitlines() or ["unknown failure"])[0][:300]
    return Verdict(status=Status.EVAL_ERROR, message=f"{Path(candidate.path).name}: kbv failed: {first}",
                   problem=problem, candidate=candidate, config=config,
                   environment=minimal_environment(config.device),
                   evidence={"phase": "reference worker", "error": error[-4000:]})


class Evaluator:
    """Verifies (problem, candidate) pairs on one device. Use as a context manager."""

    def __init__(self, device: str):
        self.device = device
        self._ref: ReferenceProcess | None = None

    def _worker(self) -> ReferenceProcess:
        if self._ref is None or not self._ref.proc.is_alive():
            if self._ref is not None:
                self._ref.close()
            self._ref = ReferenceProcess(self.device, reference_main)
        return self._ref

    def evaluate(self, problem: ProblemRef, candidate: CandidateRef, config: EvalConfig, *,
                 hidden_tests: str | None = None, next_candidate: Callable[[], CandidateRef | None] | None = None,
                 quiet_dir: str | None = None) -> Verdict:
        """Run the full verification of ``candidate`` against ``problem``.

        ``hidden_tests`` is an optional KernelBench-Verified ``<pid>_hidden.py`` file whose
        ``get_hidden_inputs()`` lists become extra hidden input sets ``HT1``, ``HT2``, ...
        ``next_candidate``: asked once this job's candidate is loaded, it names the candidate
        this evaluator verifies next (or None), whose worker the reference worker then starts
        (:mod:`kbv.pipeline.prestart`). ``quiet_dir``: the build pool's timing-flag directory
        (:mod:`kbv.processes.quiet`).

        Raises:
            ProblemError: the problem file is broken (import, constructor, inputs, reference forward).
        A reference worker that fails (raises, dies, times out) gives an EVAL_ERROR verdict and is
        restarted for the next job.
        """
        if config.device != self.device:
            raise ValueError(f"evaluator is for {self.device}, config asks for {config.device}")
        job = VerifyJob(problem, candidate, config, str(hidden_tests) if hidden_tests else None,
                        next_candidate is not None, str(quiet_dir) if quiet_dir else None)
        reply = self._worker().evaluate(job, job_timeout_s(config, problem), next_candidate)
        if reply.error is not None and reply.error.kind == NOT_RUNNING:  # nothing ran: once more, on a fresh one
            self._restart()
            reply = self._worker().evaluate(job, job_timeout_s(config, problem), next_candidate)
        if reply.problem_error:
            raise ProblemError(problem.path, reply.problem_error.fault)
        if reply.error or reply.verdict is None:
            self._restart()
            return eval_error_verdict(problem, candidate, config,
                                      reply.error.describe() if reply.error else "reference worker sent no verdict")
        verdict = verdict_from_dict(reply.verdict)
        if verdict.status is Status.EVAL_ERROR or reply.restart:
            self._restart()  # a fresh reference worker for the next job (its memory, its state)
        return verdict

    def _restart(self) -> None:
        """Close the reference worker: the next job starts a fresh one."""
        if self._ref is not None:
            self._ref.close()
            self._ref = None

    def _ask(self, job: Job, timeout: float, field: str, problem: ProblemRef | None = None) -> object:
        """The reply's ``field`` to ``job`` (``baselines``, ``vetting``): the one send, check and
        restart of the evaluator's non-verification jobs.

        Raises:
            ProblemError: the problem file is broken (``problem``: the job's).
            EvaluationError: the reference worker failed or did not answer ``field``; it is restarted.
        """
        reply = self._worker().evaluate(job, timeout)
        if reply.problem_error and problem is not None:
            raise ProblemError(problem.path, reply.problem_error.fault)
        value = getattr(reply, field)
        if reply.error or value is None:
            self._restart()
            raise EvaluationError(reply.error.describe() if reply.error else f"reference worker sent no {field}")
        return value

    def environment(self) -> Environment:
        """The reference worker's environment (device name, driver, torch): a baseline cache key's parts.

        Raises:
            EvaluationError: the reference worker failed.
        """
        return environment_from_dict(self._ask(EnvironmentJob(), 300.0, "baselines")["environment"])

    def measure_baselines(self, problem: ProblemRef, config: EvalConfig,
                          labels: tuple[str, ...]) -> BaselineRun:
        """Time the problem's reference under each baseline label (``eager-fp32``, ``eager-tf32``,
        ``compile``) in the reference worker (:func:`kbv.pipeline.baseline_measure.measure_reference`).

        Returns:
            a :class:`kbv.batch.baseline_cache.BaselineRun` (environment, measurements, per-label errors).
        Raises:
            ProblemError: the problem file is broken.
            EvaluationError: the reference worker failed.
        """
        if config.device != self.device:
            raise ValueError(f"evaluator is for {self.device}, config asks for {config.device}")
        timeout = config.compile_timeout_s + len(labels) * config.timing_timeout_s + 300.0
        b = self._ask(BaselinesJob(problem, config, tuple(labels)), timeout, "baselines", problem)
        return BaselineRun(environment=environment_from_dict(b["environment"]),
                           measurements={k: measurement_from_dict(m) for k, m in b["measurements"].items()},
                           errors=dict(b.get("errors", {})))

    def vet(self, problem: ProblemRef, config: EvalConfig, seeds: int = 2) -> VettingReport:
        """Vet ``problem`` (``kbv.reference.vetting.vet_problem``) in the reference worker.

        Raises:
            ProblemError: the problem file is broken (import, constructor, inputs, metadata).
            EvaluationError: the reference worker failed; it is restarted for the next job.
        """
        if config.device != self.device:
            raise ValueError(f"evaluator is for {self.device}, config asks for {config.device}")
        calls = seeds * (1 + len(config.hidden) + len(config.distributions)) * 3 + 2
        return vetting_from_dict(self._ask(VetJob(problem, config, int(seeds)), calls * config.call_timeout_s + 300.0,
                                           "vetting", problem))

    def close(self, abort: bool = False) -> None:
        """Stop the reference worker (``abort``: at once, not after the job in flight)."""
        if self._ref is not None:
            self._ref.close(abort=abort)
            self._ref = None

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, exc_type, *exc: object) -> None:
        # Ctrl-C or SIGTERM out of the block: the job in flight is dropped, not waited for (the
        # worker ignores SIGINT and would finish it first)
        self.close(abort=exc_type is not None and not issubclass(exc_type, Exception))
