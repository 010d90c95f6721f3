"""The inline problem-vetting stage (taxonomy 23): :func:`kbv.reference.vetting.inline_findings`
over the summaries the correctness stage kept, plus one determinism re-run."""

from __future__ import annotations

import time

from kbv.model.records import InputKind
from kbv.pipeline.context import Context
from kbv.reference import vetting
from kbv.sandbox import numeric_flags as bl


class Vetting(Context):
    """Problem vetting inside a verification."""

    def _vet(self) -> None:
        """Vetting rules over this evaluation's sets (plus one determinism re-run): taxonomy 23."""
        t0 = time.perf_counter()
        nominal = [r.name for r in self.state.input_sets if r.kind is InputKind.NOMINAL]
        first = self.state.nominal_args
        findings, notes = vetting.inline_findings(self.rp, self.state.summaries, nominal,
                                                  first.args if first is not None else None, self.config)
        if first is not None:
            first.release()
        bl.apply_flags(self.fp32_flags)
        self.state.problem_flags = [f.line() for f in findings]
        if notes:
            self.state.evidence["vetting_notes"] = notes
        self.state.summaries.clear()
        self.state.nominal_args = None
        self.state.phase_seconds["vetting"] = time.perf_counter() - t0
        self._phase_peak("vetting")
