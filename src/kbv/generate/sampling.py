"""``kbv generate``: N samples per problem from one model, in KernelBench's run layout.

For every selected problem and sample index ``S`` the run folder gets

* ``level_<L>_problem_<P>_sample_<S>_kernel.py`` — the extracted ``ModelNew`` module (what
  ``kbv run`` reads); absent when the answer held no usable code block;
* ``level_<L>_problem_<P>_sample_<S>_meta.json`` — model, parameters, prompt hash, tokens in and
  out, latency, cost when known, whether the cache answered, the raw response and, for a failed
  sample, ``error`` (one line).

This module only reads problem files as text (and parses them with ``ast`` for input-blind
prompts) and writes files: generated code is never imported or run here.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kbv.generate.cache import ResponseCache
from kbv.generate.extract import ExtractionError, extract_model_new
from kbv.generate.prompts import SYSTEM_PROMPT, PromptOptions, initial_messages
from kbv.generate.providers import ChatRequest, Completion, Pricing, ProviderError, make_client
from kbv.model.records import ProblemRef


@dataclass(frozen=True)
class GenerationSettings:
    """Everything but the problem and the sample index that shapes a request."""

    provider: str
    model: str
    base_url: str | None = None
    temperature: float | None = None  #: None: the provider's default.
    max_tokens: int = 8192
    stream: bool = False
    prompt: PromptOptions = field(default_factory=PromptOptions)
    pricing: Pricing = field(default_factory=Pricing)
    max_retries: int = 5
    timeout_s: float = 600.0

    def request(self, messages, sample: int) -> ChatRequest:
        return ChatRequest(provider=self.provider, model=self.model, system=SYSTEM_PROMPT,
                           messages=tuple(messages), temperature=self.temperature,
                           max_tokens=self.max_tokens, base_url=self.base_url, stream=self.stream,
                           sample=sample)


@dataclass(frozen=True)
class SampleResult:
    """One sample's outcome (also written as its ``_meta.json``)."""

    level: int
    problem_id: int
    sample_id: int
    kernel_path: str | None  #: None when no code block could be extracted or the call failed.
    meta_path: str
    error: str | None = None
    cached: bool = False


def sample_stem(level: int, problem_id: int, sample_id: int) -> str:
    return f"level_{level}_problem_{problem_id}_sample_{sample_id}"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace`` (no torn files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def completion_meta(settings: GenerationSettings, req: ChatRequest, done: Completion | None) -> dict[str, Any]:
    """The per-sample metadata record (JSON-ready)."""
    meta: dict[str, Any] = {
        "provider": settings.provider, "model": settings.model, "base_url": settings.base_url,
        "parameters": {"temperature": settings.temperature, "max_tokens": settings.max_tokens,
                       "stream": settings.stream, **asdict(settings.prompt)},
        "prompt_hash": req.prompt_hash(), "request_key": req.key(),
    }
    if done is not None:
        meta.update(response_model=done.model, tokens_in=done.tokens_in, tokens_out=done.tokens_out,
                    latency_s=done.latency_s, cost_usd=done.cost_usd, finish_reason=done.finish_reason,
                    cached=done.cached, text=done.text, raw=done.raw)
    return meta


def generate_one(problem: ProblemRef, sample_id: int, settings: GenerationSettings, out_dir: Path,
                 cache: ResponseCache, client: Any) -> SampleResult:
    """Ask for one sample and write its files. Never raises for a provider or extraction failure:
    those become the sample's ``error``."""
    stem = sample_stem(problem.level or 0, problem.problem_id or 0, sample_id)
    kernel = out_dir / f"{stem}_kernel.py"
    meta_path = out_dir / f"{stem}_meta.json"
    source = Path(problem.path).read_text(encoding="utf-8")
    req = settings.request(initial_messages(source, settings.prompt), sample_id)
    done, error = None, None
    try:
        done = cache.complete(req, client=client, pricing=settings.pricing, max_retries=settings.max_retries,
                              timeout_s=settings.timeout_s)
        code = extract_model_new(done.text)
    except (ProviderError, ExtractionError) as exc:
        error = f"{type(exc).__name__}: {exc}"
        code = None
    meta = completion_meta(settings, req, done)
    meta.update(level=problem.level, problem_id=problem.problem_id, problem=problem.path,
                problem_sha256=problem.sha256, sample_id=sample_id, error=error,
                kernel=kernel.name if code is not None else None)
    if code is not None:
        write_atomic(kernel, code)
    else:
        kernel.unlink(missing_ok=True)  # a stale kernel from an earlier run must not be verified
    write_atomic(meta_path, json.dumps(meta, indent=2) + "\n")
    return SampleResult(problem.level or 0, problem.problem_id or 0, sample_id,
                        str(kernel) if code is not None else None, str(meta_path), error,
                        bool(done and done.cached))


def generate(problems: Sequence[ProblemRef], settings: GenerationSettings, out_dir: Path | str, *,
             samples: int = 1, concurrency: int = 4, cache: ResponseCache | None = None,
             console: Console | None = None) -> list[SampleResult]:
    """``samples`` samples of every problem into ``out_dir``, ``concurrency`` calls at a time, with
    a progress bar on ``console``. Results are sorted by (level, problem, sample).

    Raises:
        ProviderError: the provider cannot be used at all (SDK missing, no key).
        ValueError: a problem file has no level or id (``levelN/<id>_<Name>.py`` is needed for the
            run layout's file names).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for p in problems:
        if p.level is None or p.problem_id is None:
            raise ValueError(f"{p.path}: needs a levelN folder and an <id>_ prefix for the run layout")
    cache = cache if cache is not None else ResponseCache(None)
    client = make_client(settings.provider, settings.base_url, max_retries=settings.max_retries,
                         timeout_s=settings.timeout_s)
    jobs = [(p, s) for p in problems for s in range(samples)]
    results: list[SampleResult] = []
    lock = threading.Lock()
    progress = Progress(TextColumn("[bold]generate[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[failed]} failed"), TimeElapsedColumn(),
                        console=console or Console(stderr=True), transient=False)
    with progress, ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        task = progress.add_task(settings.model, total=len(jobs), failed=0)
        futures = [pool.submit(generate_one, p, s, settings, out, cache, client) for p, s in jobs]
        for fut in as_completed(futures):
            res = fut.result()
            with lock:
                results.append(res)
                failed = sum(1 for r in results if r.error)
            progress.update(task, advance=1, failed=failed)
    return sorted(results, key=lambda r: (r.level, r.problem_id, r.sample_id))


__all__ = ["GenerationSettings", "SampleResult", "generate", "generate_one", "sample_stem", "completion_meta",
           "write_atomic"]
