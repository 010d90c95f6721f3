"""kbv's public Python API: one verification (:func:`verify`) and a batch (:func:`plan`,
:func:`run`, :func:`metrics`), re-exported as ``kbv.verify``, ``kbv.plan``, ``kbv.run``,
``kbv.metrics`` and ``kbv.close``.

:func:`verify` is made to be called many times in one process (an RL loop's reward): it keeps one
reference worker per device alive between calls, owned by a thread of its own (the worker dies
with the thread that started it, ``PR_SET_PDEATHSIG``, so it must not be the caller's, which may
be a short-lived thread of a pool). Calls for one device run one at a time; :func:`close` (also
run at exit) stops the workers. Every candidate still runs in a fresh sandboxed worker per call.

The calls work from a plain script without an ``if __name__ == "__main__":`` guard: kbv's workers
are spawned without re-running the caller's ``__main__`` (:func:`kbv.processes.handles.plain_main`).

Problems and candidates are paths or source text. Source text is written once to
``<kbv cache>/sources/`` (mode 0700, ``$KBV_CACHE_DIR`` or ``~/.cache/kbv``) under a name made of
its SHA-256, so the same text is the same file on every call (Triton and ``inspect`` read the
file; the build cache is keyed by the content hash). Those files are small and never deleted by
kbv; remove the folder whenever no verification runs.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, Union

from kbv.intake.sources import Source, as_path, problem_ref
from kbv.model.config import PROBLEM_FIELDS
from kbv.model.records import CandidateRef, EvalConfig, Status, Verdict

if TYPE_CHECKING:  # heavy modules, imported by the functions that use them
    from kbv.batch.runner import BatchOutcome, BatchPlan, PlannedJob
    from kbv.batch.metrics import BatchMetrics
    from kbv.batch.store import Store

#: an :class:`~kbv.model.records.EvalConfig`, a mapping of its fields (resolved by :func:`make_config`),
#: or None for the defaults on the best device.
ConfigLike = Union[EvalConfig, Mapping[str, Any], None]

def close() -> None:
    """Stop the reference workers :func:`verify` keeps alive (one per device used). The next
    :func:`verify` starts a fresh one. Also run at interpreter exit. A call still running is let
    finish for up to 30 s, then its workers are killed."""
    from kbv.batch.sessions import close as close_sessions

    close_sessions()


__all__ = ["verify", "plan", "run", "metrics", "close", "make_config", "Source", "ConfigLike"]


# Configuration ------------------------------------------------------------------------------------

def default_device() -> str:
    """``"cuda"`` when torch sees a CUDA device, else ``"cpu"`` (imports torch)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


_FIELDS = {f.name for f in dataclasses.fields(EvalConfig)}


