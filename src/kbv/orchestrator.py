"""The orchestrator's view of verification: jobs out, verdicts back. Imports no candidate code.

:class:`Evaluator` keeps one reference worker per device alive across jobs and restarts it when
it dies. Verdicts arrive as plain JSON and are rebuilt (and validated) with
:func:`kbv.records.verdict_from_dict`.
"""

from __future__ import annotations

import dataclasses

from kbv.problems import ProblemError
from kbv.records import CandidateRef, EvalConfig, ProblemRef, Verdict, to_dict, verdict_from_dict
from kbv.workers import ReferenceProcess


class EvaluationError(RuntimeError):
    """kbv itself failed on a job (the reference worker died or raised): not a candidate verdict."""


def job_timeout_s(config: EvalConfig) -> float:
    """Upper bound of one job's wall time (s): every worker deadline of the pipeline, plus slack."""
    calls = config.nominal_seeds + len(config.hidden) + 4
    return (config.compile_timeout_s + calls * config.call_timeout_s
            + config.timing_rounds * config.timing_timeout_s + 300.0)


class Evaluator:
    """Verifies (problem, candidate) pairs on one device. Use as a context manager."""

    def __init__(self, device: str):
        self.device = device
        self._ref: ReferenceProcess | None = None

    def _worker(self) -> ReferenceProcess:
        if self._ref is None or not self._ref.proc.is_alive():
            if self._ref is not None:
                self._ref.close()
            self._ref = ReferenceProcess(self.device)
        return self._ref

    def evaluate(self, problem: ProblemRef, candidate: CandidateRef, config: EvalConfig) -> Verdict:
        """Run the full verification of ``candidate`` against ``problem``.

        Raises:
            ProblemError: the problem file is broken (import, constructor, inputs, reference forward).
            EvaluationError: the reference worker failed; it is restarted for the next job.
        """
        if config.device != self.device:
            raise ValueError(f"evaluator is for {self.device}, config asks for {config.device}")
        job = {"problem": dataclasses.asdict(problem), "candidate": dataclasses.asdict(candidate),
               "config": to_dict(config)}
        reply = self._worker().evaluate(job, job_timeout_s(config))
        if reply.problem_error:
            raise ProblemError(problem.path, reply.problem_error.split(": ", 1)[-1])
        if reply.error or reply.verdict is None:
            if self._ref is not None:
                self._ref.close()
                self._ref = None
            raise EvaluationError(reply.error or "reference worker sent no verdict")
        return verdict_from_dict(reply.verdict)

    def close(self) -> None:
        if self._ref is not None:
            self._ref.close()
            self._ref = None

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
