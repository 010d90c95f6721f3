"""The timing stage's schedule: how many timed calls fit a round's time budget, and which timed
calls' outputs are re-checked against the reference and when (:class:`Recheck`), sized from the
outputs' bytes (kbv choices, each documented where it is defined)."""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field


#: timed calls per round whose outputs are re-checked at least (chosen at random, secretly).
RECHECKS_PER_ROUND = 2
#: rounds of at most this many timed calls have every call re-checked (kbv choice): with 2 secret
#: re-checks of 3 calls, a candidate that skipped every other timed call escaped in about 1 of 36
#: verifies.
RECHECK_ALL_UP_TO = 6
#: share of a longer round's timed calls re-checked, a secret subset (issue 21: re-checks sized by
#: what they buy). A speedup is a median, so a candidate that skips the work (or returns a stale
#: output) on k of a subject's N timed calls moves it only to the (1/2 - k/N)/(1 - k/N) quantile of
#: its honest times unless k >= N/2; a round of n calls with m = ceil(n/2) re-checked misses k
#: skipped calls with chance C(n-k, m)/C(n, m): 1/252 a round at n = 10, k = 5 (6e-8 over the
#: three planned rounds), 0 at k >= 6; a third of the calls (k = 3) escapes a round with chance
#: 1/12, and moves the median by the spread between the honest times' 0.29 and 0.5 quantiles.
RECHECK_SHARE = 0.5
#: bytes of candidate outputs kept per timing round for the re-check (taxonomy 5, 6): the
#: re-checked calls are cut to as many as fit, never below RECHECKS_PER_ROUND (a subset of m of n
#: calls misses a candidate that skips every other call with chance C(n/2, m)/C(n, m) a round).
RECHECK_BYTES_PER_ROUND = 1 << 30
#: the same on cpu, where kept outputs pass through /dev/shm (64 MiB by default in a container).
RECHECK_BYTES_PER_ROUND_CPU = 32 << 20
#: timed calls per subject per round that ``EvalConfig.time_budget_ms`` never cuts below (a median
#: and a spread need a few samples; kbv choice).
MIN_TRIALS_PER_ROUND = 3

#: device memory (fraction of free) the rotating timing input sets may take together.
TIMING_INPUT_MEMORY_FRACTION = 0.25
MAX_TIMING_SETS = 4
#: timing sets together take at most this much, or two sets where one is larger than half of it:
#: a big problem's timing phase stays within the 4·B + 1 GiB bound (kbv.processes.footprint).
TIMING_SETS_SMALL_BYTES = 256 << 20
CPU_TIMING_INPUT_BYTES = 1 << 30


