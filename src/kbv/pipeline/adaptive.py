"""The adaptive stop of the timing rounds: more rounds until each speedup is known closely enough.

After the rounds ``EvalConfig.trials`` asks for (``timing_rounds`` of them), the timing stage runs
further rounds, of the size of the last one, while the 95 % interval of some speedup
(:mod:`kbv.model.intervals`) is wider than ``EvalConfig.interval_target`` of the speedup
(``interval_half_width``; by default 0.05 on cuda and off on cpu).
It stops at the first of:

- ``interval``: every baseline's relative half-width is at or under the target;
- ``rounds``: ``EvalConfig.max_timing_rounds`` rounds are done;
- ``budget``: another round of the last one's duration would end past
  ``EvalConfig.timing_budget_s`` seconds of timing rounds;
- ``fixed``: the adaptive stop is off (target 0), or no baseline was timed: exactly the planned
  rounds.

The reason, the rounds and each baseline's relative half-width at the stop go to the verdict's
evidence (``timing_stop``). The planned rounds always run: the stop never ends timing earlier
than the fixed protocol would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from kbv.model.intervals import interval_seed, relative_half_width

REASONS = ("interval", "rounds", "budget", "fixed")


@dataclass(frozen=True)
class StopRule:
    """What ends the timing rounds (see the module doc)."""

    target: float  #: relative half-width of each speedup's 95 % interval to reach; 0: off.
    planned_rounds: int  #: rounds the trials are split into; always run.
    max_rounds: int  #: rounds at most, the planned ones included.
    budget_s: float  #: seconds of timing rounds after which no round starts (0: no limit).

    @classmethod
    def from_config(cls, config) -> "StopRule":
        """The rule of an :class:`~kbv.model.records.EvalConfig`."""
        planned = min(config.timing_rounds, config.trials)
        return cls(config.interval_target, planned, max(planned, int(config.max_timing_rounds)),
                   float(config.timing_budget_s))


def half_widths(samples: Mapping[str, Sequence[float]], baselines: Sequence[str], problem_sha256: str,
                candidate_sha256: str, blocks: Sequence[int] = ()) -> dict[str, float]:
    """Relative half-width of the speedup against each baseline with samples on both sides (the
    same seed as the recorded interval; ``blocks``: calls per round, whose spread widens it). Times that
    are not finite and positive give no width (the timing stage then stops and rejects them)."""
    def usable(times: Sequence[float]) -> bool:
        return bool(times) and all(math.isfinite(t) and t > 0 for t in times)

    cand = samples.get("candidate") or ()
    out: dict[str, float] = {}
    if not usable(cand):
        return out
    for b in baselines:
        base = samples.get(b) or ()
        if usable(base):
            out[b] = relative_half_width(base, cand, interval_seed(problem_sha256, candidate_sha256, b), blocks)
    return out


def decide(rule: StopRule, rounds_done: int, elapsed_s: float, last_round_s: float,
           widths: Mapping[str, float]) -> str | None:
    """None to run another round, else why the rounds stop (one of :data:`REASONS`).

    ``rounds_done``: rounds finished; ``elapsed_s``: seconds of timing rounds so far;
    ``last_round_s``: the last round's seconds (the estimate of the next one's); ``widths``: from
    :func:`half_widths` (empty: nothing to judge, as when no baseline was timed).
    """
    if rounds_done < rule.planned_rounds:
        return None
    if rule.target <= 0 or not widths:
        return "fixed"
    if all(w <= rule.target for w in widths.values()):
        return "interval"
    if rounds_done >= rule.max_rounds:
        return "rounds"
    if rule.budget_s > 0 and elapsed_s + last_round_s > rule.budget_s:
        return "budget"
    return None


def evidence(reason: str, rule: StopRule, rounds_done: int, elapsed_s: float, widths: Mapping[str, float]) -> dict:
    """The verdict's ``timing_stop`` record."""
    return {"reason": reason, "rounds": rounds_done, "planned_rounds": rule.planned_rounds,
            "target_half_width": rule.target, "half_width": {k: round(v, 5) for k, v in widths.items()},
            "seconds": round(elapsed_s, 3), "budget_s": rule.budget_s, "max_rounds": rule.max_rounds}


__all__ = ["StopRule", "decide", "half_widths", "evidence", "REASONS"]
