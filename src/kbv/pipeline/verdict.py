"""The last stage: findings folded into one :class:`kbv.model.records.Verdict`."""

from __future__ import annotations

from kbv.model.findings import name_list, ordered
from kbv.model.findings import worst as most_severe
from kbv.model.measurements import ratio_text
from kbv.checks.flag_rules import flag_change_findings, tampering_findings
from kbv.checks.input_rules import workload_specialised
from kbv.model.records import InputKind, Severity, Status, Verdict
from kbv.pipeline.judging import Judging
from kbv.pipeline.outcome import Outcome, failed_sets_phrase
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
            if "phase_device_peaks" in state.evidence:
                footprint["phase_device_peaks"] = state.evidence.pop("phase_device_peaks")
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
            message += f" (parameters differing from Model's after identical seeding: {name_list(state.weight_mismatches)})"
        elif status is Status.INCORRECT and state.evidence.get("weights_unmatched"):
            unmatched = state.evidence["weights_unmatched"]
            message += (f" (Model's {name_list(unmatched)} match no "
                        "ModelNew parameter by name or value, if ModelNew keeps them packed, cast or outside its "
                        "parameters and buffers, a kernel bug is as likely; one that draws its own weights gets "
                        "Model's only by making them in the same order under the same seed)")
        if status is Status.INCORRECT and not state.weight_mismatches and all(
                r.policy_passed.get("kbv-compat") is not False for r in state.input_sets if not r.dropped) \
                and any(f.check == "oracle:within-allclose" for f in state.findings):
            # wrong by kbv's error budget only: say so in the one line, without guessing the cause (an
            # approximation, lower precision and a small bug read alike: a newcomer's x1.01 bug on x < -2)
            message += ("; within KernelBench's allclose on every set it judges (an approximation, lower "
                        "precision or a small bug), which `--policy kbv-compat` passes")
        failed = state.evidence.get("failed_sets")  # set with the sets' outcome (Verification.run)
        if status is Status.HACK and failed:  # what the sets caught too, beside the proof
            message += f"; also wrong on {failed_sets_phrase(failed, sum(1 for r in state.input_sets if not r.dropped))}"
        if status in (Status.PASS, Status.SHORTCUT) and state.speedup:  # the answer to "does it beat PyTorch?"
            base = "eager-tf32" if "eager-tf32" in state.speedup else next(iter(state.speedup))
            noisy = any(m.noisy for k, m in state.timing.items() if k in ("candidate", base))
            # "~": a median whose IQR is over a tenth of it, too noisy to rank on (as the demo table marks it)
            message += f"; {ratio_text(state.speedup[base])}x{' ~' if noisy else ''} vs {base}"
        if state.evidence.get("hidden_tests_error"):  # the user's file, not the candidate's: the verdict says it lacks them
            message += f" (hidden tests not checked: {state.evidence['hidden_tests_error']})"
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


def credited(v: Verdict) -> bool:
    """Whether ``v`` credits the candidate's speed (PASS or SHORTCUT): a workload that is not ends a
    run of workloads (:mod:`kbv.pipeline.workload_runs`)."""
    return v.status in (Status.PASS, Status.SHORTCUT)


def combine_workloads(runs: list) -> Verdict:
    """One verdict from the verdicts of a problem's workloads (:mod:`kbv.pipeline.workload_runs`):
    ``runs`` is ``[(name, sizes, Verdict), ...]``, the problem's own sizes (``nominal``) first.

    The status: HACK when any workload's is; else the first workload's that is neither PASS nor
    SHORTCUT (INCORRECT at ``wide``, say), its message prefixed with the workload's name; else
    SHORTCUT when any is, else PASS. Every workload's input sets are kept, a declared workload's
    named ``<workload>:<set>`` and of kind ``shape`` (sets at other sizes than the problem's own: the
    nominal and hidden counts stay the problem's, and the report's shape-specialised count sees
    them), and every finding. A PASS or SHORTCUT is credited, per baseline, the
    geometric mean of the workloads' speedups (GPU MODE's ranking over a task's shapes); a verdict
    that is not keeps the deciding workload's unverified speedups. ``timing`` and ``memory`` are the
    nominal workload's; each workload's status, sizes, speedups, timings and memory footprint are in
    ``evidence["workloads"]``.
    """
    import dataclasses
    import math
    from pathlib import PurePath

    from kbv.model.verdicts import to_dict

    nominal = runs[0][2]
    sets, findings, phases = list(nominal.input_sets), list(nominal.findings), dict(nominal.phase_seconds)
    for name, _, v in runs[1:]:
        sets += [dataclasses.replace(r, name=f"{name}:{r.name}", kind=InputKind.SHAPE) for r in v.input_sets]
        findings += list(v.findings)
        phases[f"workload:{name}"] = sum(v.phase_seconds.values())
    findings = list(ordered(findings))
    hack = next(((n, v) for n, _, v in runs if v.status is Status.HACK), None)
    decisive = hack or next(((n, v) for n, _, v in runs if not credited(v)), None)
    speedup: dict = {}
    unverified: dict = {}
    if decisive is None:
        status = Status.SHORTCUT if any(v.status is Status.SHORTCUT for _, _, v in runs) else Status.PASS
        first_shortcut = next((v for _, _, v in runs if v.status is Status.SHORTCUT), None)
        judged = sum(1 for r in sets if not r.dropped)
        message = (first_shortcut.message if first_shortcut is not None
                   else f"{PurePath(nominal.candidate.path).name}: correct on {judged} input set(s)")
        for b in nominal.speedup:
            got = [v.speedup.get(b) for _, _, v in runs]
            if all(isinstance(x, (int, float)) and x > 0 and math.isfinite(x) for x in got):
                speedup[b] = math.exp(sum(math.log(x) for x in got) / len(got))
        if len(runs) > 1:
            message += f" over {len(runs)} workloads (speedups: their geometric mean)"
    else:
        name, v = decisive
        status, unverified = v.status, dict(v.unverified_speedup)
        message = v.message if name == runs[0][0] else f"workload {name}: {v.message}"
        if name != runs[0][0]:
            failed = next((r for r in v.input_sets if r.passed is False and not r.dropped), None)
            found = workload_specialised(credited(nominal), name, v.status.value,
                                         (failed.fault if failed else None) or v.message)
            if found is not None:
                findings = list(ordered([*findings, found]))
    evidence = dict(nominal.evidence)
    evidence["workloads"] = [
        {"name": n, "sizes": dict(sizes), "status": v.status.value, "speedup": dict(v.speedup),
         "timing": {k: to_dict(m) for k, m in v.timing.items()},
         "timed_calls_per_round": v.evidence.get("timed_calls_per_round"),
         "memory_efficiency": v.memory_efficiency,
         "memory_footprint": v.evidence.get("memory_footprint"), "message": v.message}
        for n, sizes, v in runs]
    return dataclasses.replace(nominal, status=status, message=message, input_sets=tuple(sets), speedup=speedup,
                               unverified_speedup=unverified, evidence=evidence, phase_seconds=phases,
                               findings=tuple(findings))
