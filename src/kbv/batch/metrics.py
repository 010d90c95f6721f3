"""Aggregate metrics of a batch, computed only from stored verdicts (pure functions, no I/O).

Definitions (``../shared/kernelbench-format.md``):

* **correctness** (best-of-N): a problem is solved when any of its samples is ``PASS``
  (correct on every nominal and hidden input set, no integrity finding).
* **correct speedup**: geometric mean, over solved problems, of the speedup (baseline median time /
  candidate median time) of the problem's fastest ``PASS`` sample. KernelBench (Ouyang et al. 2025,
  §4) and KernelBench-Verified.
* **fast_p**: (problems with a ``PASS`` sample whose speedup > p) / (all problems of the level),
  KernelBench §4. The denominator includes unsolved and unattempted problems.
* **correct memory efficiency**: geometric mean, over solved problems, of reference peak /
  candidate peak bytes of the same fastest ``PASS`` sample; **memory-efficient %**: share of those
  problems whose candidate peak is strictly below the reference's (efficiency > 1).
  KernelBench-Verified.
* **pass@k**: the unbiased estimator 1 − C(n−c, k) / C(n, k) of Chen et al. 2021, "Evaluating
  Large Language Models Trained on Code", §2.1, averaged over problems.

* **all-problems speedup**: KernelBench's official "average speedup": geometric mean over *all*
  problems of max(1, best correct speedup), an unsolved problem (or one whose speedup is unknown)
  counting 1× (the reference is the fallback). Beside the correct speedup, so a run that solves
  fewer problems cannot look faster by averaging over fewer.
* **speedup interval**: a 95 % percentile-bootstrap interval of one sample's speedup, the ratio of
  the medians of the baseline's and the candidate's raw per-call times, each resampled with
  replacement (:func:`kbv.batch.scoring.speedup_interval`); a speedup is **noisy** when either measurement is
  (IQR > 10 % of the median, :data:`kbv.model.records.NOISY_IQR_FRACTION`).
* **policies side by side** (:class:`kbv.batch.policies.PolicyMetrics`): the aggregates above plus the per-sample
  ones of KernelBench-Verified's ``scripts/benchmark_eval_analysis.py``, under ``kbv`` (kbv's
  verdict) and ``kbv-compat`` (the paper's allclose rule on nominal + D1–D4, no integrity
  detectors). Definitions and sources: docs/metrics.md.

Status policy: ``SHORTCUT`` samples are correct but their speed comes from a library call, so they
never enter the correct speedup (their own geomean is reported separately); ``HACK`` is incorrect.
``EVAL_ERROR`` (kbv failed, not the candidate) never counts against a run: such samples are left
out of every numerator and denominator (n of pass@k included), and a problem whose samples of a
run are all ``EVAL_ERROR`` leaves that run's denominators (``LevelMetrics.eval_error_problems``);
they are counted apart. Problems excluded by vetting are left out of every metric unless asked
for, and listed with their reasons. Problems outside any ``levelN`` folder form level 0.

The formulas and the choice of a problem's best sample are :mod:`kbv.batch.scoring`; the two
policies' aggregates are :mod:`kbv.batch.policies`. All fractions are in [0, 1] (``_frac``);
speedups and memory efficiencies are ratios (×).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from kbv.batch.jobs import problem_key
from kbv.batch.policies import PolicyDisagreement, PolicyMetrics, policy_disagreements, policy_metrics
from kbv.batch.scoring import (FAST_P_THRESHOLDS, PASS_AT_K, all_problems_speedup, fast_p, fastest, finite_pos,
                               geomean, nominal_correct, nominal_speedup, pass_at_k, speedup_interval,
                               speedup_noisy, verified_speedup)
from kbv.model.records import POLICIES, InputKind, ProblemRef, Status, Verdict

DECOMPOSITION_BASELINES: tuple[str, ...] = ("eager-fp32", "eager-tf32")
#: ``nominal``: the original KernelBench notion (ran, every nominal set passed; hidden failures and
#: integrity findings ignored). ``hidden``: kbv's verdict (status PASS).
DECOMPOSITION_CORRECTNESS: tuple[str, ...] = ("nominal", "hidden")
DEFAULT_BASELINE = "eager-tf32"


# Records ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ProblemOutcome:
    """One problem's best-of-N outcome for one run."""

    problem_key: str
    samples: int  #: candidate verdicts of this run for the problem, EVAL_ERROR left out (n of pass@k).
    passed: int  #: PASS samples (c of pass@k).
    best_sample_id: int | None  #: the fastest PASS sample, None when unsolved.
    best_speedup: float | None  #: its speedup vs the chosen baseline (×).
    best_memory_efficiency: float | None  #: its reference peak / candidate peak (×).
    best_speedup_interval: tuple[float, float] | None = None  #: :func:`speedup_interval` of it (×).
    best_noisy: bool = False  #: its speedup is too noisy to rank (:func:`speedup_noisy`).
    eval_errors: int = 0  #: EVAL_ERROR verdicts of this run for the problem (not in ``samples``).

    @property
    def solved(self) -> bool:
        """At least one PASS sample."""
        return self.passed > 0


