"""Problem vetting: can this problem tell a right kernel from a wrong one? (taxonomy entry 23)

Runs in the reference worker (it imports the problem). Findings (:class:`kbv.model.records.VetFlag`):

* **stochastic**: the reference run twice on the same inputs under different RNG states gives
  outputs whose normalised difference exceeds :data:`STOCHASTIC_TOL` (dropout in training mode,
  random sampling inside ``forward``). No candidate can match such a reference. A smaller non-zero
  difference (atomics, non-deterministic kernels) is only noted.
* **constant-output**: every input set (all distributions, all seeds) gives the same output
  (within :data:`CONSTANT_TOL`, normalised): the answer does not depend on the inputs, so a
  kernel that returns the constant is "correct" (KernelBench-Verified excluded level-2 problems
  23, 80 and 83 for this).
* **under-tolerance**: an all-zeros output passes ``allclose(atol, rtol)`` on every nominal set:
  under the KernelBench protocol a kernel that computes nothing passes.
* **reference-fails**: the reference raises, or gives NaN/Inf, on every nominal set.

Per input set the report also says whether the reference raised or was non-finite (such sets are
dropped in evaluations), whether zeros pass there, the output's RMS, and the eager-fp32
baseline's own error against the float64 oracle.

:func:`inline_findings` applies the same rules to the sets of one evaluation (plus one
determinism re-run), so ``kbv eval`` records and warns about a flagged problem without a separate
``kbv vet``. Flagged problems are left out of aggregate metrics by default (the batch store keeps
the reasons: :meth:`kbv.batch.store.Store.exclude_problem`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from kbv.sandbox import numeric_flags as bl
from kbv.reference import inputs as inp
from kbv.model.paths import cache_root
from kbv.reference.policy import VACUOUS_BASELINE_ERROR, normalised_error
from kbv.reference.oracle import Oracle, OracleUnavailable
from kbv.model.records import (EvalConfig, Environment, InputKind, ProblemRef, VetFinding, VetFlag,
    VetSetResult, VettingReport, to_json, vetting_from_dict)

#: normalised difference between two reference runs (different RNG state) above which the
#: reference is called stochastic. Far above run-to-run rounding noise (~1e-7), far below what
#: dropout or sampling produce (~1).
STOCHASTIC_TOL = 1e-4
#: normalised difference below which two input sets' outputs count as the same.
CONSTANT_TOL = 1e-6
SAMPLE_ELEMENTS = 4096  #: evenly strided elements kept per output for the constant-output check.
DETERMINISM_SEEDS = (1234, 98765)


# Per-set summaries ------------------------------------------------------------------------------

@dataclass(frozen=True)
class OutputSummary:
    """What vetting keeps of one input set's reference outputs (small, on the CPU)."""

    shapes: tuple[tuple[int, ...], ...]
    samples: tuple[torch.Tensor, ...]  #: float64, at most SAMPLE_ELEMENTS each.
    sums: tuple[float, ...]
    rms: float  #: over all floating-point outputs together.
    zeros_pass: bool  #: allclose(zeros, ref, atol, rtol) on every output.
    #: False: shapes and ``zeros_pass`` only (no samples, sums or RMS), made once another set's output
    #: already differed from the first set's (:func:`needs_full_summary`).
    full: bool = True
    #: every element of every output finite: read from the extremes the zeros-pass test reads (a NaN
    #: makes both extremes NaN, an infinity one of them), so the reference's own finiteness check
    #: needs no pass of its own where a summary is taken (``Correctness._check_set``).
    finite: bool = True


#: dtypes whose extremes :func:`summarise` reads before the float64 upcast.
_OWN_EXTREMES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def needs_full_summary(summaries: dict[str, OutputSummary]) -> bool:
    """Whether the next set's summary must be full: the constant-output rule (:func:`findings_from`)
    can still fire, every full summary so far being the same as the first. Once two differ, the
    later sets' summaries need only ``zeros_pass``: four fewer passes over each set's reference
    outputs (the upcast, the sum, the norm, the samples), and the same findings."""
    full = [v for v in summaries.values() if v.full]
    return len(full) < 2 or all(same_output(full[0], v) for v in full[1:])


