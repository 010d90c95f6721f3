"""The two correctness policies side by side (pure functions, no I/O): ``kbv`` (kbv's verdict) and
``kbv-compat`` (KernelBench-Verified's allclose rule on the nominal and D1–D4 sets, no integrity
detector), each with the best-of-N aggregates and the per-sample ones of KernelBench-Verified's
``scripts/benchmark_eval_analysis.py``. Definitions and sources: docs/metrics.md.

EVAL_ERROR samples are never correct under either policy and leave their sample index's
per-sample denominator (kbv's failure never counts against a run).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np

from kbv.batch.jobs import problem_key
from kbv.batch.scoring import (FAST_P_THRESHOLDS, all_problems_speedup, fast_p, fastest, finite_pos, geomean,
                               nominal_speedup, speedup_noisy)
from kbv.model.records import Status, Verdict


def policy_correct(v: Verdict, policy: str) -> bool:
    """Whether ``v`` is correct under a correctness policy (:data:`kbv.model.records.POLICIES`).

    ``kbv``: every judged set passes kbv's rule and no integrity finding made it HACK or SHORTCUT
    (a PASS when the run used the kbv policy). ``kbv-compat``: the paper's rule only — allclose on
    the nominal and D1–D4 sets, nothing else (KernelBench-Verified has no integrity detector, so
    a HACK or SHORTCUT that passes allclose counts). Uses :attr:`Verdict.policy_verdicts`; a
    record without a policy's per-set verdicts falls back to its sets' ``passed`` for the run's
    own policy and is not correct under the other. EVAL_ERROR and every failure to run: False.
    """
    if not v.status.ran:
        return False
    ok = v.policy_verdicts.get(policy)
    if ok is None and policy == v.config.policy:
        judged = [r for r in v.input_sets if not r.dropped]
        ok = bool(judged) and all(r.passed for r in judged)
    if not ok:
        return False
    return policy != "kbv" or v.status not in (Status.HACK, Status.SHORTCUT)


def policy_speedup(v: Verdict, baseline: str) -> float | None:
    """Measured speedup vs ``baseline`` whatever the status (``speedup``, else ``unverified_speedup``);
    what a policy that counts ``v`` as correct credits it with."""
    return nominal_speedup(v, baseline)


@dataclass(frozen=True)
class PerSampleMetrics:
    """KernelBench-Verified's per-sample aggregates (``scripts/benchmark_eval_analysis.py``): each
    sample index s is scored as one attempt at every problem (a missing sample fails), then the
    scores are averaged over the indices. Every value is ``(mean, population std)`` over indices."""

    indices: int  #: sample indices scored.
    compiled_rate: tuple[float, float]  #: share of problems whose sample s compiled (not COMPILE_ERROR).
    correctness_rate: tuple[float, float]  #: share of problems whose sample s is correct.
    correct_speedup: tuple[float, float] | None  #: geomean over correct samples s (``gmsr``); None if none.
    all_problems_speedup: tuple[float, float]  #: geomean over problems of max(1, speedup) (``avg_speedup``).
    fast_p: Mapping[float, tuple[float, float]]  #: p → share of problems correct and faster than p×.
    memory_ratio: tuple[float, float]  #: geomean candidate/reference peak, 1 where not correct (``gmr``).
    memory_efficient_frac: tuple[float, float]  #: share of problems correct with a lower peak.


@dataclass(frozen=True)
class PolicyMetrics:
    """A run's aggregates over one scope under one correctness policy (:func:`policy_correct`),
    best-of-N per problem unless per sample. Denominators are ``problems`` (EVAL_ERROR-only
    problems out)."""

    policy: str  #: ``kbv`` or ``kbv-compat``.
    problems: int
    correct_problems: int  #: problems with a sample correct under the policy.
    correct_frac: float  #: correct_problems / problems (KernelBench-Verified's Correctness %).
    correct_speedup: float | None  #: geomean over correct problems of the fastest correct sample (×).
    speedup_problems: int  #: correct problems with a measured speedup (the n of that geomean).
    noisy_problems: int  #: of those, how many have a noisy speedup.
    all_problems_speedup: float | None  #: :func:`all_problems_speedup` over every problem (×).
    fast_p: Mapping[float, float]  #: p → share of problems whose fastest correct sample beats p×.
    memory_efficiency: float | None  #: geomean reference/candidate peak of those samples (×).
    memory_problems: int
    memory_efficient_frac: float | None  #: share of memory_problems with a lower peak than the reference.
    memory_efficient_frac_all: float  #: the same count over all problems (``memory_efficient_p``).
    memory_ratio_all: float | None  #: geomean over all problems of candidate/reference peak, 1 if unknown.
    per_sample: PerSampleMetrics | None  #: None when the scope has no sample of the run.


@dataclass(frozen=True)
class PolicyDisagreement:
    """A sample correct under the paper's rule (``kbv-compat``) but not under kbv's."""

    run: str
    problem_key: str
    sample_id: int | None
    status: str  #: kbv's status of the sample.
    message: str
    speedup: float | None  #: its measured speedup vs the metrics' baseline (×), whatever the status.


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    return float(np.mean(values)), float(np.std(values))


def _per_sample(groups: Mapping[str, Sequence[Verdict]], policy: str, baseline: str,
                thresholds: Sequence[float]) -> PerSampleMetrics | None:
    """KernelBench-Verified ``benchmark_eval_analysis.py``'s per-sample scores (see
    :class:`PerSampleMetrics`); an index's EVAL_ERROR samples leave that index's denominator."""
    indices = sorted({v.candidate.sample_id or 0 for vs in groups.values() for v in vs})
    if not indices:
        return None
    rows: dict[str, list[float]] = defaultdict(list)
    gmsr: list[float] = []
    for s in indices:
        picked = {k: next((v for v in vs if (v.candidate.sample_id or 0) == s), None) for k, vs in groups.items()}
        scored = {k: v for k, v in picked.items() if v is None or v.status is not Status.EVAL_ERROR}
        n = len(scored)
        if n == 0:
            continue
        correct = {k: v for k, v in scored.items() if v is not None and policy_correct(v, policy)}
        speeds = [sp for v in correct.values() if (sp := finite_pos(policy_speedup(v, baseline))) is not None]
        mems = [m for v in correct.values() if (m := finite_pos(v.memory_efficiency)) is not None]
        rows["compiled"].append(sum(v is not None and v.status is not Status.COMPILE_ERROR
                                    for v in scored.values()) / n)
        rows["correct"].append(len(correct) / n)
        if speeds:
            gmsr.append(geomean(speeds))
        rows["all"].append(all_problems_speedup(speeds, n))
        for p in thresholds:
            rows[f"fast_{p}"].append(sum(sp > p for sp in speeds) / n)
        rows["mem_ratio"].append(float(math.exp(sum(-math.log(m) for m in mems) / n)))
        rows["mem_eff"].append(sum(m > 1.0 for m in mems) / n)
    if not rows:
        return None
    return PerSampleMetrics(
        indices=len(rows["correct"]), compiled_rate=_mean_std(rows["compiled"]),
        correctness_rate=_mean_std(rows["correct"]), correct_speedup=_mean_std(gmsr) if gmsr else None,
        all_problems_speedup=_mean_std(rows["all"]),
        fast_p={float(p): _mean_std(rows[f"fast_{p}"]) for p in thresholds},
        memory_ratio=_mean_std(rows["mem_ratio"]), memory_efficient_frac=_mean_std(rows["mem_eff"]))


def policy_metrics(groups: Mapping[str, Sequence[Verdict]], policy: str, baseline: str,
                   thresholds: Sequence[float] = FAST_P_THRESHOLDS) -> PolicyMetrics:
    """A run's aggregates under ``policy`` over the problems in ``groups`` (problem key → that run's
    verdicts, EVAL_ERROR-only problems already removed; EVAL_ERROR samples of the others are never
    correct and leave their index's per-sample denominator); see docs/metrics.md."""
    n = len(groups)
    best: list[Verdict] = []
    for vs in groups.values():
        good = [v for v in vs if policy_correct(v, policy)]
        if good:
            best.append(fastest(good, lambda v: policy_speedup(v, baseline)))
    speeds = [finite_pos(policy_speedup(v, baseline)) for v in best]
    timed = [(v, sp) for v, sp in zip(best, speeds) if sp is not None]
    mems = [m for v in best if (m := finite_pos(v.memory_efficiency)) is not None]
    return PolicyMetrics(
        policy=policy, problems=n, correct_problems=len(best), correct_frac=len(best) / n if n else 0.0,
        correct_speedup=geomean(sp for _, sp in timed), speedup_problems=len(timed),
        noisy_problems=sum(speedup_noisy(v, baseline) for v, _ in timed),
        all_problems_speedup=all_problems_speedup(speeds, n),
        fast_p={float(p): fast_p(speeds, n, p) for p in thresholds},
        memory_efficiency=geomean(mems), memory_problems=len(mems),
        memory_efficient_frac=(sum(m > 1.0 for m in mems) / len(mems)) if mems else None,
        memory_efficient_frac_all=sum(m > 1.0 for m in mems) / n if n else 0.0,
        memory_ratio_all=float(math.exp(sum(-math.log(m) for m in mems) / n)) if n else None,
        per_sample=_per_sample(groups, policy, baseline, thresholds),
    )


def policy_disagreements(verdicts: Iterable[Verdict], baseline: str) -> tuple[PolicyDisagreement, ...]:
    """Samples correct under ``kbv-compat`` (the paper's rule) but not under ``kbv``, in store order."""
    return tuple(
        PolicyDisagreement(run=v.candidate.run or "", problem_key=problem_key(v.problem),
                           sample_id=v.candidate.sample_id, status=v.status.value, message=v.message,
                           speedup=policy_speedup(v, baseline))
        for v in verdicts if policy_correct(v, "kbv-compat") and not policy_correct(v, "kbv"))
