"""Rules on the candidate worker's memory over its timed calls (:mod:`kbv.pipeline.timing_rounds`):
memory that grows with every call and does not level off, a leak. Pure functions of the trusted
side's readings (the worker's resident set from /proc after each timing round)."""

from __future__ import annotations

from typing import Sequence

from kbv.model.findings import finding
from kbv.model.records import Finding, Severity

#: the least growth per call (bytes) taken as a leak whatever the outputs' size: over the per-call
#: noise of glibc's heap on an honest kernel (kbv choice).
LEAK_MIN_BYTES_PER_CALL = 64 << 10
#: a leak grows, per call, by at least this share of one call's output bytes (kbv choice: a kernel
#: that keeps every output it returns grows by one output a call).
LEAK_OUTPUT_SHARE = 0.5
#: growth that levels off (a cache filling, an allocator warming up) slows to under this share of
#: its earlier rate; a leak does not (kbv choice).
LEVEL_OFF_SHARE = 0.5


def memory_growth(samples: Sequence[tuple[int, int]], output_bytes: int) -> Finding | None:
    """WARNING ``memory:growth`` when the worker's memory grows with its calls and does not level off.

    Args:
        samples: ``(candidate calls so far, resident bytes)`` after each timing round, in order
            (three or more are needed; fewer, or a reading missing, give None).
        output_bytes: bytes of one call's outputs (the reference's).
    Returns:
        The finding, with the rate in bytes per call, or None: the growth per call over the later half
        of the calls is under :data:`LEAK_MIN_BYTES_PER_CALL` or :data:`LEAK_OUTPUT_SHARE` of the
        outputs, or under :data:`LEVEL_OFF_SHARE` of the rate over the earlier half.
    """
    pts = [(int(c), int(b)) for c, b in samples if b is not None]
    if len(pts) < 3 or len(pts) != len(samples):
        return None
    first, mid, last = pts[0], pts[len(pts) // 2], pts[-1]
    if not (first[0] < mid[0] < last[0]):
        return None
    late = (last[1] - mid[1]) / (last[0] - mid[0])
    early = (mid[1] - first[1]) / (mid[0] - first[0])
    if late < max(LEAK_MIN_BYTES_PER_CALL, LEAK_OUTPUT_SHARE * output_bytes) or late < LEVEL_OFF_SHARE * early:
        return None
    return finding("memory:growth", (), Severity.WARNING,
                   f"the candidate worker's resident memory grew by {late / 2**20:.2f} MiB a call over its last "
                   f"{last[0] - mid[0]} calls ({(last[1] - first[1]) / 2**20:.1f} MiB over {last[0] - first[0]} "
                   "calls) and does not level off: a per-call leak")
