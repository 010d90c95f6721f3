"""Memory that grows with every forward call of the candidate and does not level off: a leak
(issue 24). A pure rule over the trusted side's readings of what the candidate worker's process
tree holds (:mod:`kbv.processes.held_memory`, read by the reference worker, never a figure the
candidate reports): on cuda its device bytes, on both devices its resident set, each sampled
after every timing round (:mod:`kbv.pipeline.timing_rounds`, which counts the forward calls each
round's requests made: warmup, timed and the repeat call). The first reading follows round 1, so
the one-time allocations of the timing path's first calls (the first output slot's pages, the
call buffers' first use) are behind it; three rounds (``EvalConfig.timing_rounds``' default) give
the three readings the rule needs, the calls of one, two and three rounds: N, 2N and 3N.

The rule compares the growth over the later half of the calls with what honest memory can do:

* growth that levels off (the CUDA caching allocator reserving segments while it warms up, a
  cache of the candidate's that fills, glibc's heap reaching its working size) slows down: the
  later half's rate must be at least :data:`LEVEL_OFF_SHARE` of the earlier half's;
* kbv's own held outputs: the worker keeps each timed call's outputs alive for 1 to
  :data:`kbv.sandbox.timed.HOLD_CALLS` later calls (earlier ones only while they fit in
  ``EvalConfig.held_output_bytes``), a number drawn per call, so two samples can differ by up to
  that many outputs (:func:`held_allowance`);
* the allocator's granularity (:data:`GRANULE_BYTES`): the CUDA caching allocator takes memory
  from the driver in segments, 2 MiB for blocks up to 1 MiB and 20 MiB for blocks of 1-10 MiB
  (larger ones rounded up to 2 MiB each; ``c10/cuda/CUDACachingAllocator.cpp``: ``kSmallBuffer``,
  ``kLargeBuffer``, ``kRoundLarge``), so honest steady-state memory can step by a segment when the
  held outputs' count reaches a new high or the pool fragments; two large segments cover the
  rounding of the held outputs plus one such step;
* noise: under :data:`LEAK_MIN_BYTES_PER_CALL` a call.

The later half's growth (its last sample less the largest sample up to its start) must exceed the
held outputs and the granularity together, so a bounded amount never reads as a leak however it
is spread over the calls, and memory given back and taken again is not growth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from kbv.model.findings import finding
from kbv.model.records import Finding, Severity
from kbv.sandbox.timed import HOLD_CALLS

MiB = 1 << 20
#: the least growth per call (bytes) over the later half taken as a leak: over the page-level noise
#: of an honest worker's resident set (glibc's heap, Python's arenas; kbv choice, no honest row of
#: tests/e2e/test_honest.py reached it).
LEAK_MIN_BYTES_PER_CALL = 64 << 10
#: growth that levels off slows to under this share of its earlier rate; a leak does not (kbv choice).
LEVEL_OFF_SHARE = 0.5
#: what the allocator's granularity may add to honest memory without a leak, per source (see the
#: module doc): two of the CUDA caching allocator's 20 MiB large segments for device bytes; none for
#: the resident set, which moves by 4 KiB pages (its noise is :data:`LEAK_MIN_BYTES_PER_CALL`'s).
GRANULE_BYTES = {"nvml": 2 * 20 * MiB, "device": 2 * 20 * MiB, "proc": 0}
#: what each source reads, for the finding's text.
SOURCE_TEXT = {"nvml": "device memory (NVML, per process)",
               "device": "device memory (the device's used memory less kbv's own)",
               "proc": "resident memory (VmRSS)"}


@dataclass(frozen=True)
class GrowthSeries:
    """What the candidate worker's process tree held after successive numbers of forward calls."""

    #: ``(forward calls so far, bytes held)`` in order; bytes None where the reading failed.
    samples: tuple[tuple[int, int | None], ...]
    #: ``nvml`` (device bytes per process), ``device`` (the device's used bytes less the reference
    #: worker's own) or ``proc`` (resident set, VmRSS).
    source: str
    #: bytes of one call's outputs (the reference's).
    output_bytes: int = 0
    #: ``EvalConfig.held_output_bytes``: the most bytes of earlier timed outputs the worker keeps.
    held_bytes: int = 0


def held_allowance(output_bytes: int, held_bytes: int) -> int:
    """The most bytes of kbv's own held outputs alive in the worker at once: the current call's, and
    earlier ones for up to :data:`HOLD_CALLS` calls while they fit in ``held_bytes``
    (:meth:`kbv.sandbox.timed.TimedRequests.timed_call`)."""
    out = max(0, int(output_bytes))
    return min(HOLD_CALLS * out, max(0, int(held_bytes))) + out