@dataclass(frozen=True)
class DecompositionCell:
    """Correct speedup and fast_1 under one (baseline, correctness notion) pair."""

    baseline: str  #: ``eager-fp32`` | ``eager-tf32``.
    correctness: str  #: ``nominal`` | ``hidden`` (see :data:`DECOMPOSITION_CORRECTNESS`).
    correct_problems: int  #: problems with a sample correct under this notion.
    correct_frac: float  #: correct_problems / problems.
    correct_speedup: float | None  #: geomean of the fastest correct sample's speedup (×).
    fast_1_frac: float  #: problems with a correct sample faster than the baseline / problems.


@dataclass(frozen=True)
class LevelMetrics:
    """Metrics of one run over one level (``level=None``: all levels together)."""

    run: str
    level: int | None
    baseline: str  #: the baseline the speedups are measured against.
    problems: int  #: problems that count: all runs' problems, exclusions and this run's EVAL_ERROR-only ones removed.
    attempted: int  #: problems with at least one candidate verdict (not EVAL_ERROR) of this run.
    samples: int  #: candidate verdicts (EVAL_ERROR left out; see ``eval_error_samples``).
    solved: int  #: problems with a PASS sample.
    correct_frac: float  #: solved / problems (best-of-N correctness).
    correct_speedup: float | None  #: geomean over solved problems of the best PASS speedup (×).
    speedup_problems: int  #: solved problems that had a speedup vs ``baseline`` (the n of the geomean).
    noisy_problems: int  #: of those, problems whose best speedup is too noisy to rank.
    all_problems_speedup: float | None  #: KernelBench's average speedup over all ``problems`` (×).
    fast_p: Mapping[float, float]  #: p → fraction of all problems (KernelBench §4).
    memory_efficiency: float | None  #: geomean reference/candidate peak of the best PASS sample (×).
    memory_problems: int  #: solved problems with a memory figure.
    memory_efficient_frac: float | None  #: share of memory_problems with candidate peak < reference.
    pass_at_k: Mapping[int, float]  #: k → mean unbiased pass@k (k ≤ fewest samples of a problem).
    status_counts: Mapping[str, int]  #: every :class:`Status` value → verdicts (EVAL_ERROR included).
    shortcut_problems: int  #: problems with a SHORTCUT sample.
    shortcut_speedup: float | None  #: geomean of their fastest SHORTCUT speedup (×), reported apart.
    decomposition: tuple[DecompositionCell, ...]
    nominal_passed_samples: int  #: samples that ran and passed every nominal set.
    hidden_failures: Mapping[str, int]  #: hidden set name → nominal-passing samples failing it.
    outcomes: tuple[ProblemOutcome, ...]  #: one per problem that counts, sorted by key.
    eval_error_samples: int  #: EVAL_ERROR verdicts (kbv's failures), counted apart.
    eval_error_problems: tuple[str, ...]  #: problems left out because every sample is EVAL_ERROR.
    policies: Mapping[str, PolicyMetrics]  #: policy (``kbv``, ``kbv-compat``) → aggregates.

    @property
    def label(self) -> str:
        """``all`` or ``level N``, for tables."""
        return "all" if self.level is None else f"level {self.level}"

    def cell(self, baseline: str, correctness: str) -> DecompositionCell:
        """The decomposition cell of (``eager-fp32``|``eager-tf32``, ``nominal``|``hidden``)."""
        for c in self.decomposition:
            if c.baseline == baseline and c.correctness == correctness:
                return c
        raise KeyError((baseline, correctness))


