"""Confidence intervals of a speedup from raw per-call times (no torch).

The speedup of a candidate against a baseline is median(baseline times) / median(candidate
times). Its interval is the percentile bootstrap (Efron & Tibshirani 1993, *An Introduction to the
Bootstrap*, §13.3): each side resampled with replacement, independently (the calls of a subject
are treated as exchangeable; the interleaved rounds make drift widen the interval rather than
hide), and the ``(1 ± confidence) / 2`` percentiles of the resampled ratios taken. Unpaired:
candidate call *i* and baseline call *i* are not measured under the same conditions in any way a
pairing could use. The generator is seeded from the problem, the candidate and the baseline, so
the same samples give the same interval in the pipeline's adaptive stop
(:mod:`kbv.pipeline.adaptive`) and in the report (:func:`kbv.batch.metrics.speedup_interval`).
"""

from __future__ import annotations

import functools
import hashlib
import math
from statistics import NormalDist
from typing import Sequence

import numpy as np

#: confidence of every speedup interval kbv records or shows.
INTERVAL_CONFIDENCE = 0.95
#: bootstrap resamples per interval (2,000: percentile intervals at 95 % need ~1,000-2,000, Efron
#: & Tibshirani §14.3).
INTERVAL_RESAMPLES = 2000


def interval_seed(problem_sha256: str, candidate_sha256: str, baseline: str) -> int:
    """The bootstrap generator's seed for one (problem, candidate, baseline)."""
    return int(hashlib.sha256(f"{problem_sha256}:{candidate_sha256}:{baseline}".encode()).hexdigest()[:15], 16)


@functools.lru_cache(maxsize=65536)
def _ratio_interval(base_ms: tuple[float, ...], cand_ms: tuple[float, ...], seed: int, confidence: float,
                    resamples: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    b = np.asarray(base_ms)
    c = np.asarray(cand_ms)
    rb = np.median(b[rng.integers(0, b.size, (resamples, b.size))], axis=1)
    rc = np.median(c[rng.integers(0, c.size, (resamples, c.size))], axis=1)
    tail = 100 * (1 - confidence) / 2
    lo, hi = np.percentile(rb / rc, [tail, 100 - tail])
    return float(lo), float(hi)


#: the least standard error of a log speedup an interval is given, per device (kbv choice): what a
#: rerun in a fresh process adds that no resampling of one run sees (clocks, placement, a neighbour
#: on the GPU). Checked against reruns on the H200 by bench/rerun_coverage.py (docs/gpu-runs.md).
RERUN_LOG_SE = {"cuda": 0.03, "cpu": 0.08}


def between_rounds_se(base_ms: Sequence[float], cand_ms: Sequence[float], blocks: Sequence[int]) -> float:
    """Standard error of the mean log speedup over the timing rounds (each round's speedup:
    median(baseline) / median(candidate) of that round's calls; ``blocks``: calls per round, the same
    split on both sides). 0 with fewer than two rounds or when the split does not fit the samples:
    rounds run at different moments, so their spread is the variation of conditions within a run,
    which calls of one round, resampled, do not show."""
    blocks = [int(b) for b in blocks]
    if len(blocks) < 2 or sum(blocks) != len(base_ms) or sum(blocks) != len(cand_ms) or min(blocks) < 1:
        return 0.0
    logs, at = [], 0
    for n in blocks:
        logs.append(math.log(float(np.median(base_ms[at:at + n])) / float(np.median(cand_ms[at:at + n]))))
        at += n
    return float(np.std(logs, ddof=1) / math.sqrt(len(logs)))


def ratio_interval(base_ms: Sequence[float], cand_ms: Sequence[float], seed: int, *,
                   confidence: float = INTERVAL_CONFIDENCE, resamples: int = INTERVAL_RESAMPLES,
                   blocks: Sequence[int] = (), floor_se: float = 0.0) -> tuple[float, float]:
    """Interval (×) of median(``base_ms``) / median(``cand_ms``) (see the module doc): the percentile
    bootstrap of the calls; with ``blocks`` (calls per timing round) or ``floor_se``, widened on the
    log scale to ``z * sqrt(se_calls^2 + se_rounds^2 + floor_se^2)`` around the point, where se_calls is
    the bootstrap interval's half-width over z and se_rounds :func:`between_rounds_se`: an interval
    meant to cover a rerun, not only a resampling of this run's calls.

    Raises:
        ValueError: either side is empty, or ``confidence`` is not in (0, 1).
    """
    if not base_ms or not cand_ms:
        raise ValueError("ratio_interval needs samples on both sides")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), not {confidence!r}")
    lo, hi = _ratio_interval(tuple(float(t) for t in base_ms), tuple(float(t) for t in cand_ms), int(seed),
                             float(confidence), int(resamples))
    se_rounds = between_rounds_se(list(base_ms), list(cand_ms), blocks) if blocks else 0.0
    if se_rounds <= 0 and floor_se <= 0:
        return lo, hi
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    point = float(np.median(base_ms)) / float(np.median(cand_ms))
    se_calls = (math.log(hi) - math.log(lo)) / (2 * z) if lo > 0 and hi > 0 else 0.0
    se = math.sqrt(se_calls ** 2 + se_rounds ** 2 + float(floor_se) ** 2)
    return min(lo, point * math.exp(-z * se)), max(hi, point * math.exp(z * se))


def relative_half_width(base_ms: Sequence[float], cand_ms: Sequence[float], seed: int,
                        blocks: Sequence[int] = ()) -> float:
    """Half the width of the 95 % interval over the speedup itself: ``(hi - lo) / 2 / speedup``
    (0.05: the interval spans about ±5 % of the figure quoted); ``blocks`` as for :func:`ratio_interval`
    (the rerun floor is left out: the adaptive stop cannot narrow it)."""
    lo, hi = ratio_interval(base_ms, cand_ms, seed, blocks=blocks)
    point = float(np.median(base_ms)) / float(np.median(cand_ms))
    return (hi - lo) / 2 / point


def geomean_interval(ratios: Sequence[float], seed: int, *, confidence: float = INTERVAL_CONFIDENCE,
                     resamples: int = INTERVAL_RESAMPLES) -> tuple[float, float]:
    """Percentile-bootstrap interval (×) of the geometric mean of ``ratios`` (one per problem,
    each > 0): the problems resampled with replacement ``resamples`` times (Efron & Tibshirani
    1993, §13.3), the ``(1 ± confidence) / 2`` percentiles of the resampled geomeans. A paired
    comparison of two runs passes their per-problem speedup ratios (:mod:`kbv.batch.paired`).

    Raises:
        ValueError: no ratio, a ratio that is not finite and > 0, or ``confidence`` not in (0, 1).
    """
    values = np.asarray([float(r) for r in ratios], dtype=float)
    if values.size == 0 or not np.all(np.isfinite(values) & (values > 0)):
        raise ValueError("geomean_interval needs finite ratios > 0")
    logs = np.log(values)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), not {confidence!r}")
    rng = np.random.default_rng(int(seed))
    means = logs[rng.integers(0, logs.size, (int(resamples), logs.size))].mean(axis=1)
    tail = 100 * (1 - confidence) / 2
    lo, hi = np.exp(np.percentile(means, [tail, 100 - tail]))
    return float(lo), float(hi)


__all__ = ["INTERVAL_CONFIDENCE", "INTERVAL_RESAMPLES", "RERUN_LOG_SE", "between_rounds_se", "interval_seed",
           "ratio_interval", "relative_half_width",
           "geomean_interval"]
