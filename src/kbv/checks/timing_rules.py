"""Findings from the candidate's timed calls alone (no re-measure needed)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from kbv.model.findings import finding
from kbv.model.records import Finding, Severity
#: CPU ms the candidate's stopped tree may still spend over one baseline block (:func:`ran_while_paused`;
#: kbv choice: a thread caught running at the stop finishes its time slice, a few ms at most).
PAUSED_CPU_SLACK_MS = 5.0
#: tries of a baseline block whose candidate tree ran while stopped; every try running is proof.
PAUSED_TRIES = 3
#: the stopped tree's CPU over every baseline block, as a share of their wall, that is proof with
#: over PAUSED_TRIES x the slack (kbv choice: an idle stopped worker spends none; a thread burning
#: through the stop spends about one core's worth).
PAUSED_SHARE = 0.25
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


#: the confirming test's significance (:func:`repeat_gain_confirmed`): the chance that an honest
#: kernel's follow-up calls, whose arms are drawn at random, rank this far apart (kbv choice).
REPEAT_CONFIRM_P = 0.005


def rank_sum_p(low: Sequence[float], high: Sequence[float]) -> float:
    """One-sided exact permutation p-value of the Mann-Whitney statistic U = #{(l, h): l < h}
    (ties count 1/2): over every way of splitting the pooled values into groups of the two sizes,
    the share whose U is at least the observed one. Distribution-free under the null hypothesis
    that the labels were assigned at random, whatever the noise (Mann & Whitney 1947). Enumerates
    every split, so meant for small groups (C(12, 6) = 924). 1.0 when either group is empty."""
    from itertools import combinations

    if not low or not high:
        return 1.0
    pooled = list(low) + list(high)

    def u(lo: Sequence[float], hi: Sequence[float]) -> float:
        return sum((a < b) + 0.5 * (a == b) for a in lo for b in hi)

    observed = u(low, high)
    n, count, total = len(pooled), 0, 0
    for pick in combinations(range(n), len(low)):
        chosen = set(pick)
        lo = [pooled[i] for i in pick]
        hi = [pooled[i] for i in range(n) if i not in chosen]
        count += u(lo, hi) >= observed - 1e-9
        total += 1
    return count / total


def repeat_gain_confirmed(fresh_ms: Sequence[float], repeat_ms: Sequence[float]) -> bool:
    """The confirming follow-up calls (:mod:`kbv.pipeline.repeat`) show a diff-and-patch cache:
    each follow-up comes right after a call on fresh values and is, by a secret draw, either that
    call's values with one more element changed (``repeat_ms``) or fresh values (``fresh_ms``).
    An honest kernel's two arms are then alike in everything but which values repeat, so a
    loaded machine slows both alike. True when the repeats rank below the fresh calls at
    :data:`REPEAT_CONFIRM_P` (:func:`rank_sum_p`) and their medians differ by
    :data:`REPEAT_GAIN_RATIO` and :data:`REPEAT_GAIN_MIN_MS`."""
    if not fresh_ms or not repeat_ms:
        return False
    f, r = float(np.median(fresh_ms)), float(np.median(repeat_ms))
    if not (r * REPEAT_GAIN_RATIO <= f and f - r >= REPEAT_GAIN_MIN_MS):
        return False
    return rank_sum_p(repeat_ms, fresh_ms) <= REPEAT_CONFIRM_P


#: the candidate's sync overhead (sync-inside minus event time) is compared with this many times
#: eager-fp32's, measured in the same pass: a shared GPU slowed the synchronize of both, 0.474 against
#: 0.035 ms for an honest fp16 GEMM and 0.283 against 0.015 ms for eager-fp32 beside the cuda suite on
#: the H200, a gap of 0.17 ms that a plain difference called hidden work (kbv choice).
SYNC_OVERHEAD_RATIO = 2.0


def sync_gap(cand_sync: float, cand_event: float, ref_sync: float, ref_event: float) -> float:
    """Work outside the timed stream, in ms: the candidate's sync overhead (its sync-inside time less
    its event time) over :data:`SYNC_OVERHEAD_RATIO` times eager-fp32's in the same pass. Hidden
    work adds its whole time to the candidate's overhead; a busy GPU multiplies both overheads."""
    return (cand_sync - cand_event) - SYNC_OVERHEAD_RATIO * max(ref_sync - ref_event, 0.0)