def make_config(config: ConfigLike = None) -> EvalConfig:
    """The :class:`~kbv.model.records.EvalConfig` a call runs with.

    ``None`` is the defaults of ``kbv eval`` on :func:`default_device`. A mapping is resolved the
    way ``kbv eval`` resolves its options: ``device`` defaults to :func:`default_device`; ``atol`` and
    ``rtol`` not given default to :meth:`EvalConfig.default_tolerance` of the ``precision``
    (1e-3 fp32, 1e-2 bf16/fp16); ``policy="kbv-compat"`` without ``distributions`` runs no
    randomised distributions (KernelBench-Verified's protocol: nominal + D1–D4); tuple fields
    accept lists. The keys given become ``user_set``: a problem's own ``KBV_METADATA["config"]``
    (tolerance, seeds, secret shapes) applies to the others only. An ``EvalConfig`` is taken as it is.

    Raises:
        TypeError: ``config`` is neither an ``EvalConfig``, a mapping nor None.
        ValueError: a mapping names a field ``EvalConfig`` does not have, a value is out of range
            (``EvalConfig``'s own checks: device, precision, policy, counts), or the config asks for
            ``cuda`` on a machine where torch sees no CUDA device.
    """
    if config is None:
        config = {}
    if isinstance(config, Mapping):
        kw = dict(config)
        given = set(kw)
        unknown = sorted(set(kw) - _FIELDS)
        if unknown:
            raise ValueError(f"EvalConfig has no field(s) {', '.join(map(repr, unknown))}; "
                             f"known fields: {', '.join(sorted(_FIELDS))}")
        kw.setdefault("device", default_device())
        tol = EvalConfig.default_tolerance(kw.get("precision", "fp32"))
        kw.setdefault("atol", tol)
        kw.setdefault("rtol", tol)
        if kw.get("policy") == "kbv-compat":
            kw.setdefault("distributions", ())
            kw.setdefault("secret_shapes", 0)
            given.add("secret_shapes")  # the protocol's: no problem setting turns it on
        if "user_set" not in kw:  # the fields given: a problem's own settings do not change them
            kw["user_set"] = tuple(sorted(n for n in given if n in PROBLEM_FIELDS))
        if isinstance(kw.get("sanitize"), str):  # "memcheck,racecheck", as on the command line
            kw["sanitize"] = tuple(t.strip() for t in kw["sanitize"].split(",") if t.strip())
        for name in ("hidden", "baselines", "distributions", "user_set", "sanitize"):
            if isinstance(kw.get(name), (list, str)):
                kw[name] = (kw[name],) if isinstance(kw[name], str) else tuple(kw[name])
        config = EvalConfig(**kw)
    elif not isinstance(config, EvalConfig):
        raise TypeError(f"config must be a kbv.EvalConfig, a mapping of its fields or None, "
                        f"not {type(config).__name__}")
    if config.device == "cuda" and default_device() != "cuda":
        import torch

        raise ValueError(f"config asks for device 'cuda', but torch {torch.__version__} sees no CUDA "
                         "device here; use EvalConfig(device='cpu')")
    return config


def _candidate(candidate: Source, name: str | None = None) -> tuple[CandidateRef, str | None]:
    """(ref, static fault or None): a candidate that fails static vetting gets its verdict, not an error."""
    if isinstance(candidate, CandidateRef):
        return candidate, None
    from kbv.intake.candidates import CandidateError, load_candidate
    from kbv.batch.evaluator import rejected_candidate

    path = as_path(candidate, "candidate", name)
    try:
        return load_candidate(path), None
    except CandidateError as exc:
        return rejected_candidate(path, run=None, sample_id=None), str(exc)


# One verification ---------------------------------------------------------------------------------

