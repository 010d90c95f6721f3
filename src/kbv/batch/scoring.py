"""Per-sample scoring of stored verdicts (pure functions, no I/O): the elementary formulas of the
batch metrics and which sample of a problem counts.

* :func:`geomean`, :func:`pass_at_k` (Chen et al. 2021, §2.1), :func:`fast_p` and
  :func:`all_problems_speedup` (KernelBench, Ouyang et al. 2025, §4; KernelBench-Verified
  ``src/score.py``) over per-problem figures.
* :func:`speedup_interval` / :func:`speedup_noisy`: one sample's bootstrap interval and noise flag.
* :func:`verified_speedup`, :func:`nominal_speedup`, :func:`nominal_correct`, :func:`fastest`:
  which speedup a sample is credited with and which sample of a problem is its best.

The aggregates built from these are :mod:`kbv.batch.metrics` (per run and level) and
:mod:`kbv.batch.policies` (both correctness policies side by side); docs/metrics.md defines them.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Sequence

import numpy as np

from kbv.model.intervals import INTERVAL_CONFIDENCE, INTERVAL_RESAMPLES, RERUN_LOG_SE, interval_seed, ratio_interval
from kbv.model.records import Status, Verdict

FAST_P_THRESHOLDS: tuple[float, ...] = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
PASS_AT_K: tuple[int, ...] = (1, 5, 10)


# Elementary formulas ----------------------------------------------------------------------------

def geomean(values: Iterable[float]) -> float | None:
    """Geometric mean exp(mean(log x)) of positive ratios; None for an empty input.

    Raises:
        ValueError: a value is not finite and positive.
    """
    arr = np.asarray(list(values), dtype=np.float64)
    if arr.size == 0:
        return None
    if not np.all(np.isfinite(arr) & (arr > 0)):
        raise ValueError(f"geomean needs finite positive values, got {arr[~(np.isfinite(arr) & (arr > 0))][:3]}")
    return float(np.exp(np.mean(np.log(arr))))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with ``n`` samples of which ``c`` are correct.

    ``1 − C(n−c, k) / C(n, k)`` (Chen et al. 2021, §2.1), evaluated in the numerically stable
    product form ``1 − ∏_{i=n−c+1}^{n} (1 − k / i)`` of their reference code.

    Raises:
        ValueError: ``k < 1``, ``k > n`` or ``c`` outside ``[0, n]``.
    """
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def fast_p(best_speedups: Sequence[float | None], n_problems: int, p: float) -> float:
    """fast_p (KernelBench §4): share of ``n_problems`` whose best correct speedup is > ``p``.

    ``best_speedups`` holds one entry per solved problem (None when its speedup is unknown,
    which never counts as fast).
    """
    if n_problems <= 0:
        return 0.0
    return sum(1 for s in best_speedups if s is not None and s > p) / n_problems


def all_problems_speedup(best_speedups: Sequence[float | None], n_problems: int) -> float | None:
    """KernelBench's official average speedup: geomean over ``n_problems`` of max(1, s).

    ``best_speedups`` holds one entry per solved problem (None when unknown); every other problem,
    and every unknown or slower one, counts 1× (KernelBench-Verified ``src/score.py``,
    ``geometric_mean_speedup_all_problems``). None for no problems.
    """
    if n_problems <= 0:
        return None
    logs = [math.log(s) for s in best_speedups if s is not None and s > 1.0]
    return float(math.exp(sum(logs) / n_problems))


def speedup_interval(v: Verdict, baseline: str, *, confidence: float = INTERVAL_CONFIDENCE,
                     resamples: int = INTERVAL_RESAMPLES) -> tuple[float, float] | None:
    """Percentile-bootstrap interval (×) of ``v``'s speedup vs ``baseline``.

    The speedup is median(baseline times) / median(candidate times) of the raw per-call samples
    (:attr:`kbv.model.records.Measurement.times_ms`); the interval is
    :func:`kbv.model.intervals.ratio_interval` (percentile bootstrap, each side resampled
    ``resamples`` times; Efron & Tibshirani 1993, §13.3), seeded from the candidate, problem and
    baseline, so a report is reproducible; widened by the spread between the verdict's timing rounds
    and the device's rerun floor (:data:`kbv.model.intervals.RERUN_LOG_SE`), so that it covers a rerun.
    None when either side was not timed in this verdict (e.g. ``compile``, which comes from the
    baseline cache). A speedup over declared workloads gets :func:`_geomean_interval`.
    """
    workloads = v.evidence.get("workloads")
    if isinstance(workloads, list) and len(workloads) > 1:
        return _geomean_interval(v, baseline, workloads, confidence, resamples)
    return _interval(v, baseline, v.timing.get("candidate"), v.timing.get(baseline),
                     v.evidence.get("timed_calls_per_round"), confidence, resamples)