def _points(samples: Sequence[tuple[int, int | None]]) -> list[tuple[int, int]] | None:
    """The samples as ints, when there are three or more, none failed and the calls strictly rise."""
    if len(samples) < 3 or any(b is None for _, b in samples):
        return None
    pts = [(int(c), int(b)) for c, b in samples]
    if any(b[0] <= a[0] for a, b in zip(pts, pts[1:])):
        return None
    return pts


def _split(pts: list[tuple[int, int]]) -> int:
    """Index of the sample that splits the calls in two halves: the inner one nearest the middle."""
    middle = (pts[0][0] + pts[-1][0]) / 2
    return min(range(1, len(pts) - 1), key=lambda i: abs(pts[i][0] - middle))


def late_rate(series: GrowthSeries) -> float | None:
    """Bytes per call over the later half of the calls (evidence ``rate_bytes_per_call``); None with
    fewer than three good samples."""
    pts = _points(series.samples)
    if pts is None:
        return None
    m = _split(pts)
    return (pts[-1][1] - pts[m][1]) / (pts[-1][0] - pts[m][0])


def memory_growth(series: GrowthSeries) -> Finding | None:
    """WARNING ``memory:growth`` when the worker tree's memory grows with its calls and does not
    level off (a bug, not a cheat: the status is unchanged).

    Needs three or more samples whose calls strictly rise, none failed (else None). The samples are
    split at the inner one nearest half the calls. A leak when all hold:

    * the later half's rate is at least :data:`LEAK_MIN_BYTES_PER_CALL`;
    * it is at least :data:`LEVEL_OFF_SHARE` × the earlier half's rate;
    * the later half's growth above the largest earlier sample exceeds :func:`held_allowance` plus
      :data:`GRANULE_BYTES` of the source.

    Returns the finding, with the rate in bytes per call, or None."""
    pts = _points(series.samples)
    if pts is None:
        return None
    m = _split(pts)
    (c0, b0), (cm, bm), (cn, bn) = pts[0], pts[m], pts[-1]
    late = (bn - bm) / (cn - cm)
    early = (bm - b0) / (cm - c0)
    grown = bn - max(b for _, b in pts[:m + 1])
    allowed = held_allowance(series.output_bytes, series.held_bytes) + GRANULE_BYTES.get(series.source, 0)
    if late < LEAK_MIN_BYTES_PER_CALL or late < LEVEL_OFF_SHARE * early or grown <= allowed:
        return None
    what = SOURCE_TEXT.get(series.source, series.source)
    return finding("memory:growth", (), Severity.WARNING,
                   f"the candidate worker's {what} grew by {late / MiB:.2f} MiB a call ({late:.0f} bytes) over "
                   f"its last {cn - cm} calls ({(bn - b0) / MiB:.1f} MiB over {cn - c0} calls; {grown / MiB:.1f} MiB "
                   f"over its earlier peak, more than the {allowed / MiB:.1f} MiB that kbv's held outputs and the "
                   "allocator's granularity explain) and does not level off: a per-call leak")


def evidence(series: GrowthSeries) -> dict:
    """``{"samples": [[calls, bytes], ...], "source": ..., "rate_bytes_per_call": ...}``."""
    rate = late_rate(series)
    return {"samples": [[int(c), None if b is None else int(b)] for c, b in series.samples],
            "source": series.source, "rate_bytes_per_call": None if rate is None else round(rate, 1)}


def judge(host: Sequence[tuple[int, int | None]], device: Sequence[tuple[int, int | None]], source: str | None,
          output_bytes: int, held_bytes: int, note: str = "") -> tuple[dict, list[Finding]]:
    """The evidence ``memory_growth`` and the findings of one worker's samples
    (:class:`kbv.processes.held_memory.HeldMemory`): ``host`` (``proc``) and, with a ``source``,
    ``device``. The evidence is the device series' (:func:`evidence`) with the host's under
    ``"host"``, or the host's alone; ``note`` (why no device series, or why not NVML) under
    ``"device_note"``. Each series is judged by :func:`memory_growth`."""
    series = [GrowthSeries(tuple(host), "proc", output_bytes, held_bytes)]
    if source is not None:
        series.insert(0, GrowthSeries(tuple(device), source, output_bytes, held_bytes))
    record = evidence(series[0])
    if len(series) > 1:
        record["host"] = evidence(series[1])
    if note:
        record["device_note"] = note
    return record, [f for f in (memory_growth(s) for s in series) if f is not None]
