"""Findings from the candidate's timed calls alone (no re-measure needed)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from kbv.model.findings import finding
from kbv.model.records import Finding, Severity
#: judged timed calls this many times slower than the others are named (:func:`plan_leak`).
PLAN_LEAK_RATIO = 3.0
#: taxonomy 11 (:func:`repeat_gain`): the cheapest call on the previous call's values with one
#: element changed this many times cheaper than the cheapest call on fresh values, and by at
#: least REPEAT_GAIN_MIN_MS, is a diff-and-patch cache (kbv choice: an honest kernel's cost does
#: not depend on whether its values repeat the previous call's; a patch cache on an 8 x 128^3
#: batched matmul answered the repeat 9-13x cheaper on a 2-core machine at load 10).
REPEAT_GAIN_RATIO = 3.0
REPEAT_GAIN_MIN_MS = 0.05


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


def repeat_gain(fresh_ms: Sequence[float], repeat_ms: Sequence[float]) -> bool:
    """The candidate answers calls on the previous call's values (one element per tensor changed)
    far cheaper than calls on fresh values: ``min(repeat_ms)`` × :data:`REPEAT_GAIN_RATIO` at most
    ``min(fresh_ms)``, and :data:`REPEAT_GAIN_MIN_MS` under it (taxonomy 11). Minima, since noise
    (a loaded machine, a preempted pool thread) only ever adds to a call's cost. False when either
    list is empty."""
    if not fresh_ms or not repeat_ms:
        return False
    f, r = min(fresh_ms), min(repeat_ms)
    return r * REPEAT_GAIN_RATIO <= f and f - r >= REPEAT_GAIN_MIN_MS