def verify(problem: Source, candidate: Source, config: ConfigLike = None, *,
           hidden_tests: str | os.PathLike[str] | None = None, problem_name: str | None = None,
           candidate_name: str | None = None) -> Verdict:
    """Verify one candidate against one problem, as ``kbv eval`` does: correctness on the nominal
    sets, D1–D4 and kbv's secret randomised distributions, the anti-cheat detectors, timing
    against eager-fp32 and eager-tf32, and peak memory (CUDA).

    Args:
        problem: a KernelBench problem (``Model``, ``get_inputs``, ``get_init_inputs``): a path
            (``str`` without a newline or ``os.PathLike``), its source text (a ``str`` with a
            newline) or a :class:`~kbv.model.records.ProblemRef`.
        candidate: the candidate (``ModelNew``), in the same forms (or a
            :class:`~kbv.model.records.CandidateRef`).
        config: an :class:`~kbv.model.records.EvalConfig`, a mapping of its fields (see
            :func:`make_config`), or None for the defaults on the best device.
        hidden_tests: an optional KernelBench-Verified ``<pid>_hidden.py`` whose
            ``get_hidden_inputs()`` lists are checked as ``HT1``, ``HT2``, ...
        problem_name, candidate_name: for source text, the file stem it is written under and
            shown by (default ``problem`` / ``candidate``); a KernelBench problem name such as
            ``19_ReLU`` also gives the problem its id. Not allowed with a path.

    Returns:
        the :class:`~kbv.model.records.Verdict`. Whatever the candidate does, it gets a verdict: a
        candidate failing static vetting is ``COMPILE_ERROR`` without running, and a failure of
        kbv itself is ``EVAL_ERROR`` (the reference worker is restarted for the next call).
    Raises:
        FileNotFoundError: a problem or candidate path names no file (a ``hidden_tests`` path that
            names none: ``ProblemError``, as its other faults).
        ValueError: a name given with a path, or one that is not a plain file stem.
        kbv.intake.problems.ProblemError: the problem is broken (static vetting, or its import,
            constructor, inputs or reference forward failed in the reference worker), or the hidden
            test file does not parse or defines no ``get_hidden_inputs`` (nothing runs).
        kbv.intake.problems.HiddenTestsError: the hidden test file failed when it ran (raised, gave
            no set, a set the reference cannot run, none judged, edited meanwhile) under a PASS or
            SHORTCUT, whose meaning needs its sets; its ``verdict`` is that verdict (a
            ``ProblemError``: the caller's file, as ``kbv eval`` exits 2 on it). A failing verdict
            (INCORRECT, HACK, ...) is returned whatever the file did: its sets could not raise it.
        TypeError, ValueError: a bad ``config`` (:func:`make_config`) or argument type.
        OSError: source text cannot be written to the kbv cache.
    Thread-safe: calls for one device run one after another in one reference worker.
    """
    config = make_config(config)
    pref = problem_ref(problem, problem_name)
    cref, fault = _candidate(candidate, candidate_name)
    if fault is not None:
        from kbv.batch.evaluator import rejection_verdict

        return rejection_verdict(pref, cref, config, fault)
    ht = str(Path(hidden_tests).expanduser().resolve()) if hidden_tests is not None else None
    from kbv.batch.sessions import session
    from kbv.intake.problems import HiddenTestsError, vet_hidden_test

    if ht is not None:
        vet_hidden_test(ht)  # a file that cannot run stops before anything does
    verdict = session(config.device).call(lambda ev: ev.evaluate(pref, cref, config, hidden_tests=ht))
    error = verdict.evidence.get("hidden_tests_error")
    # never a PASS that reads as checked on the file's sets (newcomer helper); a failing verdict stands
    # (a caller's `except ProblemError` must not drop a HACK: red-team helper)
    if error and verdict.status in (Status.PASS, Status.SHORTCUT):
        fault = error[len(ht) + 2:] if error.startswith(f"{ht}: ") else error
        raise HiddenTestsError(ht, f"hidden tests not checked: {fault}", verdict)
    return verdict


# A batch ------------------------------------------------------------------------------------------

def _ids(values: Iterable[int] | str | None, what: str) -> frozenset[int] | None:
    if values is None:
        return None
    if isinstance(values, str):
        from kbv.batch.runner import parse_ids

        return parse_ids(values)
    try:
        return frozenset(int(v) for v in values)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be integers or a string like '1,2,5-8', not {values!r}") from None


def plan(problems: str | os.PathLike[str], candidates: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
         config: ConfigLike = None, *, layout: str = "auto", levels: Iterable[int] | str | None = None,
         problem_ids: Iterable[int] | str | None = None, runs: Iterable[str] | None = None,
         hidden_tests: str | os.PathLike[str] | None = None) -> "BatchPlan":
    """Plan a batch as ``kbv run`` does, statically (nothing runs): problem files vetted one by
    one (a broken one is collected in ``broken_files``), candidates found by layout
    (``runs/<run>/level_L_problem_P_sample_S_kernel.py`` or ``<run>/<level>/<id>/<sample>.py``),
    paired with their problem and vetted (a fault becomes a COMPILE_ERROR job).

    Args:
        problems: a KernelBench checkout, a ``levelN`` folder or a folder of ``levelN/ID_Name.py``.
        candidates: one candidate folder or several (one run, or a folder of runs, each).
        config: as for :func:`verify`; stored with the batch (one store holds one config).
        layout: ``"auto"``, ``"kernelbench"`` or ``"plain"``.
        levels, problem_ids: only these (integers, or a string like ``"1,2,5-8"``); None for all.
        runs: only these run names (an iterable, or a string like ``"a,b"``); None for all.
        hidden_tests: a KernelBench-Verified ``hidden_tests`` folder (default: looked for beside
            the problems).
    Returns:
        a :class:`kbv.batch.runner.BatchPlan` (``jobs``, ``problems``, ``broken_files``, ``orphans``, ...).
    Raises:
        kbv.intake.layout.LayoutError: a folder fits no layout, or two files claim one identity.
        TypeError, ValueError: a bad ``config``, ``layout`` or selection.
    """
    from kbv.batch.runner import Selection, plan_batch
    from kbv.intake.layout import Layout

    config = make_config(config)
    try:
        lay = Layout(layout)
    except ValueError:
        raise ValueError(f"layout must be one of {', '.join(l.value for l in Layout)}, not {layout!r}") from None
    roots = [candidates] if isinstance(candidates, (str, os.PathLike)) else list(candidates)
    if isinstance(runs, str):
        runs = [r for r in runs.split(",")]
    names = frozenset(r.strip() for r in runs if r.strip()) if runs is not None else None
    selection = Selection(levels=_ids(levels, "levels"), problem_ids=_ids(problem_ids, "problem_ids"), runs=names)
    return plan_batch(problems, roots, config, layout=lay, selection=selection, hidden_tests_root=hidden_tests)


