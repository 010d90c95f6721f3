"""Findings from the candidate's timed calls alone (no re-measure needed)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from kbv.model.findings import finding
from kbv.model.records import Finding, Severity
#: judged timed calls this many times slower than the others are named (:func:`plan_leak`).
PLAN_LEAK_RATIO = 3.0


def plan_leak(judged_ms: Sequence[float], other_ms: Sequence[float]) -> tuple[list | None, Finding | None]:
    """Judged timed calls systematically slower than the others would mean the candidate knew
    which calls are judged (taxonomy 5, 6): the plan is chosen on the trusted side and never
    sent, so this is evidence of a leak, a WARNING (median of the judged calls over
    PLAN_LEAK_RATIO × the others', with at least two of each).

    Returns ([judged median, other median] in ms or None with fewer than two of either, the
    finding or None)."""
    if len(judged_ms) < 2 or len(other_ms) < 2:
        return None, None
    mk, mo = float(np.median(judged_ms)), float(np.median(other_ms))
    found = None
    if mo > 0 and mk > PLAN_LEAK_RATIO * mo:
        found = finding("timing:plan-leak", (5, 6), Severity.WARNING,
                             f"the timed calls kbv judged took {mk:.4g} ms (median of {len(judged_ms)}), the others "
                             f"{mo:.4g} ms (median of {len(other_ms)}): work done only where it is checked")
    return [mk, mo], found


def implausible_times(times_ms: Sequence[float]) -> list[float]:
    """The candidate's timed-call figures that are not finite and positive (taxonomy 7)."""
    return [t for t in times_ms if not (math.isfinite(t) and t > 0)]
