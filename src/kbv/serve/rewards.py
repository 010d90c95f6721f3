"""Reward functions for RL trainers, backed by a ``kbv serve`` server: one with TRL's
``reward_funcs`` signature (:class:`TRLReward`), one with verl's ``compute_score`` signature
(:func:`make_verl_compute_score`, and the module-level :func:`compute_score` that verl's
``custom_reward_function.path`` can name).

Each takes the model's completion, extracts the last ``ModelNew`` code block
(:func:`kbv.generate.extract.extract_model_new`, as ``kbv generate`` does) and asks the server.
The reward is the one :func:`kbv.generate.refine.score_candidate` documents
(:mod:`kbv.generate.feedback`: PASS ``1 + 0.5 * clip(log2 speedup, -1, 3)``, SHORTCUT 0.3,
INCORRECT 0.1, build/run failures 0, HACK -1), computed by the server; an answer without a code
block scores 0 without a request (:func:`kbv.generate.feedback.no_code_reward`'s score). A job
that ends in ``error`` (the problem broke) or an EVAL_ERROR (kbv failed) scores ``invalid`` (0.0
by default; None drops the sample where the trainer allows it, as recent TRL does). Nothing here
imports torch.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Sequence

from kbv.generate.extract import ExtractionError, extract_model_new
from kbv.serve.client import Client, Result, VerifyTimeout, job

#: the score of an answer without a ``ModelNew`` code block (``kbv.generate.feedback.no_code_reward``).
NO_CODE_SCORE = 0.0


def completion_text(completion: Any) -> str:
    """The text of a completion: a string, or TRL's conversational form (a list of messages,
    the last one's ``content``)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        return str(completion[-1].get("content", ""))
    return str(completion)


def _score(r: Result, invalid: float | None) -> float | None:
    if r.state != "done" or r.reward is None or not r.reward.get("valid", True):
        return invalid
    return float(r.reward["score"])


class TRLReward:
    """A TRL reward function (``GRPOTrainer(reward_funcs=[TRLReward(client)])``): called as
    ``reward(prompts=..., completions=..., problem=[...], **columns)``, it returns one float per
    completion.

    Args:
        client: a :class:`kbv.serve.client.Client`.
        problem_column: the dataset column holding each row's problem address (``level1/19_ReLU``
            or ``sha256:<hex>``); TRL passes dataset columns as keyword lists.
        config: config overrides sent with every job (the server's defaults otherwise).
        backend: the backend the prompt asks for (``cuda``, ``triton``, ``cpp``; None: any).
        timeout: seconds to wait for each result.
        invalid: the score of a result that says nothing about the model (kbv failed).
    """

    def __init__(self, client: Client, *, problem_column: str = "problem", config: Mapping[str, Any] | None = None,
                 backend: str | None = None, timeout: float | None = 3600.0, invalid: float | None = 0.0):
        self.client, self.problem_column, self.config = client, problem_column, dict(config or {})
        self.backend, self.timeout, self.invalid = backend, timeout, invalid
        self.__name__ = "kbv_reward"  # TRL logs each reward function under its __name__

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (),
                 **columns: Any) -> list[float | None]:
        problems = columns.get(self.problem_column)
        if problems is None or len(problems) != len(completions):
            raise ValueError(f"TRLReward needs the dataset column {self.problem_column!r} with one problem per "
                             "completion")
        scores: list[float | None] = [NO_CODE_SCORE] * len(completions)
        items, where = [], []
        for i, (problem, completion) in enumerate(zip(problems, completions)):
            try:
                code = extract_model_new(completion_text(completion))
            except ExtractionError:
                continue
            items.append(job(str(problem), code, self.config, self.backend))
            where.append(i)
        if items:
            ids = self.client.submit_many(items)
            for i, jid in zip(where, ids):
                scores[i] = _score(self.client.wait(jid, self.timeout), self.invalid)
        return scores


def make_verl_compute_score(client: Client, *, config: Mapping[str, Any] | None = None, backend: str | None = None,
                            timeout: float | None = 3600.0,
                            invalid: float = 0.0) -> Callable[..., float]:
    """A verl ``compute_score(data_source, solution_str, ground_truth, extra_info=None)``: the
    ``ground_truth`` is the problem's address; returns the scalar reward."""

    def compute_score(data_source: Any, solution_str: str, ground_truth: str, extra_info: Any = None) -> float:
        try:
            code = extract_model_new(completion_text(solution_str))
        except ExtractionError:
            return NO_CODE_SCORE
        try:
            r = client.verify(str(ground_truth), code, config, backend=backend, timeout=timeout)
        except VerifyTimeout as exc:  # not finished in time: the invalid score, as a failed job's
            r = exc.result
        score = _score(r, invalid)
        return invalid if score is None else score

    return compute_score


_default: Callable[..., float] | None = None


def compute_score(data_source: Any, solution_str: str, ground_truth: str, extra_info: Any = None) -> float:
    """verl's ``compute_score`` on the server at ``$KBV_SERVE_URL`` (default
    ``http://127.0.0.1:8000``) with the token in ``$KBV_SERVE_TOKEN`` (if any): name this module's
    file and ``compute_score`` in verl's ``custom_reward_function``."""
    global _default
    if _default is None:
        url = os.environ.get("KBV_SERVE_URL", "http://127.0.0.1:8000")
        _default = make_verl_compute_score(Client(url, os.environ.get("KBV_SERVE_TOKEN") or None))
    return _default(data_source, solution_str, ground_truth, extra_info)


__all__ = ["TRLReward", "make_verl_compute_score", "compute_score", "completion_text", "NO_CODE_SCORE"]