@dataclass(frozen=True)
class RunMetrics:
    """One run (model): all levels together and each level apart."""

    run: str
    overall: LevelMetrics
    levels: tuple[LevelMetrics, ...]  #: ascending level.

    def level(self, level: int) -> LevelMetrics:
        """This run's metrics over one level (KeyError if the batch has no such level)."""
        for m in self.levels:
            if m.level == level:
                return m
        raise KeyError(level)


@dataclass(frozen=True)
class Exclusion:
    """A problem left out of the metrics by vetting."""

    problem_key: str
    reasons: tuple[str, ...]
    samples: int  #: verdicts left out of the metrics because of it.


@dataclass(frozen=True)
class BatchMetrics:
    """Everything :func:`compute_metrics` returns."""

    baseline: str
    runs: tuple[RunMetrics, ...]  #: sorted by run name.
    excluded: tuple[Exclusion, ...]  #: empty when ``include_excluded`` was set.
    problems: Mapping[int, tuple[str, ...]]  #: level → problem keys that count.
    #: samples correct under kbv-compat but not kbv, by run, problem, sample.
    compat_only: tuple[PolicyDisagreement, ...] = ()
    #: every EVAL_ERROR verdict (exclusions included), by run, problem, sample.
    eval_errors: tuple[Verdict, ...] = ()

    def run(self, name: str) -> RunMetrics:
        """Metrics of one run by name (KeyError if absent)."""
        for r in self.runs:
            if r.run == name:
                return r
        raise KeyError(name)

    def rows(self) -> list[LevelMetrics]:
        """Every (run, scope) row: each run's overall row, then its levels."""
        return [m for r in self.runs for m in (r.overall, *r.levels)]


# Computation ------------------------------------------------------------------------------------

def _level_bucket(ref: ProblemRef) -> int:
    return ref.level if ref.level is not None else 0


def problem_outcome(key: str, samples: Sequence[Verdict], baseline: str) -> ProblemOutcome:
    """Best-of-N outcome: the fastest PASS sample vs ``baseline``, its interval, noise and memory
    efficiency. EVAL_ERROR samples are counted apart, never as attempts."""
    judged = [v for v in samples if v.status is not Status.EVAL_ERROR]
    best = fastest((v for v in judged if v.status is Status.PASS), lambda v: verified_speedup(v, baseline))
    speed = verified_speedup(best, baseline) if best else None
    return ProblemOutcome(
        problem_key=key,
        samples=len(judged),
        passed=sum(v.status is Status.PASS for v in judged),
        best_sample_id=best.candidate.sample_id if best else None,
        best_speedup=speed,
        best_memory_efficiency=finite_pos(best.memory_efficiency) if best else None,
        best_speedup_interval=speedup_interval(best, baseline) if speed is not None else None,
        best_noisy=speedup_noisy(best, baseline) if speed is not None else False,
        eval_errors=len(samples) - len(judged),
    )


def _decomposition(by_problem: Mapping[str, Sequence[Verdict]], n_problems: int) -> tuple[DecompositionCell, ...]:
    cells = []
    for baseline in DECOMPOSITION_BASELINES:
        for notion in DECOMPOSITION_CORRECTNESS:
            ok: Callable[[Verdict], bool] = nominal_correct if notion == "nominal" else (
                lambda v: v.status is Status.PASS)
            speed: Callable[[Verdict], float | None] = (
                (lambda v, b=baseline: nominal_speedup(v, b)) if notion == "nominal"
                else (lambda v, b=baseline: verified_speedup(v, b)))
            correct, best = 0, []
            for samples in by_problem.values():
                good = [v for v in samples if ok(v)]
                if good:
                    correct += 1
                    best.append(speed(fastest(good, speed)))
            cells.append(DecompositionCell(
                baseline=baseline, correctness=notion, correct_problems=correct,
                correct_frac=correct / n_problems if n_problems else 0.0,
                correct_speedup=geomean(s for s in best if s is not None),
                fast_1_frac=fast_p(best, n_problems, 1.0)))
    return tuple(cells)


