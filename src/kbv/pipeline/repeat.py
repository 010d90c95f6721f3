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

import torch

from kbv.checks.timing import REPEAT_GAIN_RATIO, repeat_gain
from kbv.model.records import Severity
from kbv.pipeline.context import Context
from kbv.processes.candidate import CandidateProcess
from kbv.reference.mutation import timed_mutation
from kbv.sandbox import protocol
from kbv.sandbox.timing import l2_flush_bytes

#: fresh / repeated call pairs timed to confirm a gain seen in the rounds (kbv choice).
REPEAT_CONFIRM_PAIRS = 5


class RepeatGain(Context):
    """The rounds' repeated calls against the calls on fresh values, and the confirming pairs.
    Uses the timing stage's :meth:`kbv.pipeline.timing.Timing._timed_reply` and ``_call_cost``."""

    def _repeat_gain(self, worker: CandidateProcess, sets: list) -> None:
        """When the cheapest repeated call of the rounds is far cheaper than the cheapest call on
        fresh values (:func:`kbv.checks.timing.repeat_gain`), time :data:`REPEAT_CONFIRM_PAIRS`
        pairs now, each a call on fresh values and then its repeat with one more element per
        tensor changed: HACK ``timing:repeat-gain`` when they show the gain again, else a WARNING.
        The costs (ms; CPU-time based on cpu) go to ``evidence["repeat_gain"]``."""
        fresh, rep = self._repeat_costs["fresh"], self._repeat_costs["repeat"]
        if not fresh or not rep:
            return
        evidence = self.state.evidence["repeat_gain"] = {"fresh_ms": list(fresh), "repeat_ms": list(rep)}
        if not repeat_gain(fresh, rep):
            return
        n, skip = len(sets), self._structured()
        g = torch.Generator().manual_seed(secrets.randbits(62))
        flush = l2_flush_bytes(self.rp.device)
        again: dict = {"fresh": [], "repeat": []}
        for _ in range(REPEAT_CONFIRM_PAIRS):
            idx = secrets.randbelow(n)
            mx = ((idx + 1 + secrets.randbelow(n - 1)) % n, secrets.randbits(62), skip)
            mt = timed_mutation(sets[idx], sets[(idx + 1) % n], g, skip)
            more = timed_mutation(sets[idx], sets[(idx + 1) % n], g, skip)
            for what, changes in (("fresh", mt), ("repeat", mt + more)):
                with self._held(worker, protocol.TimedCall(idx, flush, mx, changes), "time",
                                self.config.call_timeout_s, hold=False) as reply:
                    self._timed_reply(reply)
                    again[what].append(self._call_cost(reply))
                    del reply
        evidence.update(confirm_fresh_ms=again["fresh"], confirm_repeat_ms=again["repeat"])
        what = " (the lesser of wall and CPU time)" if self.rp.device.type == "cpu" else ""
        detail = (f"the cheapest call on the previous call's values with one element per input changed took "
                  f"{min(rep):.4g} ms{what}, the cheapest call on fresh values {min(fresh):.4g} ms; "
                  f"{REPEAT_CONFIRM_PAIRS} more fresh / repeated pairs: {min(again['repeat']):.4g} vs "
                  f"{min(again['fresh']):.4g} ms")
        if repeat_gain(again["fresh"], again["repeat"]):
            self._found("timing:repeat-gain", (11,), Severity.HACK,
                        f"{detail}: results cached across calls and patched where the inputs changed")
        else:
            self._found("timing:repeat-gain", (11,), Severity.WARNING,
                        f"{detail}, under {REPEAT_GAIN_RATIO:g}x: unconfirmed")
