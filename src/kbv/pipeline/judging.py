"""Judging one input set: the reference side (reference run, fp64 oracle, the baselines' errors)
and the candidate's outputs against it under both correctness policies (docs/correctness.md);
failed probe sets are held until every correctness set is judged."""

from __future__ import annotations

import contextlib
import dataclasses
import math

import torch

from kbv.checks import output_rules as out_rule
from kbv.reference.policy import (INPUT_ROUNDING, POLICIES, SWEEP_TOLERANCES, VACUOUS_BASELINE_ERROR,
                                  finite_by_rms, kbv_check, output_errors, sweep_key)
from kbv.checks.probe_rules import over_budget, settle_probes
from kbv.checks.tf32_rules import tf32_inert
from kbv.intake.problems import ProblemError
from kbv.model.records import InputKind, InputSetResult
from kbv.pipeline.context import Context
from kbv.pipeline.outcome import Outcome, Stop
from kbv.pipeline.schedule import Recheck
from kbv.processes import footprint as fp
from kbv.reference import inputs as inp
from kbv.reference import oracle as orc
from kbv.reference.build import first_line, run_reference, same_bits_under
from kbv.reference.mutation import apply_mutation
from kbv.reference.comparison import Comparison, compare, equals_reference, reference_is_finite
from kbv.sandbox import call_probes as ig
from kbv.sandbox import numeric_flags as bl
from kbv.sandbox import timer as timing


#: a problem's outputs up to this many bytes leave room for the candidate's beside a deferred
#: input-rounding run (:meth:`Judging.defers_rounding`; kbv choice: a quarter of the bound's 1 GiB
#: slack).
DEFER_ROUNDING_MAX_OUTPUT_BYTES = 256 << 20