def repeat_gain_finding(detail: str, confirmed: bool) -> Finding:
    """A repeat gain (:func:`repeat_gain`) and its confirming follow-up calls (``detail``: the
    figures): HACK when :func:`repeat_gain_confirmed` (results cached across calls, stale or patched
    where the inputs changed, taxonomy 11), else a WARNING."""
    if confirmed:
        return finding("timing:repeat-gain", (11,), Severity.HACK,
                       f"{detail}: results cached across calls (a repeat answered at a fraction of a new "
                       "input's cost: stale, or patched where the inputs changed)")
    return finding("timing:repeat-gain", (11,), Severity.WARNING,
                   f"{detail}, not {REPEAT_GAIN_RATIO:g}x apart at p <= {REPEAT_CONFIRM_P:g}: unconfirmed")


#: taxonomy 7: a median under this fraction of the input-read floor is physically implausible.
ROOFLINE_MARGIN = 0.5


def roofline_suspect(candidate_ms: float, eager_ms: float | None, floor_ms: float) -> bool:
    """The candidate's median is under :data:`ROOFLINE_MARGIN` x the bytes-only floor ``floor_ms``,
    where the floor is meaningful (eager-fp32's own median respects it): measured again before it
    counts."""
    return eager_ms is not None and eager_ms >= floor_ms and candidate_ms < ROOFLINE_MARGIN * floor_ms


def roofline_finding(candidate_ms: float, again_ms: float, floor_ms: float, in_bytes: int, out_bytes: int,
                     bandwidth: float) -> Finding:
    """A median under the floor (:func:`roofline_suspect`) and its re-measure ``again_ms``: HACK when
    the re-measure is under it too (no call beats reading its inputs once and writing its outputs
    once at the measured copy bandwidth ``bandwidth`` bytes/s, taxonomy 7), else a WARNING."""
    detail = (f"median {candidate_ms:.4g} ms (re-measured {again_ms:.4g} ms) is under {ROOFLINE_MARGIN:g} × the "
              f"{floor_ms:.4g} ms floor: reading {in_bytes} input bytes and writing {out_bytes} output bytes at "
              f"{bandwidth / 1e9:.0f} GB/s")
    if again_ms < ROOFLINE_MARGIN * floor_ms:
        return finding("timing:roofline", (7,), Severity.HACK, detail)
    return finding("timing:roofline", (7,), Severity.WARNING, detail + ": the re-measure did not repeat it")


def candidate_processes(pids: Sequence[int]) -> Finding | None:
    """Processes of the candidate's besides its worker (``pids``), alive in the worker's tree while
    kbv had it stopped to time the baselines (:class:`kbv.pipeline.paused_baselines.PausedCpu`). They
    were stopped with the worker and their CPU time is read (:func:`ran_while_paused` judges it), so
    nothing they ran was timed or credited; a kernel needs none, and a process kept beside the calls
    is the road of taxonomy 2 (a hidden ``os.fork`` whose children spun got PASS with nothing said,
    red-team helper, 2026-12-06). A WARNING (an honest candidate's library may keep a pool of
    processes: torch.compile's compile workers, the honest suite's torch.compile row); None when there are none."""
    if not pids:
        return None
    shown = ", ".join(str(p) for p in sorted(pids)[:5]) + (", ..." if len(pids) > 5 else "")
    return finding("probe:processes", (2,), Severity.WARNING,
                   f"{len(pids)} process(es) of the candidate's besides its worker were alive while the baselines "
                   f"were timed (pids {shown}): stopped with the worker, nothing they ran was timed or credited; "
                   "a kernel needs none (torch.compile keeps a pool of compile workers)")


