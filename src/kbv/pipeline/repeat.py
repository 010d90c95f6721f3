"""The repeat-gain check of the timing stage (taxonomy 11): a diff-and-patch cache seen by what
its calls cost.

A cache that keeps the previous call's inputs and output, compares each new call's inputs with
them and recomputes only what changed (the rows and columns of a matmul touched by changed
elements) gains nothing under kbv's timing: every timed call takes 1/8 of its elements from
another timing set, so every row changes. Its answers are right, so no correctness probe names
it. Its cost does: each timing round has one secret extra call on the previous call's values
with one more element per tensor changed, which such a cache answers in a fraction of the time a
call on fresh values takes, where an honest kernel costs the same.
"""

from __future__ import annotations

import secrets

import numpy as np
import torch

from kbv.checks.timing_rules import rank_sum_p, repeat_gain, repeat_gain_confirmed, repeat_gain_finding
from kbv.pipeline.context import Context
from kbv.processes.candidate import CandidateProcess
from kbv.reference.mutation import timed_mutation
from kbv.sandbox import protocol
from kbv.sandbox.timer import l2_flush_bytes

#: confirming follow-up calls of each arm (:meth:`RepeatGain._repeat_gain`): 2 x 6 follow-ups give
#: 924 equally likely arm draws, so the rank test can reach p = 1/924 (kbv choice).
REPEAT_CONFIRM_PAIRS = 6


class RepeatGain:
    """The rounds' repeated calls against the calls on fresh values, and the confirming pairs.
    Uses the context's :meth:`kbv.pipeline.context.Context._timed_reply` and ``_call_cost``."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def _repeat_gain(self, worker: CandidateProcess, sets: list) -> None:
        """When the cheapest repeated call of the rounds is far cheaper than the cheapest call on
        fresh values (:func:`kbv.checks.timing_rules.repeat_gain`, a screen), confirm with
        2 x :data:`REPEAT_CONFIRM_PAIRS` pairs: each a call on fresh values, then a follow-up that
        a secret draw makes either its repeat (its values, one more element per tensor changed)
        or a call on other fresh values with as many changes. Only the follow-ups are compared, so
        an honest kernel's two arms differ in nothing but which values repeat: the order of calls,
        the gaps between them and a loaded machine fall on both alike. HACK ``timing:repeat-gain``
        when :func:`kbv.checks.timing_rules.repeat_gain_confirmed` holds, else a WARNING. The costs
        (ms; CPU-time based on cpu) go to ``evidence["repeat_gain"]``."""
        fresh, rep = self.ctx._repeat_costs["fresh"], self.ctx._repeat_costs["repeat"]
        if not fresh or not rep:
            return
        evidence = self.ctx.state.evidence["repeat_gain"] = {"fresh_ms": list(fresh), "repeat_ms": list(rep)}
        if not repeat_gain(fresh, rep):
            return
        n, skip = len(sets), self.ctx._structured()
        g = torch.Generator().manual_seed(secrets.randbits(62))
        flush = l2_flush_bytes(self.ctx.rp.device)
        arms = [True] * REPEAT_CONFIRM_PAIRS + [False] * REPEAT_CONFIRM_PAIRS
        secrets.SystemRandom().shuffle(arms)
        again: dict = {"fresh": [], "repeat": []}

        def fresh_call() -> tuple:
            idx = secrets.randbelow(n)
            mx = ((idx + 1 + secrets.randbelow(n - 1)) % n, secrets.randbits(62), skip) if n > 1 else ()
            return idx, mx, timed_mutation(sets[idx], sets[(idx + 1) % n], g, skip, self.ctx._kinds())

        for repeat in arms:
            idx, mx, mt = fresh_call()
            more = timed_mutation(sets[idx], sets[(idx + 1) % n], g, skip, self.ctx._kinds())
            if repeat:
                follow = (idx, mx, mt + more)
            else:
                idx2, mx2, mt2 = fresh_call()
                follow = (idx2, mx2, mt2 + timed_mutation(sets[idx2], sets[(idx2 + 1) % n], g, skip, self.ctx._kinds()))
            for k, (i, m, changes) in enumerate(((idx, mx, mt), follow)):
                with self.ctx._held(worker, protocol.TimedCall(i, flush, m, changes), "time",
                                self.ctx.config.call_timeout_s, hold=False) as reply:
                    self.ctx._timed_reply(reply)
                    if k:
                        again["repeat" if repeat else "fresh"].append(self.ctx._call_cost(reply))
                    del reply
        evidence.update(confirm_fresh_ms=again["fresh"], confirm_repeat_ms=again["repeat"])
        what = " (the lesser of wall and CPU time)" if self.ctx.rp.device.type == "cpu" else ""
        med = {k: float(np.median(v)) for k, v in again.items()}
        p = rank_sum_p(again["repeat"], again["fresh"])
        detail = (f"the cheapest call on the previous call's values with one element per input changed took "
                  f"{min(rep):.4g} ms{what}, the cheapest call on fresh values {min(fresh):.4g} ms; "
                  f"{REPEAT_CONFIRM_PAIRS} + {REPEAT_CONFIRM_PAIRS} follow-up calls drawn at random, repeats "
                  f"against fresh values: median {med['repeat']:.4g} vs {med['fresh']:.4g} ms, rank test p = {p:.2g}")
        self.ctx._add(repeat_gain_finding(detail, repeat_gain_confirmed(again["fresh"], again["repeat"])))
