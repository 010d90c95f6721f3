"""The inline problem-vetting stage (taxonomy 23): :func:`kbv.reference.vetting.inline_findings`
over the summaries the correctness stage kept, plus one determinism re-run."""

from __future__ import annotations

import time

from kbv.model.records import InputKind
from kbv.pipeline.context import Context
from kbv.reference import vetting
from kbv.sandbox import numeric_flags as bl


class Vetting:
    """Problem vetting inside a verification."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def _vet(self) -> None:
        """Vetting rules over this evaluation's sets (plus one determinism re-run): taxonomy 23."""
        t0 = time.perf_counter()
        nominal = [r.name for r in self.ctx.state.input_sets if r.kind is InputKind.NOMINAL]
        first = self.ctx.state.nominal_args
        findings, notes = vetting.inline_findings(self.ctx.rp, self.ctx.state.summaries, nominal,
                                                  first.args if first is not None else None, self.ctx.config)
        if first is not None:
            first.release()
        bl.apply_flags(self.ctx.fp32_flags)
        self.ctx.state.problem_flags = [f.line() for f in findings]
        if notes:
            self.ctx.state.evidence["vetting_notes"] = notes
        self.ctx.state.summaries.clear()
        self.ctx.state.nominal_args = None
        self.ctx.state.phase_seconds["vetting"] = time.perf_counter() - t0
        self.ctx._phase_peak("vetting")
