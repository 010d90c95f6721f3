"""The normalised error and the two correctness policies (judged against :mod:`kbv.reference.oracle`).

Runs only in the reference worker.

**Normalised error** of an output ``y`` against the oracle ``o`` (both taken to float64)::

    err(y, o) = max_i |y_i - o_i| / (|o_i| + rms(o))        rms(o) = sqrt(mean_i o_i^2)

the smallest ``t`` for which ``|y - o| <= t * |o| + t * rms(o)`` holds at every element: a
relative error for elements at or above the output's typical magnitude, an absolute error in
units of that magnitude for the small ones (where a relative error says nothing: zeros,
cancellation). It is invariant to scaling the output, so one budget fits ×0.01 and ×1000 inputs.
An element where ``o`` is finite and ``y`` is not gives ``inf``. An all-zero oracle output
(``rms = 0``) falls back to the absolute error. For several outputs each has its own error.

**Policies** (:data:`POLICIES`):

* ``kbv`` (default): every output's error is at most the budget ::

      k * max(err(eager-fp32), err(eager-tf32), err(input-rounding)) + floor_eps * eps(float32) [+ tf32_floor]

  the baselines' errors measured against the same oracle on the same inputs (on CPU TF32 does
  not exist, so the eager-fp32 error alone sets the budget). ``input-rounding`` is the problem's
  own sensitivity (:data:`INPUT_ROUNDING`): the oracle run again on the inputs moved by one fp32
  rounding, capped at :data:`INPUT_ROUNDING_CAP`; it keeps an ill-conditioned set (a prefix sum
  across cancelling outliers) from being judged against a baseline more exact than fp32
  arithmetic allows (torch's CPU ``cumsum`` accumulates in float64). ``tf32_floor`` (one TF32 ulp,
  2^-10) is added only where TF32 is in play on that set, i.e. the eager-tf32 baseline's error
  is more than :data:`TF32_ACTIVE_RATIO` times eager-fp32's: TF32 implementations may round the
  fp32 operands (cuBLAS) or truncate them (Triton's ``tl.dot`` in tf32, raw ``mma.tf32``), and
  truncation is biased, so on same-sign data its error grows like K·2^-11 where rounding's grows
  like sqrt(K)·2^-11; the floor admits truncating kernels, which are honest TF32. Integer and
  boolean outputs must equal the eager-fp32 reference exactly. ``k``, ``floor_eps`` and
  ``tf32_floor`` are :class:`~kbv.model.records.EvalConfig` fields; their defaults come from the
  measurements in ``docs/correctness.md``.
* ``kbv-compat``: the KernelBench-Verified rule, ``torch.allclose(out, ref32, atol, rtol)`` with
  atol = rtol = 1e-3 (1e-2 for bf16/fp16) against the eager-fp32 reference
  (:func:`kbv.reference.comparison.compare`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from kbv.reference import fused
from kbv.reference.passes import all_finite, chunk_elements, host_threads

POLICIES = ("kbv", "kbv-compat")


#: eager-tf32 error / eager-fp32 error above which TF32 counts as in play on an input set.
TF32_ACTIVE_RATIO = 4.0


#: a baseline error above this (the eager-fp32 reference more than 1 % away from its own float64
#: version) makes the kbv budget vacuous: a stochastic or fp32-ill-conditioned reference. Such
#: sets are named in the verdict's evidence (``vacuous_budget``); vetting flags the stochastic case.
VACUOUS_BASELINE_ERROR = 1e-2


#: ``baseline_errors`` key of the problem's own sensitivity to fp32 rounding of its inputs: the
#: error of the oracle run on the floating-point inputs moved up by one fp32 rounding,
#: ``a + eps * |a|`` (:meth:`Oracle.input_rounding`). A backward-stable fp32 algorithm has an error
#: of this order times a small constant (Higham, *Accuracy and Stability of Numerical Algorithms*,
#: 2nd ed., §1.5-1.6), so a set whose baselines are more exact than that (torch's CPU ``cumsum``
#: accumulates in float64) does not fail honest fp32 kernels: an fp32 ``x @ triu(ones)`` prefix
#: sum (honest row ``cumsum_triu_matmul_torch``, 8 x 256) failed the old budget on 13 of 1500
#: ``outliers`` sets and stays under 0.17 of the budget with this term over
#: 2000 sets of each of outliers, normal and wide-range (docs/correctness.md).
INPUT_ROUNDING = "input-rounding"


#: the input-rounding error counts at most this much (2^-17 = 64 eps(float32), so k × it <= 2^-13
#: at k = 16, under fp16's and bf16's unit roundoff): a discontinuous reference (floor, round,
#: ties) jumps under any perturbation and must not make the budget vacuous.
INPUT_ROUNDING_CAP = 2.0 ** -17


#: tolerances of the allclose sweep stored with every result (atol = rtol = t).
SWEEP_TOLERANCES: tuple[float, ...] = (1e-2, 1e-3, 1e-4)


#: elements handled at a time on a device (32 MiB of float64 per operand: the temporaries of an error
#: pass stay near 250 MiB); on the host :func:`kbv.reference.passes.chunk_elements` takes fewer.
CHUNK_ELEMENTS = 1 << 22


def sweep_key(tol: float) -> str:
    """Key of a tolerance in the sweep mappings: ``"1e-02"``, ``"1e-03"``, ``"1e-04"``."""
    return f"{tol:.0e}"


def floor_for(dtype: torch.dtype, floor_eps: float) -> float:
    """The policy floor: ``floor_eps`` machine epsilons of **float32**, whatever the output dtype.

    The floor only matters where a baseline is (nearly) exact, and there honest alternatives differ
    by a few fp32 ulps of internal arithmetic; a bf16/fp16 output's own rounding already shows in
    the baselines' errors. (Eight bf16 epsilons would be a 6 % allowance.)
    """
    return floor_eps * torch.finfo(torch.float32).eps


def tf32_in_play(baseline_errors: dict[str, float | None]) -> bool:
    """The eager-tf32 baseline's error is over TF32_ACTIVE_RATIO × eager-fp32's (cuda only)."""
    e32, etf = baseline_errors.get("eager-fp32"), baseline_errors.get("eager-tf32")
    return e32 is not None and etf is not None and etf > TF32_ACTIVE_RATIO * e32 and etf > 0


def budget(baseline_errors: dict[str, float | None], dtype: torch.dtype, k: float, floor_eps: float,
           tf32_floor: float = 0.0) -> float:
    """``k * max(baseline errors) + floor_eps * eps(float32)``, plus ``tf32_floor`` where TF32 is in
    play; the :data:`INPUT_ROUNDING` entry counts at most :data:`INPUT_ROUNDING_CAP`. Non-finite
    baseline errors give an infinite budget."""
    errs = [min(v, INPUT_ROUNDING_CAP) if name == INPUT_ROUNDING else v
            for name, v in baseline_errors.items() if v is not None]
    worst = max(errs) if errs else 0.0
    extra = tf32_floor if tf32_in_play(baseline_errors) else 0.0
    return k * worst + floor_for(dtype, floor_eps) + extra


def rms_of(o: torch.Tensor) -> float:
    """Root mean square of the finite elements of ``o``; kept on the tensor (an oracle output is
    judged against several times and never changes), so it is computed once."""
    return _rms_and_finite(o)[0]


def finite_by_rms(o: torch.Tensor) -> bool:
    """Whether every element of ``o`` is finite, read in :func:`rms_of`'s own pass (its RMS is then
    kept on ``o`` for the error passes that follow): a chunk's sum of squares is finite only where
    every element is, and a chunk whose sum is not is settled element by element (finite values
    whose squares overflow count as finite), so the figure is :func:`kbv.reference.passes.all_finite`'s
    in the read an oracle output gets anyway (issue 21). Other dtypes than real floating point: the
    all_finite pass. Like the RMS, the figure is kept on ``o`` under its version counter: an oracle
    output is a new tensor of the float64 forward, and a write that moves no version counter (through
    ``.data`` or the storage) into one handed out already would leave it stale."""
    if not o.is_floating_point():
        return all_finite(o, CHUNK_ELEMENTS)
    return _rms_and_finite(o)[1]


def _rms_and_finite(o: torch.Tensor) -> tuple[float, bool]:
    """(:func:`rms_of`, every element finite), one read of ``o``, kept on the tensor."""
    cached = getattr(o, "_kbv_rms", None)
    if cached is not None and cached[0] == o._version:
        return cached[1], cached[2]
    flat = o.reshape(-1)
    total, count = 0.0, 0
    step = chunk_elements(flat.device, CHUNK_ELEMENTS)
    with host_threads(flat.device):
        for s in range(0, flat.numel(), step):
            c = flat[s:s + step].to(torch.float64)
            square = float(torch.dot(c, c))
            if math.isfinite(square):  # every element finite (a NaN or Inf propagates into the sum)
                total += square
                count += c.numel()
            else:
                fin = torch.isfinite(c)
                total += float(torch.where(fin, c * c, torch.zeros_like(c)).sum())
                count += int(fin.sum())
    rms = math.sqrt(total / count) if count else 0.0
    finite = count == flat.numel()
    try:
        o._kbv_rms = (o._version, rms, finite)
    except (AttributeError, RuntimeError):
        pass
    return rms, finite


def normalised_error(y: torch.Tensor, o: torch.Tensor) -> float:
    """``max_i |y_i - o_i| / (|o_i| + rms(o))`` in float64 (see the module docstring).

    ``y`` is moved to ``o``'s device chunk by chunk. Elements where ``o`` is not finite are
    skipped (a set whose oracle is not finite is dropped before this is called); an element where
    ``o`` is finite and ``y`` is not makes the error ``inf``.

    Raises:
        ValueError: the shapes differ.
    """
    if tuple(y.shape) != tuple(o.shape):
        raise ValueError(f"shape {tuple(y.shape)} != oracle shape {tuple(o.shape)}")
    if o.numel() == 0:
        return 0.0
    rms = rms_of(o)
    return max_error(y, o, rms if rms > 0 else 1.0)  # an all-zero oracle: absolute error


def max_error(y: torch.Tensor, o: torch.Tensor, scale: float) -> float:
    """``max_i |y_i - o_i| / (|o_i| + scale)`` over the elements where ``o`` is finite (inf where
    ``o`` is finite and ``y`` is not), :func:`kbv.reference.passes.chunk_elements` at a time; on a cuda
    device one fused pass (:func:`kbv.reference.fused.max_error`) where every element is finite."""
    if y.device == o.device and fused.available(o.device):  # one read of each (kbv.reference.fused)
        figure = fused.max_error(y, o, scale)
        if figure is not None:
            return figure
    worst = 0.0
    yf, of = y.reshape(-1), o.reshape(-1)
    step = chunk_elements(of.device, CHUNK_ELEMENTS)
    with host_threads(of.device):
        for s in range(0, of.numel(), step):
            oc = of[s:s + step].to(torch.float64)
            yc = yf[s:s + step].to(device=oc.device, dtype=torch.float64, copy=True)
            # in place, no mask: the max is finite only when every element of both is (a NaN or Inf
            # propagates through the difference, the quotient and the max), the common case
            e = float(yc.sub_(oc).abs_().div_(oc.abs().add_(scale)).max())  # ``oc`` may be ``o``: not in place
            if not math.isfinite(e):
                yc = yf[s:s + step].to(device=oc.device, dtype=torch.float64)
                o_fin = torch.isfinite(oc)
                if bool((o_fin & ~torch.isfinite(yc)).any()):
                    return math.inf
                e = float(torch.where(o_fin, (yc - oc).abs() / (oc.abs() + scale), torch.zeros_like(oc)).max())
            worst = max(worst, e)
    return worst


def output_errors(outputs: Sequence[torch.Tensor], oracle: Sequence[torch.Tensor]) -> list[float | None]:
    """Normalised error of each output; None for integer/boolean outputs (compared exactly)."""
    return [normalised_error(y, o) if o.is_floating_point() else None for y, o in zip(outputs, oracle)]


def min_allclose_tolerance(y: torch.Tensor, r: torch.Tensor) -> float:
    """Smallest ``t`` with ``|y - r| <= t + t * |r|`` at every element where both are finite.

    ``allclose(y, r, atol=t, rtol=t)`` passes iff this is ``<= t`` and the NaN/Inf patterns agree,
    so one number gives the whole tolerance sweep. (:func:`kbv.reference.comparison.compare` gives
    the same figure, ``Comparison.min_tolerance``, from its own pass.)
    """
    if r.numel() == 0:
        return 0.0
    worst = 0.0
    yf, rf = y.reshape(-1), r.reshape(-1)
    step = chunk_elements(rf.device, CHUNK_ELEMENTS)
    with host_threads(rf.device):
        for s in range(0, rf.numel(), step):
            rc = rf[s:s + step].to(torch.float64)
            yc = yf[s:s + step].to(device=rc.device, dtype=torch.float64)
            fin = torch.isfinite(rc) & torch.isfinite(yc)
            e = torch.where(fin, (yc - rc).abs() / (1.0 + rc.abs()), torch.zeros_like(rc))
            worst = max(worst, float(e.max()))
    return worst


@dataclass(frozen=True)
class PolicyCheck:
    """Outcome of the ``kbv`` rule on one input set."""

    passed: bool
    error: float | None  #: candidate's normalised error on the binding output.
    budget: float | None  #: that output's budget.
    baseline_errors: dict  #: baseline name → its normalised error on the binding output.
    fault: str | None


def kbv_check(
    outputs: Sequence[torch.Tensor],
    reference: Sequence[torch.Tensor],
    oracle: Sequence[torch.Tensor],
    baselines: dict[str, Sequence[torch.Tensor]] | None = None,
    *,
    k: float,
    floor_eps: float,
    tf32_floor: float = 0.0,
    baseline_errors: dict[str, Sequence[float | None]] | None = None,
) -> PolicyCheck:
    """Apply the ``kbv`` rule. ``outputs`` already match ``reference`` in count, shape and dtype.

    ``baselines`` maps a baseline name to its outputs on the same inputs (eager-fp32 is
    ``reference`` itself); or ``baseline_errors`` gives their :func:`output_errors` already
    (so a large baseline output need not be held until the candidate's arrives). The binding
    output is the one with the largest error / budget.
    """
    cand = output_errors(outputs, oracle)
    base = dict(baseline_errors) if baseline_errors is not None else {
        name: output_errors(outs, oracle) for name, outs in (baselines or {}).items()}
    worst_ratio, binding = -1.0, None
    fault = None
    for i, (o_ref, e) in enumerate(zip(reference, cand)):
        tag = f"output {i}" if len(reference) > 1 else "output"
        if e is None:  # integer / boolean output: exact match with the eager-fp32 reference
            y = outputs[i].to(o_ref.device)
            if not torch.equal(y, o_ref):
                n = int((y != o_ref).sum())
                return PolicyCheck(False, None, None, {}, f"{tag}: {n} of {o_ref.numel()} element(s) differ "
                                                          "from the reference (integer output, compared exactly)")
            continue
        b = {name: errs[i] for name, errs in base.items()}
        bud = budget(b, o_ref.dtype, k, floor_eps, tf32_floor)
        ratio = math.inf if math.isinf(e) else (e / bud if bud > 0 else (0.0 if e == 0 else math.inf))
        if ratio > worst_ratio:
            worst_ratio, binding = ratio, (e, bud, b, tag)
    if binding is None:  # only integer outputs, all equal
        return PolicyCheck(True, None, None, {}, None)
    e, bud, b, tag = binding
    passed = e <= bud
    if not passed:
        if math.isinf(e):
            fault = f"{tag}: NaN/Inf where the fp64 oracle is finite"
        else:
            base_txt = ", ".join(f"{n} {v:.2e}" for n, v in b.items())
            plus = " + TF32 floor" if tf32_in_play(b) and tf32_floor else ""
            fault = (f"{tag}: normalised error {e:.2e} vs the fp64 oracle exceeds the budget {bud:.2e} "
                     f"(= k {k:g} x max({base_txt}) + floor{plus})")
    return PolicyCheck(passed, e, bud, b, fault)
