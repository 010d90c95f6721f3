"""The typer commands ``kbv generate``, ``kbv refine``, ``kbv audit`` and ``kbv dataset``.

Plain functions; :mod:`kbv.cli.main` registers them with ``app.command(...)``. Exit codes as for every
kbv command: 0 the command ran (whatever the samples' or verdicts' outcomes), 2 bad usage or a bad
file, 3 kbv itself failed. Heavy modules (SDKs, torch) are imported inside the commands.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from kbv.cli import common as cli


class ProviderOpt(str, Enum):
    openai = "openai"
    anthropic = "anthropic"


class BackendOpt(str, Enum):
    cuda = "cuda"
    triton = "triton"
    cpp = "cpp"


class GenPrecision(str, Enum):
    fp32 = "fp32"
    bf16 = "bf16"


def _numbers(values: Optional[List[str]], option: str) -> frozenset[int] | None:
    """``["1,2", "5-8"]`` → {1, 2, 5, 6, 7, 8} with :func:`kbv.batch.runner.parse_ids` (``kbv run``'s syntax)."""
    from kbv.batch.runner import parse_ids

    if not values:
        return None
    try:
        return parse_ids(",".join(values))
    except ValueError as exc:
        cli.fail(f"{option} {','.join(values)}: {exc}")


def _problems(problems: Path, level: Optional[List[str]], problem_ids: Optional[List[str]]):
    """Statically vetted, selected problem files (same filters and syntax as ``kbv run``)."""
    from kbv.batch.runner import Selection
    from kbv.intake.layout import LayoutError, vet_problems

    selection = Selection(levels=_numbers(level, "--level"), problem_ids=_numbers(problem_ids, "--problem-ids"))
    try:
        scan = vet_problems(problems)
    except LayoutError as exc:
        cli.fail(str(exc))
    for exc in scan.errors:
        cli.err_console.print(f"kbv: skipping broken problem file: {exc}", highlight=False, markup=False, soft_wrap=True)
    refs = [p for p in scan.problems if selection.problem(p.level, p.problem_id)]
    if not refs:
        cli.fail(f"{problems}: no problem selected")
    return refs


def _settings(provider, model, base_url, temperature, max_tokens, backend, precision, input_blind, stream,
              price_in, price_out, max_retries):
    from kbv.generate.prompts import PromptOptions
    from kbv.generate.providers import Pricing
    from kbv.generate.sampling import GenerationSettings

    return GenerationSettings(provider=provider.value, model=model, base_url=base_url, temperature=temperature,
                              max_tokens=max_tokens, stream=stream,
                              prompt=PromptOptions(backend.value, precision.value, input_blind),
                              pricing=Pricing(price_in, price_out), max_retries=max_retries)


def _cache(cache_dir: Optional[Path], no_cache: bool):
    from kbv.generate.cache import ResponseCache, default_root

    return ResponseCache(None if no_cache else (cache_dir or default_root()))


_PROVIDER = typer.Option(..., "--provider", help="openai (also any OpenAI-compatible server with --base-url) or anthropic.")
_MODEL = typer.Option(..., "--model", help="Model name as the provider knows it.")
_BASE_URL = typer.Option(None, "--base-url", help="Server URL (vLLM, SGLang, a gateway: e.g. http://host:8000/v1).")
_TEMP = typer.Option(None, "--temperature", help="Sampling temperature (default: the provider's).")
_MAXTOK = typer.Option(8192, "--max-tokens", min=1, help="Most tokens per answer.")
_BACKEND = typer.Option(BackendOpt.cuda, "--backend", help="Kernel language asked for: cuda, triton or cpp (CPU).")
_PREC = typer.Option(GenPrecision.fp32, "--precision", help="Precision the kernel is asked for and verified at.")
_BLIND = typer.Option(False, "--input-blind", help="Withhold get_inputs()/get_init_inputs() bodies and the size constants.")
_STREAM = typer.Option(False, "--stream/--no-stream", help="Stream answers (SSE).")
_LEVEL = typer.Option(None, "--level", metavar="1,2", help="Only these levels, e.g. 1,2 or 1-3 (comma-separated or repeated).")
_IDS = typer.Option(None, "--problem-ids", metavar="1,2,5-8", help="Only these problem ids, e.g. 1,2,5-8 (comma-separated or repeated).")
_CACHE = typer.Option(None, "--cache-dir", help="Response cache folder (default $KBV_CACHE_DIR/llm).")
_NOCACHE = typer.Option(False, "--no-cache", help="Neither read nor write the response cache.")
_PIN = typer.Option(None, "--price-in", help="USD per million input tokens (for the cost figure).")
_POUT = typer.Option(None, "--price-out", help="USD per million output tokens.")
_RETRIES = typer.Option(5, "--max-retries", min=0, help="SDK retries (backoff) on connection errors, 429 and 5xx.")


def generate_cmd(
    problems: Path = typer.Argument(..., help="Problem files: a KernelBench checkout, a levelN folder or any folder of levelN/ID_Name.py."),
    provider: ProviderOpt = _PROVIDER, model: str = _MODEL, base_url: Optional[str] = _BASE_URL,
    samples: int = typer.Option(1, "--samples", min=1, metavar="N", help="Samples per problem."),
    out: Path = typer.Option(..., "--out", help="Run folder (KernelBench layout: level_L_problem_P_sample_S_kernel.py)."),
    level: Optional[List[str]] = _LEVEL, problem_ids: Optional[List[str]] = _IDS,
    temperature: Optional[float] = _TEMP, max_tokens: int = _MAXTOK, backend: BackendOpt = _BACKEND,
    precision: GenPrecision = _PREC, input_blind: bool = _BLIND, stream: bool = _STREAM,
    concurrency: int = typer.Option(4, "--concurrency", min=1, metavar="N", help="Calls in flight at once."),
    cache_dir: Optional[Path] = _CACHE, no_cache: bool = _NOCACHE,
    price_in: Optional[float] = _PIN, price_out: Optional[float] = _POUT, max_retries: int = _RETRIES,
) -> None:
    """Ask a model for kernels: N samples per problem in KernelBench's run layout, with per-sample
    metadata (tokens, latency, cost, raw answer) beside each file. Keys from OPENAI_API_KEY /
    ANTHROPIC_API_KEY. Generated code is written, never run: verify it with kbv run."""
    from kbv.generate.providers import ProviderError
    from kbv.generate.sampling import generate

    refs = _problems(problems, level, problem_ids)
    settings = _settings(provider, model, base_url, temperature, max_tokens, backend, precision, input_blind,
                         stream, price_in, price_out, max_retries)
    try:
        results = generate(refs, settings, out, samples=samples, concurrency=concurrency,
                           cache=_cache(cache_dir, no_cache), console=cli.console)
    except (ProviderError, ValueError) as exc:
        cli.fail(str(exc))
    failed = [r for r in results if r.error]
    cached = sum(1 for r in results if r.cached)
    cli.console.print(f"{len(results) - len(failed)}/{len(results)} sample(s) written to {out} "
                      f"({cached} from the cache)", highlight=False)
    for r in failed:
        cli.err_console.print(f"kbv: level {r.level} problem {r.problem_id} sample {r.sample_id}: {r.error}",
                              highlight=False, markup=False, soft_wrap=True)


def refine_cmd(
    problems: Path = typer.Argument(..., help="Problem files (as for kbv run)."),
    provider: ProviderOpt = _PROVIDER, model: str = _MODEL, base_url: Optional[str] = _BASE_URL,
    out: Path = typer.Option(..., "--out", help="Run folder: best kernels in KernelBench layout, every turn under refine/."),
    turns: int = typer.Option(3, "--turns", min=1, metavar="N", help="Turns of generate -> verify -> feedback."),
    samples: int = typer.Option(1, "--samples", min=1, metavar="N", help="Independent refinements per problem."),
    level: Optional[List[str]] = _LEVEL, problem_ids: Optional[List[str]] = _IDS,
    temperature: Optional[float] = _TEMP, max_tokens: int = _MAXTOK,
    backend: Optional[BackendOpt] = typer.Option(None, "--backend", help="Kernel language asked for: cuda, triton "
                                                 "or cpp (default: cpp when verifying on cpu, else cuda)."),
    precision: GenPrecision = _PREC, input_blind: bool = _BLIND, stream: bool = _STREAM,
    device: str = typer.Option("auto", "--device", help="Where to verify: cpu, cuda or auto."),
    seeds: int = typer.Option(3, min=1, metavar="N", help="Nominal input sets per verification."),
    trials: int = typer.Option(30, min=1, metavar="N", help="Timed calls per subject."),
    warmup: int = typer.Option(5, min=0, metavar="N", help="Untimed calls before each timing round."),
    timeout: Optional[float] = typer.Option(None, min=1.0, metavar="S", help="Seconds allowed per forward call (default 120)."),
    cache_dir: Optional[Path] = _CACHE, no_cache: bool = _NOCACHE,
    price_in: Optional[float] = _PIN, price_out: Optional[float] = _POUT, max_retries: int = _RETRIES,
) -> None:
    """Refine kernels over K turns: each answer is verified (sandboxed, as kbv eval) and the verdict
    turned into feedback that holds no hidden input, seed or reference output; every turn is kept
    and the best one becomes the run's sample. A provider's failure (a wrong URL, key or model) is
    said on stderr and makes the exit code 1."""
    from kbv.generate.providers import ProviderError
    from kbv.generate.refine import refine_one
    from kbv.batch.evaluator import EvaluationError, Evaluator
    from kbv.intake.problems import ProblemError

    if device not in ("auto", "cpu", "cuda"):
        cli.fail(f"--device {device}: use cpu, cuda or auto")
    refs = _problems(problems, level, problem_ids)
    dev = cli.resolve_device(cli.Device(device))
    backend = backend or (BackendOpt.cpp if dev == "cpu" else BackendOpt.cuda)  # what the device can run
    settings = _settings(provider, model, base_url, temperature, max_tokens, backend, precision, input_blind,
                         stream, price_in, price_out, max_retries)
    config = cli.make_config(dev, precision.value, seeds, trials, warmup, timeout)
    cache = _cache(cache_dir, no_cache)
    code = 0
    with Evaluator(dev) as ev:
        for p in refs:
            for s in range(samples):
                def show(t, p=p, s=s):
                    nonlocal code
                    if t.error is not None:  # a wrong URL, key or model must not read as a model that wrote nothing
                        cli.err_console.print(f"kbv: level {p.level} problem {p.problem_id} sample {s} turn {t.turn}: "
                                              f"provider error: {t.error}", highlight=False, markup=False,
                                              soft_wrap=True)
                        code = max(code, 1)
                        return
                    sp = f", {t.speedup:.3g}x" if t.speedup else ""
                    wrong = f", not the {backend.value} backend asked for" if t.wrong_backend else ""
                    cli.console.print(f"level {p.level} problem {p.problem_id} sample {s} turn {t.turn}: "
                                      f"{t.status} (reward {t.score:.3g}{sp}{wrong})", highlight=False)
                try:
                    with cli.console.status(f"refining {Path(p.path).name} sample {s}..."):
                        res = refine_one(p, settings, config, ev, out, turns=turns, sample_id=s, cache=cache,
                                         on_turn=show)
                except ProviderError as exc:
                    cli.fail(str(exc))
                except ProblemError as exc:
                    cli.err_console.print(f"kbv: broken problem file: {exc}", highlight=False, markup=False)
                    continue
                except EvaluationError as exc:
                    cli.err_console.print(f"kbv: internal error on {p.path}: {exc}", highlight=False, markup=False)
                    code = 3
                    continue
                best = res.best
                cli.console.print(f"  best: turn {res.best_turn} {best.status} -> {res.best_kernel}" if best else
                                  "  no turn produced code", highlight=False)
    raise typer.Exit(code)


def audit_cmd(
    store: Path = typer.Option(..., "--store", help="Store written by kbv run."),
    judge: List[str] = typer.Option(..., "--judge", help="provider:model[@base_url]; give two (or more)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Server of every --judge given without @base_url "
                                           "(vLLM, SGLang, a gateway: e.g. http://host:8000/v1)."),
    min_speedup: float = typer.Option(1.0, "--min-speedup", help="Audit PASS kernels at least this fast."),
    baseline: str = typer.Option("eager-tf32", "--baseline", help="Baseline the threshold applies to."),
    out: Optional[Path] = typer.Option(None, "--out", help="Also write audit.csv and audit.json here."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, metavar="N", help="Judge calls in flight at once."),
    cache_dir: Optional[Path] = _CACHE, no_cache: bool = _NOCACHE,
) -> None:
    """LLM judges classify the fast PASS kernels (genuine, algebraic_rewrite, shape_specialised,
    degenerate_problem, exploit). Labels go to the store's audits table; verdicts are never changed;
    disagreements are flagged for a person."""
    import csv

    from rich.table import Table

    from kbv.generate.audit import JudgeSpec, run_audit
    from kbv.generate.audit_store import agreement, audit_rows
    from kbv.generate.providers import ProviderError

    try:
        specs = [JudgeSpec.parse(j, base_url) for j in judge]
        outcome = run_audit(store, specs, min_speedup=min_speedup, baseline=baseline,
                            cache=_cache(cache_dir, no_cache), concurrency=concurrency)
    except (ValueError, FileNotFoundError, ProviderError) as exc:
        cli.fail(str(exc))
    for line in outcome.skipped:
        cli.err_console.print(f"kbv: not judged: {line}", highlight=False, markup=False, soft_wrap=True)
    rows = audit_rows(store)
    names = [s.name for s in specs]
    table = Table(title=f"Audit of {outcome.kernels} PASS kernel(s) >= {min_speedup:g}x vs {baseline}",
                  title_justify="left")
    for col in ("problem", "run", "sample", "speedup", *names, "result"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.problem_key, r.run, str(r.sample_id), "-" if r.speedup is None else f"{r.speedup:.3g}",
                      *[r.labels.get(n, "-") for n in names], r.consensus or "[yellow]needs review[/]")
    cli.console.print(table)
    agree = agreement(rows, (names[0], names[1]))
    rate = "-" if agree.rate is None else f"{100 * agree.rate:.0f}%"
    kappa = "-" if agree.kappa is None else f"{agree.kappa:.2f}"
    flagged = sum(1 for r in rows if r.needs_review)
    unparsed = (f"; {agree.unparseable} kernel(s) with an answer that had no rubric label, not counted as "
                "agreement" if agree.unparseable else "")
    cli.console.print(f"agreement {names[0]} vs {names[1]}: {agree.agreed}/{agree.jobs} ({rate}), Cohen's kappa "
                      f"{kappa}{unparsed}; {flagged} kernel(s) flagged for review", highlight=False)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "audit.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["problem", "run", "sample", "speedup", *names, "consensus", "needs_review"])
            for r in rows:
                w.writerow([r.problem_key, r.run, r.sample_id, r.speedup, *[r.labels.get(n, "") for n in names],
                            r.consensus or "", int(r.needs_review)])
        (out / "audit.json").write_text(json.dumps(
            {"agreement": {"judges": names[:2], "jobs": agree.jobs, "agreed": agree.agreed, "kappa": agree.kappa,
                           "unparseable": agree.unparseable},
             "rows": [{"job_key": r.job_key, "problem": r.problem_key, "run": r.run, "sample_id": r.sample_id,
                       "speedup": r.speedup, "labels": r.labels, "rationales": r.rationales,
                       "consensus": r.consensus, "needs_review": r.needs_review} for r in rows]}, indent=2) + "\n")
        cli.console.print(f"audit written to {out / 'audit.csv'} and {out / 'audit.json'}", highlight=False)


def dataset_cmd(
    out: Path = typer.Option(..., "--out", help="Folder to write level<L>/<id>_<Name>.py into."),
    repo: str = typer.Option("ScalingIntelligence/KernelBench", "--repo", help="Hugging Face dataset repository."),
    revision: Optional[str] = typer.Option(None, "--revision", help="Dataset revision (branch, tag or commit)."),
    level: Optional[List[str]] = _LEVEL, problem_ids: Optional[List[str]] = _IDS,
    from_parquet: Optional[List[Path]] = typer.Option(None, "--from-parquet", help="Read these local parquet files instead of the Hub."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace problem files that differ from the dataset."),
) -> None:
    """Fetch the KernelBench problems from the Hugging Face Hub (or local parquet files of its
    schema: code, level, name, problem_id) into the level folders kbv reads."""
    from kbv.generate.dataset import DatasetError, download, read_rows, write_problems

    ids, levels = _numbers(problem_ids, "--problem-ids"), _numbers(level, "--level")
    try:
        files = list(from_parquet) if from_parquet else download(repo, revision=revision, levels=levels)
        written = write_problems(read_rows(files), out, levels=levels, problem_ids=ids, overwrite=overwrite)
    except ImportError as exc:
        cli.fail(f"{exc}; pip install 'kbv[llm]'")
    except (DatasetError, OSError) as exc:
        cli.fail(str(exc))
    except Exception as exc:  # huggingface_hub's errors (offline, repository not found) and pyarrow's
        cli.fail(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    by_level: dict[int, int] = {}
    for w in written:
        by_level[w.level] = by_level.get(w.level, 0) + 1
    cli.console.print(f"{len(written)} problem file(s) in {out}: "
                      + (", ".join(f"level{lv} {n}" for lv, n in sorted(by_level.items())) or "none"),
                      highlight=False)
