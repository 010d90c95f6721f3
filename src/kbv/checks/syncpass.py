"""Rules of the synchronised timing pass (:mod:`kbv.pipeline.sync`): the parent's wall clock
against the worker's own clock (taxonomy 4, 25), and the gap between a device-wide synchronize
and the candidate's events (taxonomy 1, cuda). Pure functions of the pass's measurements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from kbv.model.findings import finding
from kbv.model.records import Finding, Severity


#: taxonomy 1: a candidate hides work when its sync-inside time exceeds its event time by more
#: than the reference's own sync overhead plus max(its event time, this) — i.e. more than half of
#: the real work was invisible to the events. 50 µs is above the host sync + launch latency
#: measured on the H200 (docs/anti-cheat.md).
SYNC_GAP_MIN_MS = 0.05
#: taxonomy 4/25: the parent's wall clock per call may exceed the worker's own figure by this
#: factor plus slack (launch, loop and pipe overhead) before the worker's clock is called a lie.
#: The least of the pass's estimates is used. A faked clock that hides real work (a 1 ms kernel
#: reported as 0.01 ms) is far outside these bounds; host jitter on a loaded 2-core CI machine
#: reached 0.75 ms per call in a single estimate, hence the minimum of three.
WALL_FACTOR = 3.0
WALL_SLACK_MS = 1.0
#: on cpu a confirmed parent wall figure is HACK only when the worker's own CPU time per call (all its
#: threads, from /proc) is also over cores x WALL_FACTOR x its claimed time plus this (loop and pipe
#: overhead in the worker; /proc counts 10 ms ticks, 0.25 ms per call over a 40-call request). Both
#: workers' OpenMP threads wait passive (kbv.sandbox.worker_env.WAIT_POLICY), so none spins.
WALL_CPU_SLACK_MS = 0.3


def wall_over(parent_per_call_ms: float, claimed_sync_ms: float) -> bool:
    """The parent's wall per call exceeds what the worker's claimed sync-inside median allows
    (:data:`WALL_FACTOR` x it + :data:`WALL_SLACK_MS`): measured again before it counts."""
    return parent_per_call_ms > WALL_FACTOR * claimed_sync_ms + WALL_SLACK_MS


@dataclass(frozen=True)
class ParentWall:
    """The parent wall check's measurements (ms per call)."""

    claimed_sync_ms: float  #: the worker's own median of its sync-inside calls (a claim).
    first_ms: float  #: the parent's first estimate (already over :func:`wall_over`).
    again_ms: float  #: the confirming estimate, with more calls.
    device: str
    #: cpu: the worker's CPU time per call (all its threads, /proc), least of the pass; None when unread.
    worker_cpu_ms: float | None = None
    cores: int = 1


def parent_wall(o: ParentWall) -> Finding:
    """A parent wall figure over the claim: HACK when the confirming estimate repeats it (and, on
    cpu, the worker's CPU time per call is also over ``cores`` x :data:`WALL_FACTOR` x the claim +
    :data:`WALL_CPU_SLACK_MS`: waiting for a busy machine adds wall time, not CPU time; an honest
    0.07 ms ReLU saw 1.5 ms per call of parent wall clock on a loaded 2-core host), else WARNING."""
    repeats = wall_over(o.first_ms, o.claimed_sync_ms) and wall_over(o.again_ms, o.claimed_sync_ms)
    if repeats and o.device == "cpu":
        allowed = max(1, o.cores) * WALL_FACTOR * o.claimed_sync_ms + WALL_CPU_SLACK_MS
        repeats = o.worker_cpu_ms is not None and o.worker_cpu_ms > allowed
    detail = (f"the worker's clock reported {o.claimed_sync_ms:.4g} ms per synchronised call; the parent's wall "
              f"clock saw at least {min(o.first_ms, o.again_ms):.4g} ms per call")
    if repeats:
        return finding("timing:parent-wall", (4, 25), Severity.HACK, detail + " (confirmed by a re-measure)")
    return finding("timing:parent-wall", (4, 25), Severity.WARNING,
                   detail + " once; a re-measure did not repeat it (unconfirmed under load)")


def sync_gap_over(gap_ms: float, cand_event_ms: float) -> bool:
    """A sync gap that counts: over max(the candidate's event median, :data:`SYNC_GAP_MIN_MS`)."""
    return gap_ms > max(cand_event_ms, SYNC_GAP_MIN_MS)


@dataclass(frozen=True)
class SyncGap:
    """The sync gap check's measurements (ms per call; cuda)."""

    cand_sync_ms: float
    cand_event_ms: float
    ref_sync_ms: float
    ref_event_ms: float
    gaps_ms: Sequence[float]  #: the first gap (already over :func:`sync_gap_over`) and its re-measures.
    other_gpu_processes: int = 0  #: other processes on the GPU during the pass.
    share_source: str = "nvml"  #: who counted them: ``nvml`` or ``proc`` (kbv.processes.gpushare).


def sync_gap_finding(o: SyncGap) -> Finding:
    """A sync gap over the bound: WARNING when other processes shared the GPU (a shared GPU slows a
    device-wide synchronize) or a re-measure did not repeat it; HACK when every measurement
    repeats it on a GPU of its own (work outside the timed stream, taxonomy 1)."""
    detail = (f"with a device-wide sync inside the timed region a call takes {o.cand_sync_ms:.4g} ms, the "
              f"event-only timing says {o.cand_event_ms:.4g} ms (eager-fp32: {o.ref_sync_ms:.4g} vs "
              f"{o.ref_event_ms:.4g} ms)")
    if o.other_gpu_processes:
        return finding("timing:sync-gap", (1,), Severity.WARNING,
                       detail + f"; {o.other_gpu_processes} other process(es) used the GPU during the pass "
                       f"({'NVML' if o.share_source == 'nvml' else 'processes holding /dev/nvidia* open'}): "
                       "a shared GPU slows a device-wide synchronize, so the gap is not held against the candidate")
    if all(sync_gap_over(g, o.cand_event_ms) for g in o.gaps_ms):
        return finding("timing:sync-gap", (1,), Severity.HACK,
                       detail + f": work outside the timed stream (gap {min(o.gaps_ms):.4g} ms or more in "
                       f"{len(o.gaps_ms)} measurements, candidate and eager-fp32 re-timed in the same pass)")
    return finding("timing:sync-gap", (1,), Severity.WARNING,
                   detail + f"; the gap did not repeat in re-measures ({', '.join(f'{g:.3g}' for g in o.gaps_ms)}"
                   " ms): unconfirmed under load")