def _interval(v: Verdict, baseline: str, cand, base, blocks, confidence: float, resamples: int,
              salt: str = "") -> tuple[float, float] | None:
    if cand is None or base is None:
        return None
    seed = interval_seed(v.problem.sha256 + salt, v.candidate.sha256, baseline)
    return ratio_interval(base.times_ms, cand.times_ms, seed, confidence=confidence, resamples=resamples,
                          blocks=blocks if isinstance(blocks, (list, tuple)) else (),
                          floor_se=RERUN_LOG_SE.get(cand.device, 0.0))


def _geomean_interval(v: Verdict, baseline: str, workloads: list, confidence: float,
                      resamples: int) -> tuple[float, float] | None:
    """The interval of a speedup that is the geometric mean over declared workloads
    (:func:`kbv.pipeline.verdict.combine_workloads`): the geometric mean of each workload's own
    interval's bounds (each from its timing in ``evidence["workloads"]``). Exact if the workloads'
    errors moved together, wider than the independent case otherwise: it covers a rerun at least as
    well as each workload's does. None when a workload was not timed against ``baseline``."""
    from kbv.batch.baseline_cache import measurement_from_dict

    lows, highs = [], []
    for w in workloads:
        timing = w.get("timing") or {}
        if "candidate" not in timing or baseline not in timing:
            return None
        iv = _interval(v, baseline, measurement_from_dict(timing["candidate"]), measurement_from_dict(timing[baseline]),
                       w.get("timed_calls_per_round"), confidence, resamples, salt=f":{w.get('name')}")
        if iv is None or iv[0] <= 0:
            return None
        lows.append(math.log(iv[0]))
        highs.append(math.log(iv[1]))
    return math.exp(sum(lows) / len(lows)), math.exp(sum(highs) / len(highs))


def speedup_noisy(v: Verdict, baseline: str) -> bool:
    """The candidate's or the baseline's measurement is too noisy to rank (``Measurement.noisy``)."""
    return any(m is not None and m.noisy for m in (v.timing.get("candidate"), v.timing.get(baseline)))


# Sample selection -------------------------------------------------------------------------------

def verified_speedup(v: Verdict, baseline: str) -> float | None:
    """Speedup of a PASS sample vs ``baseline`` (None for any other status or when not timed)."""
    return v.speedup.get(baseline) if v.status is Status.PASS else None


def nominal_speedup(v: Verdict, baseline: str) -> float | None:
    """Speedup the original protocol would credit: ``speedup``, else ``unverified_speedup``."""
    s = v.speedup.get(baseline)
    return s if s is not None else v.unverified_speedup.get(baseline)


def nominal_correct(v: Verdict) -> bool:
    """Correct under the original KernelBench protocol: ran and passed every nominal set."""
    return v.status.ran and v.nominal_passed


def _candidate_median(v: Verdict) -> float:
    m = v.timing.get("candidate")
    return m.median_ms if m is not None else math.inf


def fastest(samples: Iterable[Verdict], speed: Callable[[Verdict], float | None]) -> Verdict | None:
    """The sample with the largest ``speed(v)``; samples without a speed rank last, then by the
    candidate's median time. None for no samples."""
    best, best_rank = None, None
    for v in samples:
        s = speed(v)
        rank = (s is not None, s if s is not None else 0.0, -_candidate_median(v))
        if best_rank is None or rank > best_rank:
            best, best_rank = v, rank
    return best


def finite_pos(x: float | None) -> float | None:
    """``x`` when it is a finite positive ratio, else None."""
    return x if x is not None and math.isfinite(x) and x > 0 else None
