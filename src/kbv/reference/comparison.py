"""Comparison of candidate outputs with reference outputs. Runs only in the reference worker.

This is the ``kbv-compat`` policy and the structural checks both policies share; the default
``kbv`` policy (normalised error against a float64 oracle, budget from the baselines' own
errors) lives in :mod:`kbv.reference.oracle`.

Rule (KernelBench-Verified protocol): same number of outputs, same shape and dtype; NaN only
where the reference has NaN and ±Inf only where the reference has the same infinity; every
finite element within ``atol + rtol * |ref|`` (``torch.allclose`` semantics) with
atol = rtol = 1e-3 for float32 and 1e-2 for bf16/fp16.

Errors are computed in float64 in chunks (bounded extra memory on large outputs):
``max_abs_error = max |out - ref|`` over elements where both are finite, and
``max_rel_error = max |out - ref| / |ref|`` over those where also ``|ref| > atol`` (a relative
error against a reference at or below the absolute tolerance says nothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from kbv.reference import fused
from kbv.reference.passes import all_finite, chunk_elements, host_threads

CHUNK_ELEMENTS = 1 << 22  #: elements compared at a time on a device (32 MiB of float64 per operand; host: kbv.reference.passes).


@dataclass(frozen=True)
class Comparison:
    passed: bool
    max_abs_error: float | None
    max_rel_error: float | None
    mismatched_elements: int | None
    total_elements: int | None
    fault: str | None  #: one line when the outputs cannot be compared or fail.
    nonfinite_mismatches: int = 0  #: elements where the NaN/Inf pattern differs from the reference.
    #: the smallest ``t`` with ``|out - ref| <= t + t * |ref|`` wherever both are finite: ``allclose``
    #: with atol = rtol = t passes iff this is ``<= t`` and the NaN/Inf patterns agree (the sweep of
    #: ``kbv.reference.policy.SWEEP_TOLERANCES`` in one figure); None where the outputs could not be compared.
    min_tolerance: float | None = None


def reference_is_finite(outputs: Sequence[torch.Tensor]) -> bool:
    """Every floating-point element of ``outputs`` is finite (:func:`kbv.reference.passes.all_finite`)."""
    return all(all_finite(o, CHUNK_ELEMENTS) for o in outputs)


def equals_reference(outputs: Sequence[torch.Tensor], reference: Sequence[torch.Tensor]) -> bool:
    """The candidate's ``outputs`` equal ``reference`` value for value: as many, each of the same
    shape, dtype and device, and ``torch.equal`` (``-0.0`` equals ``0.0``; a NaN equals nothing, so
    a finite reference is matched only by finite outputs). One read of each; no temporary beyond
    torch's own comparison."""
    if len(outputs) != len(reference):
        return False
    for o, r in zip(outputs, reference):
        if o.shape != r.shape or o.dtype != r.dtype or o.device != r.device:
            return False
        if not torch.equal(o, r):
            return False
    return True


#: the tolerance sweep's figure (``Comparison.min_tolerance``) under ``min(atol, rtol)`` by this
#: relative margin proves every element of a chunk within ``atol + rtol * |ref|``, so the count of
#: elements outside is not computed there (rounding of the float64 figures is ~1e-16 relative).
_COUNT_MARGIN = 1e-9


def _finite_chunk(oc: torch.Tensor, rc: torch.Tensor, atol: float, rtol: float) -> tuple | None:
    """Figures of one chunk whose elements are all finite on both sides, in six passes (``max |o -
    r|`` is finite only then: NaN and Inf propagate through the difference and the max); None when
    some are not. Returns (max abs, max rel, min tolerance, elements outside)."""
    diff = (oc - rc).abs_()
    top = float(diff.max())
    if not math.isfinite(top):
        return None
    ar = rc.abs()
    t = float(diff.div(ar + 1.0).max())
    bad = 0
    if t > min(atol, rtol) * (1 - _COUNT_MARGIN):
        bad = int((diff > ar.mul(rtol).add_(atol)).sum())
    rel = float(torch.where(ar > atol, diff, 0.0).div_(ar.clamp_min_(atol)).max())
    return top, rel, t, bad


