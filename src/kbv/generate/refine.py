"""``kbv refine``: K turns of generate → verify → feedback → regenerate, and the reward API.

One refinement of (problem, sample) keeps the conversation: turn ``k`` sends the task, every
earlier answer and kbv's feedback on it (:func:`kbv.generate.feedback.feedback_text`, which holds
no hidden input value, seed or reference output). Every turn is stored under
``<out>/refine/<stem>/``:

* ``turn_<k>.py`` — the extracted candidate (absent when the answer had no code block),
* ``turn_<k>.json`` — request metadata (:func:`kbv.generate.sampling.completion_meta`), the verdict
  record, the reward and the feedback sent on,

and ``<out>/refine/<stem>/refine.json`` sums up the turns and names the best one (highest
reward, then the verdict's own score when answers of the wrong backend tie at 0, then the earliest). The best turn's kernel is copied to ``<out>/<stem>_kernel.py``, so
``kbv run`` verifies the refined sample like any other.

Candidate code runs only inside :class:`kbv.batch.evaluator.Evaluator`'s sandboxed workers.

From Python (e.g. as an RL reward)::

    with Evaluator("cuda") as ev:
        r = score_candidate(problem_ref, source_text, config, ev)   # -> Reward
        r.score, r.feedback

``Reward.score`` is defined in :mod:`kbv.generate.feedback`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from kbv.generate.cache import ResponseCache
from kbv.generate.extract import ExtractionError, extract_model_new
from kbv.generate.feedback import Reward, no_code_reward, reward
from kbv.generate.prompts import initial_messages, refine_messages
from kbv.generate.providers import ProviderError, make_client
from kbv.generate.sampling import GenerationSettings, completion_meta, sample_stem, write_atomic
from kbv.model.records import EvalConfig, ProblemRef, Verdict, to_dict


def score_candidate(problem: ProblemRef, source: str, config: EvalConfig, evaluator: Any, *,
                    input_blind: bool = False, path: Path | str | None = None,
                    backend: str | None = None) -> tuple[Reward, Verdict | None]:
    """Verify candidate ``source`` (a ``ModelNew`` module's text) and return its reward and verdict.
    ``backend``: the backend the prompt asked for (``cuda``, ``triton``, ``cpp``); an answer of
    another backend scores at most 0 and its feedback says so (:func:`kbv.generate.feedback.reward`).

    The source is written to ``path`` (a temporary file when None, removed afterwards) and verified
    by ``evaluator`` (:class:`kbv.batch.evaluator.Evaluator`); a file refused by static vetting gets
    the same ``COMPILE_ERROR`` verdict ``kbv run`` gives it.

    Raises:
        kbv.intake.problems.ProblemError: the problem file is broken.
        kbv.batch.evaluator.EvaluationError: kbv itself failed (the reward would say nothing).
    """
    from kbv.intake.candidates import CandidateError, load_candidate
    from kbv.batch.evaluator import rejected_candidate, rejection_verdict

    tmp = None
    if path is None:
        tmp = tempfile.mkdtemp(prefix="kbv-score-")
        path = Path(tmp) / "candidate.py"
    path = Path(path)
    try:
        write_atomic(path, source)
        try:
            cref = load_candidate(path)
        except CandidateError as exc:
            # the file is kbv's copy of the source given: the message names it as the sender knows it
            why = str(exc).replace(str(path), path.name)
            verdict = rejection_verdict(problem, rejected_candidate(path, run=None, sample_id=None), config, why)
        else:
            verdict = evaluator.evaluate(problem, cref, config)
        return reward(verdict, input_blind=input_blind, backend=backend), verdict
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


@dataclass(frozen=True)
class Turn:
    """One refinement turn."""

    turn: int  #: 1-based.
    kernel_path: str | None
    record_path: str
    status: str  #: verdict status, ``NO_CODE``, or ``PROVIDER_ERROR``.
    score: float
    speedup: float | None
    feedback: str
    status_score: float | None = None  #: the verdict's score before the backend rule (ties between turns).
    wrong_backend: bool = False  #: the answer is not in the backend the prompt asked for.
    error: str | None = None  #: the provider's failure (``PROVIDER_ERROR``), one line.


@dataclass(frozen=True)
class RefineResult:
    problem: str
    sample_id: int
    turns: tuple[Turn, ...]
    best_turn: int | None  #: 1-based; None when no turn produced code.
    best_kernel: str | None  #: ``<out>/<stem>_kernel.py`` (a copy of the best turn's file).

    @property
    def best(self) -> Turn | None:
        return self.turns[self.best_turn - 1] if self.best_turn else None


def refine_one(problem: ProblemRef, settings: GenerationSettings, config: EvalConfig, evaluator: Any,
               out_dir: Path | str, *, turns: int = 2, sample_id: int = 0, cache: ResponseCache | None = None,
               client: Any = None, on_turn: Callable[[Turn], None] | None = None) -> RefineResult:
    """Refine one sample of ``problem`` for ``turns`` turns (module docstring: files written).

    A provider failure ends the refinement early (recorded as a ``PROVIDER_ERROR`` turn).

    Raises:
        ValueError: ``turns`` < 1, or the problem has no level / id.
        kbv.intake.problems.ProblemError, kbv.batch.evaluator.EvaluationError: as :func:`score_candidate`.
    """
    if turns < 1:
        raise ValueError("turns must be >= 1")
    if problem.level is None or problem.problem_id is None:
        raise ValueError(f"{problem.path}: needs a levelN folder and an <id>_ prefix for the run layout")
    out = Path(out_dir)
    stem = sample_stem(problem.level, problem.problem_id, sample_id)
    tdir = out / "refine" / stem
    tdir.mkdir(parents=True, exist_ok=True)
    cache = cache if cache is not None else ResponseCache(None)
    client = client if client is not None else make_client(settings.provider, settings.base_url,
                                                           max_retries=settings.max_retries,
                                                           timeout_s=settings.timeout_s)
    blind = settings.prompt.input_blind
    messages = initial_messages(Path(problem.path).read_text(encoding="utf-8"), settings.prompt)
    done_turns: list[Turn] = []
    for k in range(1, turns + 1):
        # the sample index keeps distinct samples distinct; the turn's history makes each turn's prompt unique
        req = settings.request(messages, sample_id)
        record: dict[str, Any] = {"turn": k, "problem": problem.path, "sample_id": sample_id}
        kernel = tdir / f"turn_{k}.py"
        try:
            done = cache.complete(req, client=client, pricing=settings.pricing,
                                  max_retries=settings.max_retries, timeout_s=settings.timeout_s)
        except ProviderError as exc:
            record.update(completion_meta(settings, req, None), error=str(exc))
            path = tdir / f"turn_{k}.json"
            write_atomic(path, json.dumps(record, indent=2) + "\n")
            done_turns.append(Turn(k, None, str(path), "PROVIDER_ERROR", 0.0, None, "", error=str(exc)))
            if on_turn is not None:
                on_turn(done_turns[-1])
            break
        record.update(completion_meta(settings, req, done))
        verdict = None
        try:
            code = extract_model_new(done.text)
        except ExtractionError as exc:
            r = no_code_reward(str(exc))
            kernel.unlink(missing_ok=True)
        else:
            r, verdict = score_candidate(problem, code, config, evaluator, input_blind=blind, path=kernel,
                                         backend=settings.prompt.backend)
        record.update(reward=asdict(r), verdict=to_dict(verdict) if verdict is not None else None)
        path = tdir / f"turn_{k}.json"
        write_atomic(path, json.dumps(record, indent=2, allow_nan=False, default=str) + "\n")
        turn = Turn(k, str(kernel) if verdict is not None else None, str(path), r.status, r.score, r.speedup,
                    r.feedback, r.status_score, r.wrong_backend)
        done_turns.append(turn)
        if on_turn is not None:
            on_turn(turn)
        if k < turns:
            messages = refine_messages(messages, done.text, r.feedback)
    coded = [t for t in done_turns if t.kernel_path]
    best = max(coded, key=lambda t: (t.score, t.status_score or 0.0, -t.turn)) if coded else None
    best_kernel = None
    if best is not None:
        best_kernel = out / f"{stem}_kernel.py"
        shutil.copyfile(best.kernel_path, best_kernel)
    result = RefineResult(problem.path, sample_id, tuple(done_turns), best.turn if best else None,
                          str(best_kernel) if best_kernel else None)
    summary = {"problem": problem.path, "sample_id": sample_id, "best_turn": result.best_turn,
               "best_kernel": result.best_kernel, "provider": settings.provider, "model": settings.model,
               "turns": [asdict(t) for t in done_turns]}
    write_atomic(tdir / "refine.json", json.dumps(summary, indent=2) + "\n")
    return result