def ran_while_paused(blocks: Sequence[Sequence[float]], tries: int = PAUSED_TRIES,
                     total_ms: tuple[float, float] = (0.0, 0.0),
                     confirm: Sequence[tuple[float, float]] = ()) -> Finding | None:
    """The candidate's tree spent CPU time while kbv had it stopped to time a baseline (``blocks``:
    per baseline block that ran, the CPU ms of each of its tries over :data:`PAUSED_CPU_SLACK_MS`; a
    block is timed again up to ``tries`` times). A thread inside a long system call
    (``MADV_POPULATE_READ`` over gigabytes, a populating ``mmap``) runs on through SIGSTOP and
    ``cgroup.freeze``, and slows the baselines the candidate is compared with (taxonomy 2, 26; an
    attacker's helper process gained ~1.7x on the eager baselines, issue 19). An idle honest worker
    waits on its pipe and its pools' futexes, which stop at once. A stopped tree found running in
    ``tries`` tries, of one block or of several (the run repeated is the confirmation), is proof
    (HACK); fewer, each block then timed quietly, a WARNING. ``total_ms``: (the stopped tree's CPU
    ms, the wall ms) over every baseline block: blocks shorter than the slack (the kernel charges a
    task in a system call by scheduler ticks, 4 ms) are judged together, and CPU over
    :data:`PAUSED_SHARE` of that wall and over ``tries`` x the slack is proof too. ``confirm``: (CPU ms,
    wall ms) of windows where the tree was stopped right after one call with nothing else running
    (:func:`kbv.pipeline.paused_baselines.confirm_paused`, made when the blocks fell short of proof):
    ``tries`` windows each over the slack are proof, the same bar as ``tries`` tries of a block. None
    when nothing ran."""
    blocks = [list(b) for b in blocks if b]
    cpu, wall = total_ms
    ran = [c for c, _ in confirm if c > PAUSED_CPU_SLACK_MS]
    if len(confirm) >= tries and len(ran) == len(confirm):
        return finding("timing:ran-while-paused", (2, 26), Severity.HACK,
                       f"stopped right after each of {len(confirm)} calls, with nothing else running, the candidate's "
                       f"processes spent {', '.join(f'{c:.1f}' for c, _ in confirm)} ms of CPU in windows of "
                       f"{', '.join(f'{w:.0f}' for _, w in confirm)} ms (the baselines' blocks: {cpu:.1f} ms over "
                       f"{wall:.1f} ms): work that runs on through the stop and slows the baselines")
    if cpu > PAUSED_SHARE * wall and cpu > tries * PAUSED_CPU_SLACK_MS:
        return finding("timing:ran-while-paused", (2, 26), Severity.HACK,
                       f"the candidate's processes spent {cpu:.1f} ms of CPU while kbv had them stopped to time the "
                       f"baselines, over {wall:.1f} ms of baseline blocks: work that slows the baselines")
    if not blocks:
        return None
    spent = [x for b in blocks for x in b]
    detail = (f"the candidate's processes spent {', '.join(f'{x:.1f}' for x in spent[:12])}"
              f"{' ...' if len(spent) > 12 else ''} ms of CPU while kbv had them stopped to time a baseline "
              f"(over {PAUSED_CPU_SLACK_MS:g} ms a block, {len(blocks)} block(s))")
    if len(spent) >= tries:
        return finding("timing:ran-while-paused", (2, 26), Severity.HACK,
                       f"{detail}: {len(spent)} tries found it running, work that slows the baselines")
    return finding("timing:ran-while-paused", (2, 26), Severity.WARNING,
                   f"{detail}; each such block was timed again")
