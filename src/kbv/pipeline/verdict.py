"""The last stage: findings folded into one :class:`kbv.model.records.Verdict`."""

from __future__ import annotations

from kbv.model.findings import ordered
from kbv.model.findings import worst as most_severe
from kbv.checks.flag_rules import flag_change_findings, tampering_findings
from kbv.model.records import Severity, Status, Verdict
from kbv.pipeline.judging import Judging
from kbv.pipeline.outcome import Outcome
from kbv.processes import footprint as fp
from kbv.sandbox import peak_memory as mem
from kbv.pipeline.context import Context

#: the status of each way the stages ended, before the findings are folded in (HACK over
#: everything, SHORTCUT over PASS).
STATUS_OF = {
    Outcome.CORRECT: Status.PASS,
    Outcome.WRONG: Status.INCORRECT,
    Outcome.BUILD_RAISED: Status.COMPILE_ERROR,
    Outcome.CALL_RAISED: Status.RUNTIME_ERROR,
    Outcome.BAD_REPLY: Status.RUNTIME_ERROR,
    Outcome.TIMED_OUT: Status.TIMEOUT,
    Outcome.WORKER_DIED: Status.CRASH,
    Outcome.KBV_FAILED: Status.EVAL_ERROR,
}


class VerdictStage:
    """Verdict folding: the one place that decides a verification's status."""

    def __init__(self, ctx: Context, judge: Judging) -> None:
        self.ctx, self.judge = ctx, judge

    def _verdict(self, outcome: Outcome, message: str, cand_peak: int | None) -> Verdict:
        """The verdict of the stages run: memory footprint evidence, held probe findings, the
        tampering reports' and flag changes' findings, findings folded into the status (HACK over
        everything, SHORTCUT over PASS), unverified speedups for a timed but not correct candidate."""
        state = self.ctx.state
        status = STATUS_OF[outcome]
        try:
            footprint = fp.evidence(self.ctx.rp.device, candidate_peak=cand_peak)
            footprint["reference_host_peak_bytes"] = max(footprint["reference_host_peak_bytes"] or 0,
                                                         getattr(self.ctx, "_peak", 0))
            footprint["phase_peaks"] = state.evidence.pop("phase_host_peaks", {})
            footprint["bound_bytes"] = fp.bound_bytes(self.ctx._input_bytes, max(self.ctx.rp.output_bytes, 0))
            state.evidence["memory_footprint"] = footprint
        except Exception:  # noqa: BLE001 - evidence only
            pass
        self.judge._settle_probes()
        state.findings += tampering_findings(state.tampering) + flag_change_findings(state.flag_changes)
        state.findings = list(ordered(state.findings))
        worst = most_severe(state.findings)
        if worst is Severity.HACK:
            status = Status.HACK
            message = f"{self.ctx.name}: {state.findings[0].describe()}"
        elif worst is Severity.SHORTCUT and status is Status.PASS:
            status = Status.SHORTCUT
            message = f"{self.ctx.name}: correct, but {state.findings[0].describe()}"
        if status is Status.INCORRECT and state.weight_mismatches:  # the likely cause, in the one line
            message += (f" (parameters differing from Model's after identical seeding: "
                        f"{', '.join(state.weight_mismatches[:4])}{', ...' if len(state.weight_mismatches) > 4 else ''})")
        unverified = {}
        if status not in (Status.PASS, Status.SHORTCUT):
            # timed but not correct: the original protocol would have credited this speed
            unverified = dict(state.speedup) if status in (Status.INCORRECT, Status.HACK) else {}
            state.speedup.clear()
        if state.flag_changes:
            state.evidence["flag_warning"] = ("candidate changed global numeric flags; they were reset to the "
                                              "eager-fp32 flags after every call")
        memory_eff = None
        if "reference" in state.memory and "candidate" in state.memory:
            memory_eff = mem.efficiency(state.memory["reference"], state.memory["candidate"])
        return Verdict(
            status=status, message=message, problem=self.ctx.rp.ref, candidate=self.ctx.candidate, config=self.ctx.config,
            environment=self.ctx.env, input_sets=tuple(state.input_sets), timing=dict(state.timing),
            speedup=dict(state.speedup), unverified_speedup=unverified, memory=dict(state.memory),
            memory_efficiency=memory_eff,
            weight_mismatches=tuple(state.weight_mismatches), flag_changes=tuple(state.flag_changes),
            evidence=dict(state.evidence), phase_seconds=dict(state.phase_seconds),
            problem_flags=tuple(state.problem_flags), findings=tuple(state.findings),
        )