def run(batch: "BatchPlan", store: "str | os.PathLike[str] | Store", *, retry_excluded: bool = False,
        on_verdict: Callable[["PlannedJob", Verdict], None] | None = None,
        progress: bool = False, **options: Any) -> "BatchOutcome":
    """Run every job of ``batch`` (from :func:`plan`) that has no verdict in ``store`` yet, writing
    each verdict the moment it finishes, as ``kbv run`` does: a rerun resumes, ``kill -9`` loses at
    most the job in flight.

    It starts its own reference worker and closes it at the end. Call it from the thread that
    waits for it; in the main thread SIGTERM and Ctrl-C release the job in flight and return with
    ``outcome.interrupted``.

    Args:
        store: a SQLite store path (created if missing) or an open :class:`kbv.batch.store.Store`.
        retry_excluded: run the jobs of problems excluded as broken again.
        on_verdict: called with (planned job, verdict) after each verdict is stored.
        progress: show ``kbv run``'s progress bar and one line per verdict on the terminal.
        options: passed on to :func:`kbv.batch.runner.run_batch` (``lanes``, ``builds``, ... as ``kbv run
            --lanes/--builds``).
    Returns:
        a :class:`kbv.batch.runner.BatchOutcome` (counts, statuses, exclusions, internal errors).
    Raises:
        kbv.batch.runner.ConfigMismatch: the store holds results of another configuration.
        ValueError: ``batch`` asks for ``cuda`` on a machine without CUDA.
    """
    from kbv.batch.runner import run_batch
    from kbv.batch.store import Store

    make_config(batch.config)  # a clear error before any worker starts
    console = None
    if progress:
        from rich.console import Console

        console = Console()
    if isinstance(store, Store):
        return run_batch(batch, store, console=console, retry_excluded=retry_excluded, on_verdict=on_verdict,
                         **options)
    with Store(store) as st:
        return run_batch(batch, st, console=console, retry_excluded=retry_excluded, on_verdict=on_verdict,
                         **options)


def metrics(store: "str | os.PathLike[str] | Store", *, baseline: str = "eager-tf32",
            include_excluded: bool = False) -> "BatchMetrics":
    """Every metric of the batch in ``store``, as ``kbv report`` computes them: per run and level,
    both correctness policies, fast_p, pass@k, geomeans with their "n of N", memory ratios
    (definitions: docs/metrics.md). Reads the store only.

    Args:
        baseline: ``eager-tf32``, ``eager-fp32``, ``eager-fp32-cudnn-tf32`` or ``compile``.
        include_excluded: score problems excluded by vetting too.
    Returns:
        a :class:`kbv.batch.metrics.BatchMetrics` (``runs``, ``run(name).overall``, ``excluded``, ...).
    Raises:
        FileNotFoundError: no store at that path.
        ValueError: an unknown ``baseline``.
    """
    from kbv.report.html import load_metrics
    from kbv.batch.results import SPEEDUP_COLUMNS
    from kbv.batch.store import Store

    if baseline not in SPEEDUP_COLUMNS:
        raise ValueError(f"baseline must be one of {', '.join(SPEEDUP_COLUMNS)}, not {baseline!r}")
    if isinstance(store, Store):
        return load_metrics(store, baseline=baseline, include_excluded=include_excluded)
    if not Path(store).is_file():
        raise FileNotFoundError(f"no kbv store at {str(store)!r}")
    with Store(store) as st:
        return load_metrics(st, baseline=baseline, include_excluded=include_excluded)