#: the columns of :func:`_hidden_failures` that count samples wrong at a secret shape or declared
#: workload (any of its sets), and on any of kbv's randomised distributions (any of their sets).
SHAPE_COLUMN = "secret-shape"
RANDOM_COLUMN = "randomised"


def _hidden_failures(samples: Iterable[Verdict]) -> tuple[int, dict[str, int]]:
    """Nominal-passing samples, and per hidden set (D1-D4, ``HT*``) how many of them fail it,
    with :data:`SHAPE_COLUMN` (how many are wrong at a secret shape: shape-specialised) and
    :data:`RANDOM_COLUMN` (how many are wrong on one of kbv's randomised distributions: the
    reason a sample right on nominal and D1-D4 is not credited)."""
    passed_nominal = 0
    failures: dict[str, int] = {}
    for v in samples:
        for r in v.sets(InputKind.HIDDEN):
            failures.setdefault(r.name, 0)
        for kind, column in ((InputKind.SHAPE, SHAPE_COLUMN), (InputKind.RANDOM, RANDOM_COLUMN)):
            if v.sets(kind):
                failures.setdefault(column, 0)
        if not nominal_correct(v):
            continue
        passed_nominal += 1
        for r in v.sets(InputKind.HIDDEN):
            if r.passed is False:
                failures[r.name] += 1
        for kind, column in ((InputKind.SHAPE, SHAPE_COLUMN), (InputKind.RANDOM, RANDOM_COLUMN)):
            if any(r.passed is False for r in v.sets(kind)):
                failures[column] += 1
    return passed_nominal, dict(sorted(failures.items()))


def level_metrics(run: str, level: int | None, problems: Sequence[str],
                  by_problem: Mapping[str, Sequence[Verdict]], *, baseline: str = DEFAULT_BASELINE,
                  thresholds: Sequence[float] = FAST_P_THRESHOLDS,
                  ks: Sequence[int] = PASS_AT_K) -> LevelMetrics:
    """Metrics of one run over a set of problems.

    Args:
        problems: every problem key of the scope (the fast_p and correctness denominator, less
            the problems whose samples of this run are all EVAL_ERROR).
        by_problem: this run's verdicts per problem key (problems not listed had none).
    """
    everything = {k: list(by_problem.get(k, ())) for k in problems}
    unjudged = tuple(sorted(k for k, vs in everything.items()
                            if vs and all(v.status is Status.EVAL_ERROR for v in vs)))
    eval_errors = sum(v.status is Status.EVAL_ERROR for vs in everything.values() for v in vs)
    groups = {k: [v for v in vs if v.status is not Status.EVAL_ERROR]
              for k, vs in everything.items() if k not in unjudged}
    n = len(groups)
    outcomes = tuple(problem_outcome(k, everything[k], baseline) for k in sorted(groups))
    solved = [o for o in outcomes if o.solved]
    best = [o.best_speedup for o in solved]
    mem = [o.best_memory_efficiency for o in solved if o.best_memory_efficiency is not None]
    attempted = [o for o in outcomes if o.samples > 0]
    min_n = min((o.samples for o in attempted), default=0)
    pass_k = {k: float(np.mean([pass_at_k(o.samples, o.passed, k) if o.samples else 0.0 for o in outcomes]))
              for k in ks if 1 <= k <= min_n}
    all_samples = [v for vs in groups.values() for v in vs]
    counts = Counter(v.status.value for vs in everything.values() for v in vs)
    shortcut_best = []
    for vs in groups.values():
        sc = [v for v in vs if v.status is Status.SHORTCUT]
        if sc:
            shortcut_best.append(fastest(sc, lambda v: v.speedup.get(baseline)).speedup.get(baseline))
    nominal_ok, failures = _hidden_failures(all_samples)
    return LevelMetrics(
        run=run, level=level, baseline=baseline, problems=n, attempted=len(attempted),
        samples=len(all_samples), solved=len(solved),
        correct_frac=len(solved) / n if n else 0.0,
        correct_speedup=geomean(s for s in best if s is not None),
        speedup_problems=sum(s is not None for s in best),
        noisy_problems=sum(o.best_noisy for o in solved),
        all_problems_speedup=all_problems_speedup(best, n),
        fast_p={float(p): fast_p(best, n, p) for p in thresholds},
        memory_efficiency=geomean(mem), memory_problems=len(mem),
        memory_efficient_frac=(sum(m > 1.0 for m in mem) / len(mem)) if mem else None,
        pass_at_k=pass_k,
        status_counts={s.value: counts.get(s.value, 0) for s in Status},
        shortcut_problems=len(shortcut_best),
        shortcut_speedup=geomean(s for s in shortcut_best if s is not None),
        decomposition=_decomposition(groups, n),
        nominal_passed_samples=nominal_ok, hidden_failures=failures, outcomes=outcomes,
        eval_error_samples=eval_errors, eval_error_problems=unjudged,
        # with their EVAL_ERROR samples: never correct, and the per-sample scores leave them out
        policies={p: policy_metrics({k: everything[k] for k in groups}, p, baseline, thresholds) for p in POLICIES},
    )