class Judging:
    """Reference side and judgement of one input set."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def _tf32_inert(self, args: list) -> bool:
        """Whether the reference runs no op the TF32 switches reach (:func:`kbv.checks.tf32_rules.tf32_inert`),
        from its two op counts on ``args`` (trusted side, eager-fp32 flags), once per problem in
        this reference worker; the evidence ``tf32_inert`` says what was decided."""
        if self.ctx.rp.tf32_inert is None:
            from kbv.sandbox import profiling

            bl.apply_flags(self.ctx.fp32_flags)
            counts = {"dispatch": profiling.compute_ops(self.ctx.rp.model, inp.clone_args(args)),
                      "profiler": profiling.recorded_ops(self.ctx.rp.model, inp.clone_args(args))}
            self.ctx.rp.tf32_inert = tf32_inert({k: (dict(c.ops), c.error) for k, c in counts.items()})
        self.ctx.state.evidence["tf32_inert"] = self.ctx.rp.tf32_inert
        return self.ctx.rp.tf32_inert

    def tf32_same_on_cpu(self, args: list) -> bool:
        """On cpu, whether eager-tf32 runs eager-fp32's kernels on ``args``
        (:func:`kbv.reference.build.same_bits_under`, once per problem in this reference worker):
        then it is timed as eager-fp32's times. False on cuda (:meth:`_tf32_inert` decides there)."""
        if self.ctx.rp.device.type != "cpu":
            return False
        if self.ctx.rp.tf32_same_cpu is None:
            self.ctx.rp.tf32_same_cpu = same_bits_under(self.ctx.rp, args, self.ctx.fp32_flags, self.ctx.tf32_flags)
        self.ctx.state.evidence["tf32_same_bits_cpu"] = self.ctx.rp.tf32_same_cpu
        return self.ctx.rp.tf32_same_cpu

    def _dropped(self, s: inp.InputSet, reason: str) -> InputSetResult:
        return InputSetResult(s.name, s.kind, s.transform, s.seed, passed=None, dropped=True, drop_reason=reason)

    def _wrong(self, s: inp.InputSet, fault: str, **figures) -> InputSetResult:
        """``s`` failed under every policy and at every tolerance, for ``fault`` (outputs that
        cannot be compared with the reference's: their count, a shape or a dtype)."""
        return InputSetResult(s.name, s.kind, s.transform, s.seed, passed=False, fault=fault,
                              policy_passed={p: False for p in POLICIES}, allclose_tolerance=math.inf,
                              tolerance_sweep={sweep_key(t): False for t in SWEEP_TOLERANCES}, **figures)

    def _oracle(self, args: list, ref: list | None = None) -> tuple[list | None, str | None]:
        try:
            return self.ctx.oracle(args, ref), None
        except orc.OracleUnavailable as exc:
            if exc.memory:  # kbv's own limit, not a property of the problem or the candidate
                raise Stop(Outcome.KBV_FAILED, f"{self.ctx.name}: kbv ran out of memory computing the fp64 oracle: {exc}",
                            memory_footprint=fp.evidence(self.ctx.rp.device)) from None
            return None, f"fp64 oracle unavailable ({exc}); the kbv policy fell back to allclose"

    def _reference_side(self, s: inp.InputSet, args: list, rounding: list | None = None,
                        defer_rounding: bool = False) -> tuple | InputSetResult:
        """Reference, oracle and the baselines' errors against it on ``args`` (already on the
        device), or a dropped result: :meth:`_reference_run`, then :meth:`_oracle_side`."""
        ref = self._reference_run(s, args)
        if isinstance(ref, InputSetResult):
            return ref
        side = self._oracle_side(s, args, ref, rounding, defer_rounding)
        return side if isinstance(side, InputSetResult) else (ref, *side)

    def _reference_run(self, s: inp.InputSet, args: list, finite_check: bool = True,
                       copy: bool = True) -> list | InputSetResult:
        """The eager-fp32 reference's outputs on ``args`` (already on the device), or a dropped
        result (it raised, or an output is not finite). ``finite_check`` False: the caller reads
        finiteness itself (:attr:`kbv.reference.vetting.OutputSummary.finite`, :meth:`not_finite`).
        ``copy`` False: the reference runs on ``args`` themselves, which the caller writes again
        with the values the candidate got before anything else reads them (:meth:`_recheck`'s
        ``remake``): one input set's bytes less held.

        Raises:
            ProblemError: it raised on a nominal set (``get_inputs()``'s own draw).
        """
        # always on a copy: a reference that writes its inputs through ``.data`` or storage moves no version
        # counter, and one uncopied run on a set whose first run changed nothing clamped later sets' values
        # before the candidate and the oracle saw them (a wrong kernel then passed; red-team, 2026-12-06)
        try:
            ref = run_reference(self.ctx.rp, inp.clone_args(args), self.ctx.fp32_flags, original=args) if copy \
                else run_reference(self.ctx.rp, args, self.ctx.fp32_flags)
        except BaseException as exc:  # noqa: BLE001 - reference raised on this distribution
            if fp.is_memory_error(exc):  # kbv's limit, not the problem's: EVAL_ERROR (Verification.run)
                raise
            if s.kind is InputKind.NOMINAL:
                raise ProblemError(self.ctx.rp.ref.path,
                                   f"reference forward failed on {s.name}: {type(exc).__name__}: {first_line(exc)}") from None
            return self._dropped(s, f"reference raised {type(exc).__name__}: {first_line(exc)}")
        if finite_check and not reference_is_finite(ref):
            return self.not_finite(s)
        return ref

    def not_finite(self, s: inp.InputSet) -> InputSetResult:
        """``s`` dropped: the reference's output has a NaN or an infinity."""
        return self._dropped(s, "reference output has NaN/Inf")

    def _oracle_side(self, s: inp.InputSet, args: list, ref: list, rounding: list | None = None,
                     defer_rounding: bool = False) -> tuple | InputSetResult:
        """The fp64 oracle on ``args`` and the baselines' errors against it: ``(oracle,
        oracle_note, errors)``, or a dropped result (the oracle is not finite). Baseline outputs
        are reduced to their errors at once, so at most the reference and the oracle outputs stay
        held for the candidate's.

        The input-rounding term of the budget (a second fp64 forward) is measured on every set
        except where ``rounding`` gives it: the probes and timed re-checks on ``get_inputs()``
        draws take the largest the nominal sets measured (:attr:`_nominal_rounding`, the same
        distribution); the nominal sets' own figures are collected here. ``defer_rounding``: not
        measured here; :meth:`_judge` measures it only where the set fails without it
        (:meth:`_rounding_later`)."""
        oracle, oracle_note = self._oracle(args, ref)
        # finiteness read in the pass that keeps each output's RMS for the error passes (policy.finite_by_rms)
        if oracle is not None and not all(finite_by_rms(o) for o in oracle):
            return self._dropped(s, "fp64 oracle output has NaN/Inf")
        if self.ctx.oracle.chunked:
            self.ctx.state.evidence["oracle_pieces"] = self.ctx.oracle.chunked
        errors: dict = {}
        if oracle is not None:
            errors["eager-fp32"] = output_errors(ref, oracle)
        if self.ctx.rp.device.type == "cuda" and oracle is not None:
            if self._tf32_inert(args):  # the same bits under both (kbv.checks.tf32_rules)
                errors["eager-tf32"] = errors["eager-fp32"]
            else:
                tf32 = run_reference(self.ctx.rp, inp.clone_args(args), self.ctx.tf32_flags)
                bl.apply_flags(self.ctx.fp32_flags)
                errors["eager-tf32"] = output_errors(tf32, oracle)
                del tf32
        if oracle is not None and rounding is not None:
            errors[INPUT_ROUNDING] = list(rounding)
        elif oracle is not None and not defer_rounding:  # the problem's own sensitivity to fp32 rounding
            with self._reference_aside(ref) as planned_by:
                moved = self.ctx.oracle.input_rounding_errors(args, oracle, planned_by)
            if moved is not None:
                errors[INPUT_ROUNDING] = moved
                if s.kind is InputKind.NOMINAL:
                    self.ctx._nominal_rounding = largest_errors(self.ctx._nominal_rounding, moved)
        return oracle, oracle_note, errors

    @contextlib.contextmanager
    def _reference_aside(self, ref: list):
        """On cuda where the outputs leave no room beside the oracle (:meth:`oracle_after_outputs`
        False), the reference's outputs wait on the host during the input-rounding forwards (the
        list changed in place, so its holders see them moved, and back on the device after): at
        that forward the device holds the inputs, the oracle's outputs and the rounded inputs and
        outputs in float64, ``3·I + 4·O``, within 4·B + 1 GiB (with the reference too, 3·I + 5·O
        went over on KernelBench-Verified's small-K and tall-skinny matmuls, H100, 2026-12-06).
        Yields what the oracle's piece plan may read: ``ref``, or None once it is on the host (the
        plan was made on this set's oracle call already; a forward that then runs out of memory
        goes to the host's oracle, :meth:`kbv.reference.oracle.Oracle.__call__`)."""
        aside = (self.ctx.rp.device.type == "cuda" and not self.oracle_after_outputs()
                 and all(isinstance(r, torch.Tensor) and r.is_cuda for r in ref))
        if not aside:
            yield ref
            return
        devices = [r.device for r in ref]
        ref[:] = [r.to("cpu") for r in ref]
        try:
            yield None
        finally:
            ref[:] = [r.to(d) for r, d in zip(ref, devices)]

    def oracle_after_outputs(self) -> bool:
        """Whether a set's oracle side waits for the candidate's outputs (:meth:`exact_result`): a
        problem whose outputs leave room for the candidate's beside the oracle's fp64 run (the
        condition of :meth:`defers_rounding`, kbv's memory bound 4·B + 1 GiB)."""
        out, inb = max(self.ctx.rp.output_bytes, 0), self.ctx._input_bytes
        return 2 * out <= inb or out <= DEFER_ROUNDING_MAX_OUTPUT_BYTES

    def offloads_outputs(self) -> bool:
        """Where :meth:`oracle_after_outputs` is False: whether the candidate's outputs are judged for
        equality first all the same and, where they differ from the reference's, held on the host
        while the oracle side runs (cuda: the device then holds at the oracle what it held when the
        oracle ran first, and the host one output more, within its 4·B + 1 GiB). On cpu the host is
        the device: the oracle side runs before the candidate's call there. At KernelBench-Verified's
        full sizes the elementwise problems (outputs the size of the inputs, 1-12 GiB) had every set's
        oracle and input-rounding forwards run: 1,639 x B of a 6 GiB ReLU's correctness on the H100,
        where the candidate's outputs equalled the reference's (docs/scale.md, "Bytes per job")."""
        return self.ctx.rp.device.type == "cuda"

    def exact_result(self, s: inp.InputSet, outs: list, structure: str | None, ref: list,
                     args: list, equal: bool | None = None) -> InputSetResult | None:
        """``s`` judged without the fp64 oracle where the candidate's outputs equal the eager-fp32
        reference's, value for value (:func:`kbv.reference.comparison.equals_reference`; ``equal``:
        that comparison already made on these outputs), else None.

        Why every check holds: the ``kbv`` rule bounds the candidate's error against the oracle by
        ``k × max(baseline errors) + floor`` with ``k >= 1`` (``EvalConfig``) and eager-fp32 among
        the baselines; outputs equal to eager-fp32's have exactly its error, so they pass whatever the
        oracle; ``kbv-compat`` (allclose with the reference) and the tolerance sweep pass at 0. The
        set's ``oracle_error``, ``error_budget`` and ``baseline_errors`` stay unset and
        ``exact`` says why. On cuda the TF32 op count (:meth:`_tf32_inert`) still runs once, for the
        timing stage. Cost: one read of each output (the equality) in place of the oracle's forward
        and about 60 × the outputs' bytes of error passes (docs/scale.md, "Bytes per job")."""
        ref_structure = getattr(self.ctx.rp, "structure", None)
        if (ref_structure and structure != ref_structure) or not (
                equal if equal is not None else equals_reference(outs, ref)):
            return None
        if self.ctx.rp.device.type == "cuda" and self.ctx.rp.tf32_inert is None:
            self._tf32_inert(args)
        n = sum(r.numel() for r in ref)
        return InputSetResult(s.name, s.kind, s.transform, s.seed, passed=True, max_abs_error=0.0, max_rel_error=0.0,
                              mismatched_elements=0, total_elements=n, policy_passed={p: True for p in POLICIES},
                              allclose_tolerance=0.0, tolerance_sweep={sweep_key(t): True for t in SWEEP_TOLERANCES},
                              exact=True)

    def defers_rounding(self, s: inp.InputSet, probe: bool) -> bool:
        """Whether ``s``'s input-rounding term waits for the candidate's outputs (:meth:`_judge`): a set
        made again from its seed (:attr:`kbv.reference.inputs.InputSet.remakeable`), not nominal (the
        nominal sets' terms are the probes' and timed re-checks'), not a probe, and a problem whose
        outputs leave room for the candidate's beside the term's own fp64 run (their bytes at most
        half the inputs', or at most :data:`DEFER_ROUNDING_MAX_OUTPUT_BYTES`: kbv's memory bound,
        4·B + 1 GiB)."""
        out, inb = max(self.ctx.rp.output_bytes, 0), self.ctx._input_bytes
        return (s.remakeable and not probe and s.kind is not InputKind.NOMINAL
                and (2 * out <= inb or out <= DEFER_ROUNDING_MAX_OUTPUT_BYTES))

    def _rounding_later(self, s: inp.InputSet, ref: list, oracle: list) -> list | None:
        """The input-rounding term of a deferred set (:meth:`defers_rounding`), on its inputs made
        again from its seed (the values the candidate got), then released."""
        args = inp.to_device(s.args, self.ctx.rp.device, self.ctx.config.precision)
        s.release()
        try:
            return self.ctx.oracle.input_rounding_errors(args, oracle, ref)
        finally:
            del args

    def _judge(self, s: inp.InputSet, outs: list, structure: str | None, ref: list, oracle: list | None,
               oracle_note: str | None, baselines: dict, deferred: bool = False) -> InputSetResult:
        """``outs`` judged on ``s`` under both policies. ``deferred``: ``baselines`` lack the
        input-rounding term (:meth:`defers_rounding`); it is measured only where the kbv rule fails
        without it, and the rule applied again with it. The budget only grows with that term
        (:func:`kbv.reference.policy.budget` takes the greatest baseline error), so a set that passes
        without it passes with it: the verdict is the eager one's, and a passing set's
        ``baseline_errors`` has no ``input-rounding`` entry."""
        cfg = self.ctx.config
        c: Comparison = compare(outs, ref, atol=cfg.atol, rtol=cfg.rtol)
        ref_structure = getattr(self.ctx.rp, "structure", None)
        if ref_structure and structure != ref_structure and c.max_abs_error is not None:
            what = {"tensor": "a tensor", "tuple": "a tuple/list of tensors"}
            c = dataclasses.replace(c, passed=False, max_abs_error=None, fault=(
                f"forward returns {what.get(structure, structure)}, "
                f"the reference returns {what[ref_structure]}"))
        shapes = [(tuple(o.shape), tuple(r.shape)) for o, r in zip(outs, ref) if tuple(o.shape) != tuple(r.shape)]
        self.ctx._add(out_rule.shape_mismatch(s.name, shapes))
        common = dict(max_abs_error=c.max_abs_error, max_rel_error=c.max_rel_error,
                      mismatched_elements=c.mismatched_elements, total_elements=c.total_elements)
        if c.max_abs_error is None:  # count / shape / dtype mismatch: wrong under every policy
            return self._wrong(s, c.fault, **common)
        t_min = math.inf if c.nonfinite_mismatches else c.min_tolerance
        sweep = {sweep_key(t): t_min <= t for t in SWEEP_TOLERANCES}
        if oracle is not None:
            def rule(errors: dict):
                return kbv_check(outs, ref, oracle, k=cfg.kbv_k, floor_eps=cfg.kbv_floor_eps,
                                 tf32_floor=cfg.kbv_tf32_floor, baseline_errors=errors)

            k = rule(baselines)
            if deferred and not k.passed and INPUT_ROUNDING not in baselines:
                moved = self._rounding_later(s, ref, oracle)
                if moved is not None:
                    k = rule({**baselines, INPUT_ROUNDING: moved})
            kbv_passed, kbv_fault = k.passed, k.fault
            worst_base = max((v for n, v in k.baseline_errors.items() if n != INPUT_ROUNDING), default=0.0)
            if worst_base > VACUOUS_BASELINE_ERROR:
                self.ctx.state.evidence.setdefault("vacuous_budget", {})[s.name] = worst_base
            figures = dict(oracle_error=k.error, error_budget=k.budget, baseline_errors=k.baseline_errors,
                           oracle_device=self.ctx.oracle.device.type)
            if c.passed and not kbv_passed:
                weights = list(self.ctx.state.weight_mismatches) + [
                    w.split(" (")[0] for w in self.ctx.state.evidence.get("weights_unmatched", ())]
                self.ctx._add(out_rule.within_allclose(s.name, cfg.atol, cfg.rtol, k.error, k.budget, weights))
        else:
            kbv_passed, kbv_fault, figures = c.passed, c.fault, {}
            self.ctx.state.evidence.setdefault("oracle_notes", {})[s.name] = oracle_note
        verdicts = {"kbv": kbv_passed, "kbv-compat": c.passed}
        fault = kbv_fault if cfg.policy == "kbv" else c.fault
        return InputSetResult(s.name, s.kind, s.transform, s.seed, passed=verdicts[cfg.policy], fault=fault,
                              policy_passed=verdicts, allclose_tolerance=t_min, tolerance_sweep=sweep,
                              **common, **figures)

    def _probe_failed(self, check: str, taxonomy: tuple, r: InputSetResult, detail: str) -> None:
        """A caching or timed re-check probe judged the candidate wrong: held until every
        correctness set is judged (:meth:`_settle_probes`)."""
        self.ctx._pending_probes.append((check, taxonomy, detail, self._over_budget(r)))

    def _over_budget(self, r: InputSetResult) -> float:
        """How far over its budget a failed set's error is (:func:`kbv.checks.probe_rules.over_budget`)."""
        return over_budget(r, self.ctx.config.policy, self.ctx.config.atol)

    def _settle_probes(self) -> None:
        """The held probe failures become findings (:func:`kbv.checks.probe_rules.settle_probes`)."""
        self.ctx.state.findings += settle_probes(self.ctx.state.input_sets, self.ctx._pending_probes)
        self.ctx._pending_probes = []

    def _recheck(self, kept: list, sets: list, state: "Recheck", mutations: dict | None = None,
                 remake=None) -> None:
        """Judge the outputs of one round's kept timed calls (:func:`recheck_plan`) against the
        reference of the values they got, the timing set with that call's :func:`timed_mutation`
        (taxonomy 5, 6, 11): a candidate right when checked and wrong while timed, or answering
        from a cache. Stops at the first wrong call of the verification.

        ``remake(args)``: writes a call's values into ``args`` again, in place (``sets`` are then
        this process's own copies, one per call: the bound pass on cuda). The reference then runs
        on them uncopied, and they are written again before the oracle side reads them, whatever
        the reference wrote into them: the values the candidate got, one input set's bytes less
        held (a matrix-vector problem's re-check held five input sets, 40.1 GiB of a 33.0 GiB
        bound, H100, 2026-12-06)."""
        mutations = mutations or {}
        while kept:  # each call's outputs dropped once judged: one less held for the next
            call, k, outs = kept.pop(0)
            if state.failed:
                kept.clear()
                return
            mix, mutation = mutations.get(call, (None, ()))
            if mix or mutation:
                args = timing.mix_values(sets[k], sets[mix[0]], *mix[1:]) if mix else sets[k]
                # the mix's new tensors are this call's own: changed in place, not cloned again
                args = apply_mutation(args, mutation, owned={i for i, (a, b) in enumerate(zip(args, sets[k]))
                                                             if isinstance(a, torch.Tensor) and a is not b})
                share = mix[3] if mix and len(mix) > 3 else timing.MIX_FRACTION
                how = ("" if not mix else f"the values of set {mix[0]}, " if share >= 1
                       else f"1/{round(1 / share)} of its elements from set {mix[0]}, ")
                s = inp.InputSet(f"timed-call-{call}", InputKind.NOMINAL,
                                 f"timing set {k}, {how}{len(mutation)} element(s) changed", 0, args)
                entry = [self._reference_run(s, args), None]
            else:
                args = sets[k]
                s = inp.InputSet(f"timed-call-{call}", InputKind.NOMINAL, f"timing set {k}", 0, args)
                if k not in state.refs:  # the reference run, and its oracle side once a call needs it
                    copy = remake is None or self.ctx.rp.mutates_inputs or self.ctx.rp.aliases_inputs
                    ref = self._reference_run(s, args, copy=copy)
                    if not copy and not isinstance(ref, InputSetResult) and ig.overlaps(ref, args):
                        ref = [r.clone() for r in ref]  # a view of the inputs: kept apart from their rewrite
                    state.refs[k] = [ref, None]
                    if not copy:  # the reference ran on ``args`` themselves
                        state.stale.add(k)
                entry = state.refs[k]
            ref, side = entry
            # ``outs`` are this process's own copies, taken while the worker was stopped; outputs
            # equal to the reference's need no oracle (:meth:`exact_result`)
            r = None if isinstance(ref, InputSetResult) else self.exact_result(s, outs, self.ctx.rp.structure, ref, args)
            if r is None and side is None and not isinstance(ref, InputSetResult):
                if not (mix or mutation) and k in state.stale:  # written again before the oracle side reads them
                    remake(args)
                    state.stale.discard(k)
                side = entry[1] = self._oracle_side(s, args, ref, self.ctx._nominal_rounding)
            if mix or mutation:
                s.release()
            del args
            if isinstance(ref, InputSetResult) or isinstance(side, InputSetResult):
                continue
            if r is None:
                oracle, note, baselines = side
                r = self._judge(s, outs, self.ctx.rp.structure, ref, oracle, note, baselines)
                del oracle
            del outs, ref, side, entry
            state.checked.append(call)
            if r.passed is False:
                self._probe_failed("probe:timed-recheck", (5, 6, 11), r,
                                   f"timed call {call} ({s.transform}) is wrong: {r.fault} (phase detection, "
                                   "cross-call batching, or a cache keyed by part of the input)")
                state.failed = True


def largest_errors(a: list | None, b: list) -> list:
    """Per output, the larger of two :func:`kbv.reference.oracle.output_errors` lists (None
    entries, integer outputs, stay None only where both are None)."""
    if a is None:
        return list(b)
    return [x if y is None else y if x is None else max(x, y) for x, y in zip(a, b)]
