"""Paired comparison of two runs over the problems both solved: how much faster one run's kernels
are than the other's, problem by problem, with a bootstrap interval (pure functions, no I/O).

For runs A and B (same baseline, same batch): the problems both runs count (both denominators)
are their common problems; of those, the ones where each run has a best correct speedup
(:attr:`kbv.batch.metrics.ProblemOutcome.best_speedup`) are paired, and the comparison is the
geometric mean over them of ``speedup_A / speedup_B`` (above 1: A's kernels are faster), with the
95 % percentile-bootstrap interval of that
geomean over problems (:func:`kbv.model.intervals.geomean_interval`, seeded from the two run
names and the baseline, so a report is reproducible). An interval that holds 1 says the batch
cannot tell the two runs apart on speed; under :data:`MIN_PAIRED` paired problems there is no
interval and no reading of which is faster (a bootstrap over one or two problems has a width of
zero whatever each speedup's own noise: a newcomer's report called one run faster on one noisy
problem, 2026-12-06). Problems one run solved and the other did not are
counted beside it, never folded into the ratio (a correctness difference, not a speed one).

Unlike the leaderboard's per-run geomeans, which average over different sets of problems when
the runs solve different ones, this compares like with like.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from itertools import combinations

from kbv.batch.metrics import BatchMetrics, RunMetrics
from kbv.batch.scoring import geomean
from kbv.model.intervals import INTERVAL_CONFIDENCE, geomean_interval


#: the fewest paired problems a comparison reads a winner from (kbv choice: a percentile bootstrap
#: over problems needs a spread of them to mean anything).
MIN_PAIRED = 3


@dataclass(frozen=True)
class RunComparison:
    """Run A against run B over their common problems (see the module doc)."""

    run_a: str
    run_b: str
    baseline: str  #: both runs' speedups are against this baseline.
    common: int  #: problems both runs count.
    paired: int  #: common problems where both runs have a best correct speedup: the n of the ratio.
    only_a: int  #: common problems only A has a correct speedup for.
    only_b: int  #: common problems only B has a correct speedup for.
    geomean_ratio: float | None  #: geomean over the paired problems of speedup_A / speedup_B (×); None if none.
    interval: tuple[float, float] | None  #: its 95 % bootstrap interval (×); None under MIN_PAIRED pairs.
    confidence: float = INTERVAL_CONFIDENCE

    @property
    def reading(self) -> str:
        """``A faster``, ``B faster``, ``no clear difference`` (the interval holds 1), ``too few
        problems to tell`` (under :data:`MIN_PAIRED`) or ``no problem solved by both``, with the
        run names."""
        if self.geomean_ratio is None:
            return "no problem solved by both"
        if self.interval is None:
            return f"too few problems to tell ({self.paired} solved by both, fewer than {MIN_PAIRED})"
        lo, hi = self.interval
        if lo > 1.0:
            return f"{self.run_a or '(unnamed)'} faster"
        if hi < 1.0:
            return f"{self.run_b or '(unnamed)'} faster"
        return "no clear difference"


def _seed(a: str, b: str, baseline: str) -> int:
    return int(hashlib.sha256(f"paired:{a}:{b}:{baseline}".encode()).hexdigest()[:15], 16)


def compare_runs(a: RunMetrics, b: RunMetrics, baseline: str) -> RunComparison:
    """Run ``a`` against run ``b`` over all levels (see the module doc)."""
    oa = {o.problem_key: o for o in a.overall.outcomes}
    ob = {o.problem_key: o for o in b.overall.outcomes}
    common = sorted(oa.keys() & ob.keys())
    pairs = [(oa[k].best_speedup, ob[k].best_speedup) for k in common]
    both = [(x, y) for x, y in pairs if x is not None and y is not None and x > 0 and y > 0]
    ratios = [x / y for x, y in both]
    interval = geomean_interval(ratios, _seed(a.run, b.run, baseline)) if len(ratios) >= MIN_PAIRED else None
    return RunComparison(
        run_a=a.run, run_b=b.run, baseline=baseline, common=len(common), paired=len(both),
        only_a=sum(x is not None and y is None for x, y in pairs),
        only_b=sum(x is None and y is not None for x, y in pairs),
        geomean_ratio=geomean(ratios), interval=interval)


def paired_comparisons(metrics: BatchMetrics) -> tuple[RunComparison, ...]:
    """Every pair of runs of ``metrics`` (A before B in run-name order)."""
    return tuple(compare_runs(a, b, metrics.baseline) for a, b in combinations(metrics.runs, 2))


__all__ = ["MIN_PAIRED", "RunComparison", "compare_runs", "paired_comparisons"]