def compute_metrics(verdicts: Iterable[Verdict], *,
                    exclusions: Mapping[str, Sequence[str]] | None = None,
                    baseline: str = DEFAULT_BASELINE, include_excluded: bool = False,
                    problems: Iterable[ProblemRef] = (),
                    thresholds: Sequence[float] = FAST_P_THRESHOLDS,
                    ks: Sequence[int] = PASS_AT_K) -> BatchMetrics:
    """Every metric of a batch, per run and per level.

    Args:
        verdicts: the batch's verdicts (e.g. ``Store.verdicts()``); the run is
            ``verdict.candidate.run`` (``""`` when unset).
        exclusions: ``{problem_key: reasons}`` from vetting (``Store.exclusions()``).
        baseline: the baseline speedups are measured against (``eager-fp32``, ``eager-tf32``,
            ``compile``); the decomposition always shows both eager baselines.
        include_excluded: score excluded problems too (then ``excluded`` is empty).
        problems: extra problems that count even without verdicts (e.g. every problem of the
            batch, so a problem no run attempted still counts against fast_p).
    The problem set of a level is the union over all runs, so runs are compared on the same
    denominator; a run without a sample for a problem has failed it.
    """
    exclusions = dict(exclusions or {})
    verdicts = list(verdicts)
    levels: dict[int, set[str]] = defaultdict(set)
    for ref in problems:
        levels[_level_bucket(ref)].add(problem_key(ref))
    per_run: dict[str, dict[str, list[Verdict]]] = defaultdict(lambda: defaultdict(list))
    dropped: Counter[str] = Counter()
    for v in verdicts:
        key = problem_key(v.problem)
        if key in exclusions and not include_excluded:
            dropped[key] += 1
            continue
        levels[_level_bucket(v.problem)].add(key)
        per_run[v.candidate.run or ""][key].append(v)
    if not include_excluded:
        for lv in levels.values():
            lv.difference_update(exclusions)
    level_keys = {lv: tuple(sorted(keys)) for lv, keys in sorted(levels.items())}
    all_keys = [k for keys in level_keys.values() for k in keys]
    kw = dict(baseline=baseline, thresholds=thresholds, ks=ks)
    runs = []
    for run in sorted(per_run):
        by_problem = per_run[run]
        runs.append(RunMetrics(
            run=run,
            overall=level_metrics(run, None, all_keys, by_problem, **kw),
            levels=tuple(level_metrics(run, lv, keys, by_problem, **kw) for lv, keys in level_keys.items()),
        ))
    excluded = () if include_excluded else tuple(
        Exclusion(k, tuple(r), dropped.get(k, 0)) for k, r in sorted(exclusions.items()))
    counted = [v for by_problem in per_run.values() for vs in by_problem.values() for v in vs]
    return BatchMetrics(baseline=baseline, runs=tuple(runs), excluded=excluded, problems=level_keys,
                        compat_only=policy_disagreements(_ordered(counted), baseline),
                        eval_errors=tuple(_ordered(v for v in verdicts if v.status is Status.EVAL_ERROR)))


def _ordered(verdicts: Iterable[Verdict]) -> list[Verdict]:
    return sorted(verdicts, key=lambda v: (v.candidate.run or "", _level_bucket(v.problem),
                                           v.problem.problem_id or 0, problem_key(v.problem),
                                           v.candidate.sample_id or 0))