def compare(
    outputs: Sequence[torch.Tensor],
    reference: Sequence[torch.Tensor],
    *,
    atol: float,
    rtol: float,
) -> Comparison:
    """Compare candidate ``outputs`` with ``reference`` (both flattened lists of tensors); also gives
    the allclose tolerance sweep's figure (``min_tolerance``) from the same pass."""
    if len(outputs) != len(reference):
        return Comparison(False, None, None, None, None,
                          f"forward returned {len(outputs)} output(s), reference returns {len(reference)}")
    max_abs = 0.0
    max_rel = 0.0
    t_min = 0.0
    bad = 0
    nonfinite = 0
    total = 0
    faults = []
    for k, (o, r) in enumerate(zip(outputs, reference)):
        tag = f"output {k}" if len(reference) > 1 else "output"
        if tuple(o.shape) != tuple(r.shape):
            return Comparison(False, None, None, None, None,
                              f"{tag} shape {tuple(o.shape)} != reference shape {tuple(r.shape)}")
        if o.dtype != r.dtype:
            return Comparison(False, None, None, None, None,
                              f"{tag} dtype {o.dtype} != reference dtype {r.dtype}")
        if o.device != r.device:
            o = o.to(r.device)
        n = r.numel()
        total += n
        if r.is_floating_point() and fused.available(r.device):  # one read of each (kbv.reference.fused); None: a NaN or Inf
            figures = fused.allclose_figures(o, r, atol, rtol)
            if figures is not None:
                c_abs, c_rel, c_t, c_bad = figures
                max_abs, max_rel, t_min = max(max_abs, c_abs), max(max_rel, c_rel), max(t_min, c_t)
                bad += c_bad
                continue
        of = o.reshape(-1)
        rf = r.reshape(-1)
        step = chunk_elements(rf.device, CHUNK_ELEMENTS)
        with host_threads(rf.device):
            for s in range(0, n, step):
                oc = of[s:s + step].to(torch.float64)
                rc = rf[s:s + step].to(torch.float64)
                figures = _finite_chunk(oc, rc, atol, rtol)
                if figures is not None:
                    c_abs, c_rel, c_t, c_bad = figures
                    max_abs, max_rel, t_min = max(max_abs, c_abs), max(max_rel, c_rel), max(t_min, c_t)
                    bad += c_bad
                    continue
                r_nan = torch.isnan(rc)
                r_inf = torch.isinf(rc)
                o_nan = torch.isnan(oc)
                o_inf = torch.isinf(oc)
                nan_bad = int((o_nan != r_nan).sum())
                inf_bad = int((r_inf & (oc != rc)).sum()) + int((o_inf & ~r_inf).sum())
                if nan_bad or inf_bad:
                    faults.append(f"{tag}: {nan_bad} NaN and {inf_bad} Inf element(s) where the reference differs")
                fin = torch.isfinite(rc) & torch.isfinite(oc)
                diff = (oc - rc).abs()
                diff = torch.where(fin, diff, torch.zeros_like(diff))
                tol = atol + rtol * rc.abs()
                chunk_bad = int((diff > torch.where(fin, tol, torch.full_like(tol, math.inf))).sum())
                bad += chunk_bad + nan_bad + inf_bad
                nonfinite += nan_bad + inf_bad
                max_abs = max(max_abs, float(diff.max()))
                t_min = max(t_min, float(torch.where(fin, diff / (1.0 + rc.abs()), 0.0).max()))
                big = fin & (rc.abs() > atol)
                rel = torch.where(big, diff / rc.abs().clamp_min(atol), torch.zeros_like(diff))
                max_rel = max(max_rel, float(rel.max()))
    passed = bad == 0
    fault = None
    if faults:
        fault = faults[0]
    elif not passed:
        fault = f"{bad} of {total} element(s) outside atol={atol:g} + rtol={rtol:g}*|ref| (max abs error {max_abs:.3g})"
    return Comparison(passed, max_abs, max_rel, bad, total, fault, nonfinite, t_min)