def summarise(outputs: Sequence[torch.Tensor], atol: float, rtol: float, full: bool = True) -> OutputSummary:
    """Shapes, strided samples, sums, RMS, the zeros-pass test and finiteness, in float64 chunks; with
    ``full`` False the shapes, the zeros-pass test and finiteness alone (one read of a float output, no
    upcast)."""
    from kbv.reference.passes import all_finite, chunk_elements, host_threads
    from kbv.reference.policy import CHUNK_ELEMENTS

    shapes, samples, sums = [], [], []
    sq, n = 0.0, 0
    zeros_pass = finite = True
    for o in outputs:
        shapes.append(tuple(o.shape))
        flat = o.detach().reshape(-1)
        step = max(1, flat.numel() // SAMPLE_ELEMENTS)
        if full:
            sample = flat[::step][:SAMPLE_ELEMENTS]
            # a complex output's real and imaginary parts side by side (a float64 cast drops the imaginary part)
            samples.append((torch.view_as_real(sample.resolve_conj()).reshape(-1) if sample.is_complex() else sample)
                           .to("cpu", torch.float64))
        total = 0.0
        chunk = chunk_elements(flat.device, CHUNK_ELEMENTS)
        with host_threads(flat.device):
            for s in range(0, flat.numel(), chunk):
                part = flat[s:s + chunk]
                if part.is_complex():
                    part = part.abs()
                own = part.dtype in _OWN_EXTREMES
                c = part.to(torch.float64) if full or not own else None
                # |0 - ref| <= atol + rtol * |ref|  <=>  |ref| * (1 - rtol) <= atol; a float output's
                # extremes are exact in its own dtype, so read before the upcast; integers (whose
                # |minimum| may not fit their dtype, and whose aminmax cpu lacks for uint16-64)
                # after it
                lo, hi = torch.aminmax(part if own else c)
                top = float(torch.maximum(lo.abs(), hi.abs()))  # NaN stays NaN: the test fails
                zeros_pass = zeros_pass and top * (1 - rtol) <= atol
                # aminmax propagates NaN and an infinity is an extreme; a complex part's magnitude can
                # overflow where both its parts are finite, so those are read as they are
                finite = finite and (all_finite(flat[s:s + chunk]) if o.is_complex() else math.isfinite(top))
                if not full:
                    continue
                total += float(c.sum())
                if o.is_floating_point():
                    sq += float(torch.linalg.vector_norm(c)) ** 2
        if not full:
            continue
        sums.append(total)
        if o.is_floating_point():
            n += flat.numel()
    return OutputSummary(tuple(shapes), tuple(samples), tuple(sums), math.sqrt(sq / n) if n else 0.0, zeros_pass,
                         full, finite)


def same_output(a: OutputSummary, b: OutputSummary) -> bool:
    """Whether two input sets gave the same output (shapes, samples and sums within CONSTANT_TOL)."""
    if a.shapes != b.shapes:
        return False
    scale = max(a.rms, b.rms)
    for sa, sb, ua, ub, shape in zip(a.samples, b.samples, a.sums, b.sums, a.shapes):
        n = max(1, math.prod(shape))
        if sa.numel() and float((sa - sb).abs().max()) > CONSTANT_TOL * scale:
            return False
        if abs(ua - ub) > CONSTANT_TOL * (scale * n + abs(ua)):
            return False
    return True


def run_difference(rp: Any, args: list) -> float:
    """Max normalised difference between two reference runs on ``args`` (CPU tensors, as drawn)
    under different RNG seeds.

    Raises whatever the reference raises.
    """
    from kbv.reference.build import run_reference
    from kbv.reference.passes import all_finite

    flags = bl.flags_for("eager-fp32")
    args = inp.to_device(args, rp.device, rp.precision)
    outs = []
    for seed in DETERMINISM_SEEDS:
        torch.manual_seed(seed)
        if rp.device.type == "cuda":
            torch.cuda.manual_seed_all(seed)
        outs.append(run_reference(rp, inp.clone_args(args), flags))
    a, b = outs
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return math.inf
    worst = 0.0
    for x, y in zip(a, b):
        if x.is_floating_point() and all_finite(y):  # no full-size mask and copy where nothing is masked
            worst = max(worst, normalised_error(x, y))
        elif x.is_floating_point():
            fin = torch.isfinite(y)
            worst = max(worst, normalised_error(torch.where(fin, x, y), y))
        elif not torch.equal(x, y):
            worst = math.inf
    return worst


# Rules ------------------------------------------------------------------------------------------

def findings_from(summaries: dict[str, OutputSummary], nominal: Sequence[str], *,
                  difference: float | None, nominal_failures: int, nominal_total: int,
                  atol: float) -> tuple[list[VetFinding], list[str]]:
    """Findings and notes from per-set summaries (``name -> summary`` of the sets that ran)."""
    findings: list[VetFinding] = []
    notes: list[str] = []
    if nominal_total and nominal_failures == nominal_total:
        findings.append(VetFinding(VetFlag.REFERENCE_FAILS,
                                   f"the reference raised or was non-finite on all {nominal_total} nominal set(s)"))
    if difference is not None:
        if difference > STOCHASTIC_TOL:
            findings.append(VetFinding(VetFlag.STOCHASTIC,
                                       f"two runs on the same inputs under different RNG seeds differ by "
                                       f"{difference:.3g} (normalised; dropout or sampling in forward?)"))
        elif difference > 0:
            notes.append(f"reference not bitwise reproducible: runs differ by {difference:.2e} (normalised)")
    names = list(summaries)
    # a summary that is not full was made only after two full ones differed (needs_full_summary)
    if len(names) >= 2 and all(summaries[n].full for n in names):
        first = summaries[names[0]]
        if all(same_output(first, summaries[n]) for n in names[1:]):
            findings.append(VetFinding(VetFlag.CONSTANT,
                                       f"the same output on all {len(names)} input sets (rms {first.rms:.3g}): "
                                       "it does not depend on the inputs"))
    nom = [n for n in nominal if n in summaries]
    if nom and all(summaries[n].zeros_pass for n in nom):
        worst = max(summaries[n].rms for n in nom)
        why = ("the reference's output is all zeros there, so an all-zeros output is right under every policy"
               if worst == 0 else f"reference rms up to {worst:.3g}; the kbv policy's normalised error still "
               "rejects zeros")
        findings.append(VetFinding(VetFlag.UNDER_TOLERANCE,
                                   f"an all-zeros output passes allclose(atol={atol:g}) on every nominal set ({why})"))
    zeros_elsewhere = [n for n in names if n not in nom and summaries[n].zeros_pass]
    if zeros_elsewhere:
        notes.append(f"an all-zeros output passes allclose on {', '.join(zeros_elsewhere)}")
    return findings, notes


def inline_findings(rp: Any, summaries: dict[str, OutputSummary], nominal: Sequence[str],
                    nominal_args: list | None, config: EvalConfig) -> tuple[list[VetFinding], list[str]]:
    """The vetting rules over one evaluation's input sets, plus one determinism re-run."""
    difference, notes = None, []
    if nominal_args is not None:
        try:
            difference = run_difference(rp, nominal_args)
        except Exception as exc:  # noqa: BLE001 - the reference already ran on these inputs
            notes.append(f"determinism re-run raised {_first_line(exc)}")
    findings, more = findings_from(summaries, nominal, difference=difference, nominal_failures=0,
                                   nominal_total=len(nominal), atol=config.atol)
    return findings, notes + more


# kbv vet ----------------------------------------------------------------------------------------

def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200]}" if text else type(exc).__name__


