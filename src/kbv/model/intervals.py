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


def ratio_interval(base_ms: Sequence[float], cand_ms: Sequence[float], seed: int, *,
                   confidence: float = INTERVAL_CONFIDENCE, resamples: int = INTERVAL_RESAMPLES) -> tuple[float, float]:
    """Percentile-bootstrap interval (×) of median(``base_ms``) / median(``cand_ms``) (see the module doc).

    Raises:
        ValueError: either side is empty, or ``confidence`` is not in (0, 1).
    """
    if not base_ms or not cand_ms:
        raise ValueError("ratio_interval needs samples on both sides")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), not {confidence!r}")
    return _ratio_interval(tuple(float(t) for t in base_ms), tuple(float(t) for t in cand_ms), int(seed),
                           float(confidence), int(resamples))


def relative_half_width(base_ms: Sequence[float], cand_ms: Sequence[float], seed: int) -> float:
    """Half the width of the 95 % interval over the speedup itself: ``(hi - lo) / 2 / speedup``
    (0.05: the interval spans about ±5 % of the figure quoted)."""
    lo, hi = ratio_interval(base_ms, cand_ms, seed)
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


__all__ = ["INTERVAL_CONFIDENCE", "INTERVAL_RESAMPLES", "interval_seed", "ratio_interval", "relative_half_width",
           "geomean_interval"]