def trials_within_budget(planned: int, cost_ms: float, budget_ms: float, minimum: int = MIN_TRIALS_PER_ROUND) -> int:
    """Timed calls for one request: ``planned``, cut so that calls × ``cost_ms`` (ms per call, the
    slowest subject's median so far) stays within ``budget_ms`` (``EvalConfig.time_budget_ms``), but
    never below ``minimum`` (nor above ``planned``). Sizing repetitions from a time budget follows
    triton's ``do_bench``; with a cost unknown (not finite or <= 0) or no budget (<= 0), ``planned``.
    """
    if planned <= 0 or budget_ms <= 0 or not math.isfinite(cost_ms) or cost_ms <= 0:
        return planned
    return max(min(planned, minimum), min(planned, int(budget_ms // cost_ms)))


def judged_at_once(per_round: int, planned: int, output_bytes: int, device_type: str = "cuda") -> bool:
    """:func:`recheck_at_once` for a round of ``per_round`` timed calls whose plan
    (:func:`recheck_plan`) keeps ``planned`` and whose plain call is always judged too: sized for
    ``planned + 1`` kept calls whether or not the plain call is among the planned ones, so the mode
    (each judged call's pause when at once) does not tell the candidate which it was (a red-team
    helper read it: 3 kept 12 MiB outputs on cpu went over the budget only when the plain call was
    not planned)."""
    return recheck_at_once(min(per_round, planned + 1), output_bytes, device_type)


def baseline_refresh(flushed: bool, mutates_inputs: bool) -> bool:
    """Whether a baseline's timed calls copy their timing set into a fresh buffer before each call
    (``kbv.sandbox.timer.time_calls(refresh=True)``), as the candidate's calls do.

    The copy is there for the candidate: new values at a new address on every call, so no cache
    gains (taxonomy 5, 6, 11); the reference is trusted and caches nothing. What the copy changes
    for a baseline's time is what the cache holds when the clock starts, and where the L2 is
    flushed before every call (``flushed``: cuda) it holds the same with or without it, so the
    baselines then run on the timing sets in turn and the copy (reading and writing the inputs'
    bytes every call, issue 21) is left out. Kept without the flush (cpu: the candidate's inputs
    are warm from its copy, so the baseline's are too) and for a reference that writes its inputs
    (every call then starts from the set's own values, as a data-dependent cost needs)."""
    return not flushed or mutates_inputs


@dataclass
class Recheck:
    """What the timed re-checks of one verification carry from round to round."""

    #: timing set index → [the reference's outputs (or the dropped result), its oracle side
    #: (``Judging._oracle_side``) once a call on it needed the oracle, else None]
    refs: dict = field(default_factory=dict)
    checked: list = field(default_factory=list)  #: timed-call indices judged
    #: timing set indices whose values the reference ran on uncopied (``Judging._recheck``'s
    #: ``remake``): written again before an oracle side reads them
    stale: set = field(default_factory=set)
    failed: bool = False


def recheck_plan(per_round: int, output_bytes: int, device_type: str = "cuda") -> tuple[int, ...]:
    """Indices (0-based, sorted) of the timed calls of one round whose outputs are kept and
    re-checked against the reference (taxonomy 5, 6).

    All ``per_round`` calls in a round of at most RECHECK_ALL_UP_TO, else ceil(RECHECK_SHARE x
    ``per_round``) of them; either cut to as many as fit the round's budget (RECHECK_BYTES_PER_ROUND
    on cuda, RECHECK_BYTES_PER_ROUND_CPU on cpu, where the kept outputs travel through /dev/shm) but
    never fewer than RECHECKS_PER_ROUND (or ``per_round`` if smaller). A subset is drawn with
    ``secrets``, so the candidate cannot predict it. Each round's outputs are judged and dropped
    before the next round. The detection chance of each size: RECHECK_SHARE's comment.
    """
    if per_round < 1:
        return ()
    budget = RECHECK_BYTES_PER_ROUND if device_type == "cuda" else RECHECK_BYTES_PER_ROUND_CPU
    fit = budget // max(1, output_bytes)
    wanted = per_round if per_round <= RECHECK_ALL_UP_TO else math.ceil(RECHECK_SHARE * per_round)
    m = min(per_round, max(RECHECKS_PER_ROUND, min(wanted, fit)))
    if m >= per_round:
        return tuple(range(per_round))
    return tuple(sorted(secrets.SystemRandom().sample(range(per_round), m)))


def recheck_at_once(kept_calls: int, output_bytes: int, device_type: str = "cuda") -> bool:
    """Whether each kept timed call is judged as soon as it returns rather than with the rest of its
    round: where the round's kept outputs (``kept_calls`` x ``output_bytes``) are over the budget of
    :func:`recheck_plan` (it keeps RECHECKS_PER_ROUND calls whatever their size). One kept output is
    then held at a time beside the reference side of its call (two 256 MiB outputs held beside the
    re-check's reference and oracle would take the reference worker over its memory bound).
    Small outputs are judged after the round, so the trusted side's work does not run between
    the candidate's timed calls, where it would evict what the candidate had in cache."""
    budget = RECHECK_BYTES_PER_ROUND if device_type == "cuda" else RECHECK_BYTES_PER_ROUND_CPU
    return kept_calls * output_bytes > budget