def vet_problem(rp: Any, config: EvalConfig, env: Environment | None, seeds: int = 2) -> VettingReport:
    """Vet a built reference problem: ``seeds`` rounds of nominal, D1–D4 and every randomised set.

    Each round draws fresh secret seeds. The reference runs under the eager-fp32 flags; the
    float64 oracle gives the eager-fp32 baseline's own error per set.
    """
    from kbv.reference.build import run_reference

    flags = bl.flags_for("eager-fp32")
    get_inputs = rp.module.get_inputs
    oracle = Oracle(rp.model, rp.device)
    sets: list[inp.InputSet] = []
    for i in range(seeds):
        for s in inp.nominal_sets(get_inputs, 1):
            s.name = f"nominal-{i}"
            sets.append(s)
        for s in inp.hidden_sets(get_inputs, config.hidden, rp.domains):
            s.name = f"{s.name}/{i}" if seeds > 1 else s.name
            sets.append(s)
        for s in inp.randomised_sets(get_inputs, config.distributions, rp.domains):
            s.name = f"{s.name}/{i}" if seeds > 1 else s.name
            sets.append(s)
    results: list[VetSetResult] = []
    summaries: dict[str, OutputSummary] = {}
    nominal_names: list[str] = []
    nominal_failures = 0
    first_nominal_args = None
    notes: list[str] = []
    for s in sets:
        nominal = s.kind is InputKind.NOMINAL
        if nominal:
            nominal_names.append(s.name)
        if s.drop_reason:
            results.append(VetSetResult(s.name, s.kind, s.transform, s.seed, "outside-domain", s.drop_reason))
            continue
        args = inp.to_device(s.args, rp.device, config.precision)
        try:
            ref = run_reference(rp, inp.clone_args(args), flags)
        except Exception as exc:  # noqa: BLE001 - that is what vetting reports
            nominal_failures += nominal
            results.append(VetSetResult(s.name, s.kind, s.transform, s.seed, "raised", _first_line(exc)))
            continue
        finite = all(bool(torch.isfinite(o).all()) for o in ref if o.is_floating_point())
        if not finite:
            nominal_failures += nominal
            results.append(VetSetResult(s.name, s.kind, s.transform, s.seed, "non-finite",
                                        "reference output has NaN/Inf"))
            continue
        if nominal and first_nominal_args is None:
            first_nominal_args = s.args
        summ = summarise(ref, config.atol, config.rtol)
        summaries[s.name] = summ
        base_err, note = None, None
        try:
            o64 = oracle(args)
            errs = [normalised_error(r, o) for r, o in zip(ref, o64) if o.is_floating_point()]
            base_err = max(errs) if errs else None
        except OracleUnavailable as exc:
            note = str(exc)
        results.append(VetSetResult(s.name, s.kind, s.transform, s.seed, "ok", None, summ.zeros_pass,
                                    summ.rms, base_err, note))
    oracle.release()
    difference = None
    if first_nominal_args is not None:
        try:
            difference = run_difference(rp, first_nominal_args)
        except Exception as exc:  # noqa: BLE001
            notes.append(f"determinism re-run raised {_first_line(exc)}")
    findings, more = findings_from(summaries, nominal_names, difference=difference,
                                   nominal_failures=nominal_failures, nominal_total=len(nominal_names),
                                   atol=config.atol)
    notes += more
    vacuous = [r.name for r in results if r.baseline_error is not None and r.baseline_error > VACUOUS_BASELINE_ERROR]
    if vacuous:
        notes.append(f"eager-fp32 reference more than {VACUOUS_BASELINE_ERROR:g} (normalised) from its float64 "
                     f"version on {', '.join(vacuous)}: the kbv budget is vacuous there")
    dropped = [r.name for r in results if r.status != "ok"]
    if dropped:
        notes.append(f"dropped in evaluations: {', '.join(dropped)}")
    return VettingReport(problem=rp.ref, device=config.device, precision=config.precision, atol=config.atol,
                         rtol=config.rtol, seeds=seeds, findings=tuple(findings), sets=tuple(results),
                         notes=tuple(notes), environment=env)


# The vetting cache (orchestrator side: lets kbv eval warn about a problem vetted before) --------

def cache_path(problem: ProblemRef, precision: str) -> Path:
    return cache_root() / "vetting" / f"{problem.sha256[:32]}-{precision}.json"


def save_report(report: VettingReport) -> Path:
    path = cache_path(report.problem, report.precision)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(to_json(report) + "\n")
    tmp.replace(path)
    return path


def cached_report(problem: ProblemRef, precision: str) -> VettingReport | None:
    """The last ``kbv vet`` report of this exact problem file (same bytes), if any."""
    path = cache_path(problem, precision)
    try:
        return vetting_from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
