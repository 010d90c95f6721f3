"""The candidate's kernel time read by CUPTI beside its CUDA-event time (issue 24): a pure rule.

The op-count request runs the forward under ``torch.profiler`` (CUPTI activity tracing,
:func:`kbv.sandbox.kernels.kernel_profile`): one un-profiled warm-up call, then three calls back to
back on one input set. Their kernels', memcpys' and memsets' device time per call, overlapping
activities counted once (the union of their [start, end] intervals: kernels on several streams
run at once, and a sum would count that time twice), is ``kernel_ms_per_call``. The timed calls'
CUDA events bracket every call on the timing stream (:mod:`kbv.sandbox.timer`): whatever the call
runs there, or joins back to it, lies between them, and a launch only adds to the span. So an
honest call's event median is at least its kernels' time; events well under it mean the timed
window missed work of the call (kernels left running on a stream the end event does not wait for,
work moved out of the timed calls) or reported times that no device measured.

Both figures come from the candidate's own process, so a disagreement is a WARNING, never an
accusation: what the trusted side measures itself is the bound pass's
(:mod:`kbv.checks.bound_rules`).

The cover (what an honest call may show): the profiled calls run warm (no L2 flush, one input set
repeated), which only makes them faster than the timed calls; what can make them slower is the
GPU's clock, which rises with load and can be lower in the profiled calls, which follow the
trusted side's own work, than in the timed rounds. :data:`COVER_SHARE` takes a call as
disagreeing only when its events cover under half its kernels' time (a clock at least half the
timed rounds' covers it), and :data:`COVER_MS` leaves kernels of tens of microseconds alone,
where the clock ramp and the events' own resolution (about 0.5 µs, CUDA's ``cudaEventElapsedTime``)
weigh most.
"""

from __future__ import annotations

import math

from kbv.model.findings import finding
from kbv.model.records import Finding, Severity

#: the events must cover at least this share of the kernels' time per call (kbv choice, see the
#: module doc: the profiled calls' clock at half the timed rounds' still passes).
COVER_SHARE = 0.5
#: and may fall short of it by this much besides (ms; kbv choice: 10 µs, twenty times the events'
#: resolution, so a kernel of tens of µs is never flagged by a clock that had not ramped up).
COVER_MS = 0.010


def _figure(x: object) -> float | None:
    """A finite non-negative number, or None (the worker's reply is decoded, not trusted)."""
    if type(x) not in (int, float):
        return None
    value = float(x)  # type: ignore[arg-type]
    return value if math.isfinite(value) and value >= 0 else None


def evidence(kernel_busy_us: object, event_median_ms: float | None) -> dict | None:
    """``{"kernel_ms_per_call": ..., "event_median_ms": ...}``, or None without a kernel figure."""
    busy = _figure(kernel_busy_us)
    if busy is None:
        return None
    return {"kernel_ms_per_call": busy / 1000.0, "event_median_ms": _figure(event_median_ms)}


def cupti_disagrees(kernel_ms_per_call: float | None, event_median_ms: float | None) -> Finding | None:
    """WARNING ``timing:cupti-disagrees`` when the timed calls' CUDA-event median is under
    :data:`COVER_SHARE` × the profiled calls' kernel time per call less :data:`COVER_MS`; None
    without both figures or when they agree."""
    kernel, event = _figure(kernel_ms_per_call), _figure(event_median_ms)
    if kernel is None or event is None or event >= COVER_SHARE * kernel - COVER_MS:
        return None
    return finding("timing:cupti-disagrees", (), Severity.WARNING,
                   f"the timed calls' CUDA-event median {event:.4g} ms is under {COVER_SHARE:g} × the "
                   f"{kernel:.4g} ms its kernels ran per call under CUPTI (less {COVER_MS * 1e3:g} µs): the "
                   "timed window misses work of the call, or its times were not measured on the device "
                   "(both figures are the candidate process's)")
